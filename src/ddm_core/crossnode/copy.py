"""Copying a cross-node statement's parts to the gathering node, written once for every runner.

:func:`copy_steps` is a generator that does no I/O: it yields what to do —
run a statement on a connection that holds copies (:class:`OnTarget`), start
reading a part (:class:`ReadPart`, answered with its column names and type
codes), fetch the next rows of that read (:class:`FetchRows`), insert rows into
a copy (:class:`InsertRows`) — and the runner (threads, asyncio) answers each
with its own calls. The bounds are checked here, so every runner enforces
them the same way (docs/cross-node-queries.md#bounds).
"""

from __future__ import annotations

import functools
from types import MappingProxyType
from typing import Any, Callable, Generic, Generator, Mapping, NamedTuple, Sequence, TypeVar

from ddm_core.crossnode.client_join import Part, key_columns, plain_keys
from ddm_core.dialects import Dialect, dialect_for
from ddm_core.errors import JoinLimitError
from ddm_core.metadata.model import RuntimeSettings
from ddm_core.route.crossnode import COPY_BATCH, MAX_KEYS, CrossNodePlan, params_for, with_keys

__all__ = ["OnTarget", "Sessions", "ReadPart", "FetchRows", "InsertRows", "Step", "copy_steps", "BATCH_ROWS", "CLIENT_JOIN_ROWS", "Held"]

BATCH_ROWS = COPY_BATCH  # rows fetched from a part and inserted into its copies at a time


class OnTarget(NamedTuple):
    """Run ``sql`` on the connection to ``data_source`` that holds the copies."""

    data_source: str
    sql: str
    drop: str | None = None  # set for a CREATE: the statement that removes what it made


class ReadPart(NamedTuple):
    """Start reading a part (logic SQL, routed): answered with its DB-API description."""

    sql: str
    params: Any
    stream: bool | None  # None (a whole part): the executor's choice, which streams a read of several
    # units; False: a narrowed part (the rows of a bounded list of keys), read at once


class FetchRows(NamedTuple):
    """The next rows of the open read (at most ``size``; none: it is over)."""

    size: int


class InsertRows(NamedTuple):
    """Insert ``rows`` into a copy on every target (``sql`` has one placeholder per column, in the
    driver's style)."""

    sql: str
    rows: Sequence[Sequence[Any]]


Step = OnTarget | ReadPart | FetchRows | InsertRows
Held = dict[int, Part]  # parts kept for a client join: index → (description, rows)


T = TypeVar("T")


class Sessions(Generic[T]):
    """The transaction the copies live in: the caller's, or a local one opened on first need (``begin``);
    and the DROPs that remove the copies made so far, as ``(data source, statement)``."""

    def __init__(self, tx: T | None, begin: Callable[[], T]) -> None:
        self.tx = tx
        self.own: T | None = None
        self._begin = begin
        self.drops: list[tuple[str, str]] = []

    def session(self) -> T:
        if self.tx is not None:
            return self.tx
        if self.own is None:
            self.own = self._begin()
        return self.own


class Meter:
    """Rows and bytes read from the parts, against ``runtime.maxJoinRows`` / ``maxJoinMemoryMb``."""

    def __init__(self, runtime: RuntimeSettings) -> None:
        self.rows = 0
        self.bytes = 0
        self.max_rows = runtime.max_join_rows
        self.max_bytes = runtime.max_join_memory_mb * 1024 * 1024

    def add(self, table: str, rows: Sequence[Sequence[Any]], alias: str = "") -> None:
        """Count ``rows`` read for ``table`` (``alias``: what the statement calls it, when not its name)."""
        self.rows += len(rows)
        self.bytes += sum(_size(row) for row in rows)
        if self.rows > self.max_rows:
            self._fail(table, alias, "runtime.maxJoinRows", self.max_rows, "rows", f"{self.rows} rows")
        if self.bytes > self.max_bytes:
            self._fail(table, alias, "runtime.maxJoinMemoryMb", self.max_bytes // 1048576, "MB",
                       f"{self.bytes / 1048576:.1f} MB")

    def _fail(self, table: str, alias: str, setting: str, limit: int, unit: str, read: str) -> None:
        named = f"{table!r} ({alias})" if alias and alias != table else repr(table)
        raise JoinLimitError(
            f"cross-node statement stopped while reading {named}: its parts gave {read} so far, more than "
            f"{setting} ({limit} {unit}) allows. Narrow the statement (a shard key or a more selective "
            f"condition on a table), or raise {setting}",
            table=table, rows=self.rows, megabytes=round(self.bytes / 1048576, 1), setting=setting, limit=limit,
        )


def _size(row: Sequence[Any]) -> int:
    """Roughly the bytes a row takes (strings and bytes by length, other values 16)."""
    return 16 + sum(len(v) if isinstance(v, (str, bytes, bytearray)) else 16 for v in row)


#: A simple statement's parts are joined in the client while they hold at most this many rows in all.
CLIENT_JOIN_ROWS = 20_000


def copy_steps(plan: CrossNodePlan, runtime: RuntimeSettings) -> Generator[Step, Any, Held | None]:
    """Copy every part of ``plan`` it reads into its temporary table on each target, narrowing as planned.

    A plan with a client-join shape (``plan.local``) keeps its parts in memory instead, as long as
    they are few and their keys plain (:mod:`.client_join`); it then returns them, and nothing was
    copied. Otherwise what it held is copied at once, and the rest streamed as usual (``None``).
    """
    s = plan.statement
    dialect = dialect_for(s.dialect)
    meter = Meter(runtime)
    wanted = {(e.source, e.source_column.lower()) for e in plan.narrow.values()}
    values: dict[tuple[int, str], dict[Any, None] | None] = {}  # distinct values (None: too many to send)
    held: Held | None = {} if plan.local is not None else None
    kinds: dict[int, dict[str, str]] = {}  # per part read, its key columns' kinds as its description gives them
    plain = key_columns(plan.local) if plan.local is not None else {}
    for k in plan.order:
        part = s.parts[k]
        sql, params = part.read, params_for(part.read, plan.params)
        by = plan.narrow.get(k)
        if by is not None:
            keys = values.get((by.source, by.source_column.lower()))
            if keys is not None and not dialect.narrows_by(keys):
                keys = None  # this backend's IN would not keep every row the join pairs: read it whole
            if keys is not None:
                if not keys:  # the other side has no row: none of this part's rows can join
                    if held is not None:
                        yield from _copy_held(plan, dialect, held, kinds)
                        held = None
                    yield from _create(plan, dialect, k)
                    continue
                sql, params = with_keys(s.narrowed[(k, by.target_column)], list(keys), plan.params)
        description = yield ReadPart(sql, params, None if sql is part.read else False)
        names = [str(d[0]) for d in description]
        lowered = [n.lower() for n in names]
        kinds[k] = {n: kind for n, d in zip(lowered, description) if (kind := dialect.key_kind(d[1])) is not None}
        if held is None:
            yield from _create(plan, dialect, k, description, kinds)
        else:
            held[k] = (description, [])
        collect = [(lowered.index(c), (src, c)) for src, c in wanted if src == k and c in lowered]
        for _, key in collect:
            values[key] = {}
        compared = [lowered.index(c) for c in plain.get(k, ()) if c in lowered]
        while True:
            rows = yield FetchRows(BATCH_ROWS)
            if not rows:
                break
            meter.add(part.table, rows, part.qualifier)
            for index, key in collect:
                seen = values[key]
                if seen is not None:
                    seen.update((row[index], None) for row in rows if row[index] is not None)
                    if len(seen) > MAX_KEYS:
                        values[key] = None  # too many to send as IN lists: the other part is read whole
            if held is not None:
                held[k][1].extend(rows)
                if meter.rows <= CLIENT_JOIN_ROWS and plain_keys(compared, rows):
                    continue
                yield from _copy_held(plan, dialect, held, kinds)  # too many rows, or keys Python cannot compare
                held = None
                continue
            yield InsertRows(_insert(dialect, part.temp, tuple(names)), rows)
    return held


def _create(plan: CrossNodePlan, dialect: Dialect, k: int, description: Sequence[Sequence[Any]] = (),
            kinds: Mapping[int, Mapping[str, str]] = MappingProxyType({})) -> Generator[Step, Any, None]:  # fmt: skip
    """Create part ``k``'s copy on every target, indexed on its join columns (``description``: the part's
    columns as read, for their types; none when nothing was read) that compare with their kind (``kinds``:
    per part read, its columns' kinds)."""
    part = plan.statement.parts[k]
    types = {str(d[0]).lower(): d[1] for d in description}
    keys = [(c, types[c.lower()]) for c in part.keys if c.lower() in types and _indexable(plan, kinds, k, c)]
    for ds in plan.targets:
        statements = dialect.temporary_copy(part.temp, plan.creates[(k, ds)], keys)
        yield OnTarget(ds, statements[0], drop=dialect.drop_temporary(part.temp))
        for index in statements[1:]:
            yield OnTarget(ds, index)


def _indexable(plan: CrossNodePlan, kinds: Mapping[int, Mapping[str, str]], k: int, column: str) -> bool:
    """May part ``k``'s copy be indexed on ``column``? Not when a column it is compared with is of another kind
    (as read, else as declared; an unknown kind is taken to be its own): MariaDB looks a value up in an index by
    converting it to the column's type, where the comparison itself compares a text with an integer as numbers
    (``'1e1' = 10``), so the lookup would miss rows the statement pairs (docs/cross-node-queries.md#strategies)."""
    parts = plan.statement.parts

    def kind_of(j: int, name: str) -> str | None:
        lowered = name.lower()
        read = kinds.get(j, {}).get(lowered)
        return read if read is not None else dict(parts[j].declared).get(lowered)

    own = kind_of(k, column)
    if own is None:
        return True
    others = (kind_of(j, theirs) for mine, j, theirs in parts[k].pairs if mine.lower() == column.lower())
    return all(other is None or other == own for other in others)


def _copy_held(plan: CrossNodePlan, dialect: Dialect, held: Held,
               kinds: Mapping[int, Mapping[str, str]]) -> Generator[Step, Any, None]:  # fmt: skip
    """Leave the client join: copy what was held, part by part."""
    for k, (description, rows) in held.items():
        yield from _create(plan, dialect, k, description, kinds)
        insert = _insert(dialect, plan.statement.parts[k].temp, tuple(str(d[0]) for d in description))
        for start in range(0, len(rows), BATCH_ROWS):
            yield InsertRows(insert, rows[start:start + BATCH_ROWS])


@functools.lru_cache(maxsize=1024)
def _insert(dialect: Dialect, table: str, names: tuple[str, ...]) -> str:
    mark = "?" if dialect.paramstyle == "qmark" else "%s"
    columns = ", ".join(dialect.identifier(n) for n in names)
    return f"INSERT INTO {dialect.identifier(table)} ({columns}) VALUES ({', '.join([mark] * len(names))})"
