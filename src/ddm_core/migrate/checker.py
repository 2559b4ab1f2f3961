"""The consistency checker: do two row sources hold the same logical rows? (``ddm verify``)

A :class:`RowSource` is a set of logical rows: one or more physical tables
(``(data source, table)`` parts, e.g. the two tables of a data source, or a
legacy single table) and optionally a :class:`SlotFilter` keeping only the rows
whose shard key hashes to some slots (the moving slots of a migration). The
:class:`Checker` compares two of them with the same primary key:

1. **Chunks** in primary-key order of about ``chunk_rows`` rows (boundaries
   walked on side A's largest part, one index range query each); per chunk
   and side a :class:`Digest` — row count, BIT_XOR and the sum modulo 2**64 of
   a 64-bit row hash — computed in SQL where no slot filter applies (the rows
   never leave the server), else from per-row hashes the server computes,
   filtered by slot on the compiled batch path.
2. A chunk whose digests differ is **bisected** at the median key of the side
   with more rows until a piece holds at most ``leaf_rows`` rows; there the
   per-row hashes of both sides are compared and the differing rows read in
   full: **missing** (only in A), **extra** (only in B), **differing** (a column
   value differs), listed as (key, column, old value, new value).
3. A column difference that is only a lower DATETIME / TIME precision on one
   side (the values agree to the lower precision), or only case / trailing
   spaces between columns of different collations, is counted as
   ``precision`` / ``collation``, not as lost or changed data; the column
   definitions that differ are reported as notes.

The row hash (docs/migration.md#the-consistency-checker) is the first 64 bits
of MD5 over a canonical text of the row: each column as ``length:text``
(joined by ``,``), followed by the NULL bitmap (so NULL and ``''`` differ and
no separator inside a value can make two rows alike); temporal columns cast
to 6 fractional digits (``DATETIME(3)`` and ``DATETIME(6)`` holding the same
instant hash alike); text converted to utf8mb4 (the character set does not
matter, the characters do).

The sample mode (:meth:`Checker.sample`) reads ``n`` random keys of side A
and compares those rows field by field on both sides.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
from concurrent.futures import ThreadPoolExecutor
import random
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Callable, Iterable, Iterator, Literal, Protocol, Sequence

import numpy as np

from ddm_core.algorithms.slot_based import GeneAlgorithm, SlotsAlgorithm
from ddm_core.errors import ConsistencyCheckError
from ddm_core.metadata.model import ShardedTable, ShardingConfig
from ddm_core.migrate.connections import Connections
from ddm_core.migrate.plan import MigrationPlan, slots_of_values
from ddm_core.migrate.tables import keys_in, primary_key, quote, table_stats

__all__ = [
    "Digest",
    "SlotFilter",
    "RowFilter",
    "RowSource",
    "ColumnInfo",
    "RowShape",
    "has_crc32c",
    "ColumnDifference",
    "RowDifference",
    "CheckReport",
    "Checker",
    "row_hash_sql",
    "migration_sides",
    "CHUNK_ROWS",
    "LEAF_ROWS",
]

#: Rows per chunk compared by digest.
CHUNK_ROWS = 10_000
#: A bisected piece this small is compared row by row.
LEAF_ROWS = 256
#: Keys per ``IN (...)`` list when rows are read in full.
_IN_BATCH = 500
_MASK = (1 << 64) - 1
_TEMPORAL = {"datetime", "timestamp", "time"}
_TEXT = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set"}

Key = tuple[Any, ...]
Range = tuple["Key | None", "Key | None"]  # (after, up to and including); None: unbounded


@dataclass(frozen=True, slots=True)
class Digest:
    """Rows of a key range and the sum modulo 2**64 of their 64-bit hashes (order-independent).

    A sum, not an XOR: two copies of a row do not cancel out.
    """

    rows: int = 0
    total: int = 0

    def __add__(self, other: "Digest") -> "Digest":
        return Digest(self.rows + other.rows, (self.total + other.total) & _MASK)

    def __sub__(self, other: "Digest") -> "Digest":
        return Digest(self.rows - other.rows, (self.total - other.total) & _MASK)

    @property
    def hex(self) -> str:
        """32 hex digits, rows then sum (fits ``ddm_migration.checksum``)."""
        return f"{self.rows & _MASK:016x}{self.total:016x}"

    @classmethod
    def of(cls, hashes: np.ndarray) -> "Digest":
        h = np.asarray(hashes, dtype=np.uint64)
        return cls(int(h.size), int(h.sum(dtype=np.uint64))) if h.size else cls()


class RowFilter(Protocol):
    """Which rows a :class:`RowSource` keeps, by the value of one column."""

    @property
    def column(self) -> str: ...

    def keep(self, values: Sequence[Any]) -> np.ndarray:
        """A bool mask over ``values`` (one batch call)."""
        ...


@dataclass(frozen=True, slots=True)
class SlotFilter:
    """Keep only rows whose ``column`` hashes to a slot in ``wanted`` (a bool mask over every slot)."""

    column: str
    slots_of: Callable[[Sequence[Any]], np.ndarray]
    wanted: np.ndarray

    @classmethod
    def of_table(cls, table: ShardedTable, slots: Iterable[int]) -> "SlotFilter":
        """The rows of ``slots`` of ``table``'s database strategy (SLOTS or GENE)."""
        sharder = table.database_strategy.sharder
        if not isinstance(sharder, (SlotsAlgorithm, GeneAlgorithm)):
            raise ConsistencyCheckError(
                f"table {table.name!r} is not sharded by SLOTS or GENE: rows cannot be filtered by slot",
                table=table.name,
            )
        bits = sharder.slot_bits if isinstance(sharder, SlotsAlgorithm) else sharder.gene_bits
        column = table.database_strategy.column or ""
        wanted = np.zeros(1 << bits, dtype=bool)
        wanted[np.asarray(sorted(set(slots)), dtype=np.int64)] = True

        def slots_of(values: Sequence[Any]) -> np.ndarray:
            return slots_of_values(sharder, column, values)

        return cls(column, slots_of, wanted)

    def keep(self, values: Sequence[Any]) -> np.ndarray:
        """A bool mask: which of these shard-key values are in a wanted slot (one batch call)."""
        if not len(values):
            return np.zeros(0, dtype=bool)
        return np.asarray(self.wanted[self.slots_of(values)], dtype=bool)


HashKind = Literal["crc32c", "md5"]


@dataclass(frozen=True, slots=True)
class RowShape:
    """The columns compared, in order, and the row hash both sides compute over them.

    ``crc32c``: ``CRC32(text) << 32 | CRC32C(text)`` (MariaDB 10.8+; twice as fast);
    ``md5``: the first 64 bits of ``MD5(text)`` (every MySQL / MariaDB).
    """

    columns: tuple["ColumnInfo", ...]
    hash: HashKind = "crc32c"


@dataclass(frozen=True, slots=True)
class ColumnInfo:
    """What the checker needs of a column's definition."""

    name: str
    data_type: str
    column_type: str
    precision: int | None
    collation: str | None


class RowSource:
    """Logical rows held by one or more physical tables, optionally only some slots' rows.

    Args:
        conns: Connections reaching every part's data source.
        parts: ``(data source, physical table)`` pairs; a primary key is in at most one.
        slots: Keep only the rows of these slots.
        label: How reports name this side (default: the parts).
    """

    def __init__(
        self,
        conns: Connections,
        parts: Sequence[tuple[str, str]],
        *,
        slots: RowFilter | None = None,
        label: str | None = None,
    ) -> None:
        if not parts:
            raise ConsistencyCheckError("a row source needs at least one physical table")
        self.conns = conns
        self.parts = tuple((str(ds), str(t)) for ds, t in parts)
        self.slots = slots
        self.label = label or ", ".join(f"{ds}.{t}" for ds, t in self.parts)
        ds0, t0 = self.parts[0]
        self.columns = _columns(conns, ds0, t0)  # first: names a missing table as missing
        self.key = primary_key(conns, ds0, t0)

    def __repr__(self) -> str:
        return f"RowSource({self.label})"

    # -- SQL pieces ------------------------------------------------------------------------

    def _q(self, ds: str, name: str) -> str:
        return quote(self.conns, ds, name)

    def _where(self, ds: str, rng: Range) -> tuple[str, list[Any]]:
        keys = [self._q(ds, k) for k in self.key]
        tup = f"({', '.join(keys)})" if len(keys) > 1 else keys[0]
        marks = f"({', '.join(['%s'] * len(keys))})" if len(keys) > 1 else "%s"
        where: list[str] = []
        params: list[Any] = []
        if rng[0] is not None:
            where.append(f"{tup} > {marks}")
            params.extend(rng[0])
        if rng[1] is not None:
            where.append(f"{tup} <= {marks}")
            params.extend(rng[1])
        return (" WHERE " + " AND ".join(where)) if where else "", params

    def _shard_pos(self) -> tuple[str | None, int]:
        """The shard column to read besides the key (``None``: it is a key column) and its row position."""
        assert self.slots is not None
        lower = [k.lower() for k in self.key]
        if self.slots.column.lower() in lower:
            return None, lower.index(self.slots.column.lower())
        return self.slots.column, len(self.key)

    # -- reads -----------------------------------------------------------------------------

    def digest(self, rng: Range, shape: RowShape) -> Digest:
        """The digest of this side's rows in ``rng`` (per part: SQL aggregate, or filtered per-row hashes)."""
        total = Digest()
        for ds, table in self.parts:
            if self.slots is None:
                where, params = self._where(ds, rng)
                h = row_hash_sql(self.conns, ds, shape)
                sql = f"SELECT COUNT(*), SUM({h}) FROM {self._q(ds, table)}{where}"
                n, s = self.conns.query(ds, sql, params or None)[0]
                total = total + Digest(int(n), int(Decimal(s or 0)) & _MASK)
            else:
                hashes = self._hashes_of_part(ds, table, rng, shape)
                total = total + Digest.of(np.fromiter(hashes.values(), dtype=np.uint64, count=len(hashes)))
        return total

    def digest_of_keys(self, keys: Sequence[Key], shape: RowShape) -> Digest:
        """The digest of this side's rows with these keys, aggregated in SQL (no slot filter applies)."""
        total = Digest()
        for ds, table in self.parts:
            h = row_hash_sql(self.conns, ds, shape)
            for where, params in keys_in(self.conns, ds, self.key, keys):
                c, sm = self.conns.query(ds, f"SELECT COUNT(*), SUM({h}) FROM {self._q(ds, table)} WHERE {where}",
                                         params)[0]
                total = total + Digest(int(c), int(Decimal(sm or 0)) & _MASK)
        return total

    def _hashes_of_part(self, ds: str, table: str, rng: Range, shape: RowShape) -> dict[Key, int]:
        where, params = self._where(ds, rng)
        keys = [self._q(ds, k) for k in self.key]
        extra: list[str] = []
        at = 0
        if self.slots is not None:
            col, at = self._shard_pos()
            if col is not None:
                extra = [self._q(ds, col)]
        sql = (f"SELECT {', '.join([*keys, *extra])}, {row_hash_sql(self.conns, ds, shape)} "
               f"FROM {self._q(ds, table)}{where}")
        rows = self.conns.query(ds, sql, params or None)
        if self.slots is not None and rows:
            keep = self.slots.keep([r[at] for r in rows])
            rows = [r for r, k in zip(rows, keep.tolist()) if k]
        n = len(self.key)
        return {tuple(r[:n]): int(r[-1]) for r in rows}

    def hashes(self, rng: Range, shape: RowShape) -> tuple[dict[Key, int], list[Key]]:
        """``key -> row hash`` of every row of this side in ``rng``, and the keys found in two parts."""
        out: dict[Key, int] = {}
        twice: list[Key] = []
        for ds, table in self.parts:
            found = self._hashes_of_part(ds, table, rng, shape)
            twice.extend(k for k in found if k in out)
            out.update(found)
        return out, twice

    def rows_of(self, keys: Sequence[Key], shape: RowShape) -> dict[Key, tuple[Any, ...]]:
        """``key -> column values`` (in ``shape`` order) of the rows of ``keys`` this side has."""
        columns = shape.columns
        out: dict[Key, tuple[Any, ...]] = {}
        n = len(self.key)
        names = [c.name for c in columns]
        shard_at = None
        if self.slots is not None:
            lower = [x.lower() for x in (*self.key, *names)]
            if self.slots.column.lower() not in lower:
                names = [*names, self.slots.column]
                lower.append(self.slots.column.lower())
            shard_at = lower.index(self.slots.column.lower())
        for ds, table in self.parts:
            select = ", ".join(self._q(ds, c) for c in (*self.key, *names))
            for where, params in keys_in(self.conns, ds, self.key, keys, _IN_BATCH):
                rows = self.conns.query(ds, f"SELECT {select} FROM {self._q(ds, table)} WHERE {where}", params)
                if shard_at is not None and rows:
                    keep = self.slots.keep([r[shard_at] for r in rows])  # type: ignore[union-attr]
                    rows = [r for r, k in zip(rows, keep.tolist()) if k]
                for r in rows:
                    out[tuple(r[:n])] = tuple(r[n : n + len(columns)])
        return out

    def biggest_part(self) -> tuple[str, str]:
        """The part with the most rows (``information_schema`` estimate)."""
        if len(self.parts) == 1:
            return self.parts[0]
        return max(self.parts, key=lambda p: table_stats(self.conns, p[0], p[1]).rows)

    def key_at(self, part: tuple[str, str], rng: Range, offset: int) -> Key | None:
        """The key ``offset`` rows into ``rng`` of one part (``None``: fewer rows)."""
        ds, table = part
        where, params = self._where(ds, rng)
        keys = ", ".join(self._q(ds, k) for k in self.key)
        sql = f"SELECT {keys} FROM {self._q(ds, table)}{where} ORDER BY {keys} LIMIT 1 OFFSET {int(offset)}"
        rows = self.conns.query(ds, sql, params or None)
        return tuple(rows[0]) if rows else None

    def part_rows(self, part: tuple[str, str], rng: Range) -> int:
        ds, table = part
        where, params = self._where(ds, rng)
        return int(self.conns.query(ds, f"SELECT COUNT(*) FROM {self._q(ds, table)}{where}", params or None)[0][0])

    def random_keys(self, n: int, rng: random.Random) -> list[Key]:
        """Up to ``n`` distinct random keys of this side's rows (after the slot filter)."""
        found: dict[Key, None] = {}
        for attempt in range(4):
            want = n - len(found)
            if want <= 0:
                break
            for ds, table in self.parts:
                per = max(1, -(-want * (2 if self.slots is not None else 1) // len(self.parts)))
                keys = ", ".join(self._q(ds, k) for k in self.key)
                extra = ""
                at = 0
                if self.slots is not None:
                    col, at = self._shard_pos()
                    extra = f", {self._q(ds, col)}" if col is not None else ""
                seed = rng.randrange(1 << 30)
                rows = self.conns.query(
                    ds, f"SELECT {keys}{extra} FROM {self._q(ds, table)} ORDER BY RAND({seed}) LIMIT {per}"
                )
                if self.slots is not None and rows:
                    keep = self.slots.keep([r[at] for r in rows])
                    rows = [r for r, k in zip(rows, keep.tolist()) if k]
                for r in rows:
                    found.setdefault(tuple(r[: len(self.key)]), None)
        return list(found)[:n]


def _columns(conns: Connections, ds: str, table: str) -> list[ColumnInfo]:
    rows = conns.query(
        ds,
        "SELECT column_name, data_type, column_type, datetime_precision, collation_name "
        "FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = %s "
        "ORDER BY ordinal_position",
        (table,),
    )
    if not rows:
        raise ConsistencyCheckError(f"table {table!r} does not exist on data source {ds!r}",
                                    table=table, data_source=ds)
    return [ColumnInfo(str(r[0]), str(r[1]).lower(), str(r[2]).lower(),
                       int(r[3]) if r[3] is not None else None, r[4]) for r in rows]


def row_hash_sql(conns: Connections, data_source: str, shape: RowShape) -> str:
    """The SQL expression of a row's 64-bit hash (BIGINT UNSIGNED) over ``shape``'s columns."""
    parts, nulls = [], []
    for c in shape.columns:
        name = quote(conns, data_source, c.name)
        if c.data_type in ("datetime", "timestamp"):
            text = f"CAST({name} AS DATETIME(6))"
        elif c.data_type == "time":
            text = f"CAST({name} AS TIME(6))"
        elif c.data_type in _TEXT:
            text = f"CONVERT({name} USING utf8mb4)"
        else:
            text = name
        parts.append(f"CONCAT(LENGTH({text}), ':', {text})")
        nulls.append(f"ISNULL({name})")
    canonical = f"CONCAT_WS(',', {', '.join(parts)}, CONCAT({', '.join(nulls)}))"
    if shape.hash == "crc32c":
        return f"(CRC32({canonical}) << 32 | CRC32C({canonical}))"
    return f"CAST(CONV(LEFT(MD5({canonical}), 16), 16, 10) AS UNSIGNED)"


def has_crc32c(conns: Connections, data_source: str) -> bool:
    """Does the server of ``data_source`` have ``CRC32C()`` (MariaDB 10.8 and later)?"""
    version = str(conns.query(data_source, "SELECT VERSION()")[0][0])
    return conns.dialect(data_source).has_crc32c(version)


@dataclass(frozen=True, slots=True)
class ColumnDifference:
    """One column of one row: ``kind`` is ``value``, ``precision`` or ``collation``."""

    column: str
    old: Any
    new: Any
    kind: Literal["value", "precision", "collation"] = "value"


@dataclass(frozen=True, slots=True)
class RowDifference:
    """A row that differs: ``missing`` (only in A), ``extra`` (only in B), ``duplicated`` (in two tables of B),
    ``differing``, ``precision``, ``collation``."""

    key: Key
    kind: Literal["missing", "extra", "duplicated", "differing", "precision", "collation"]
    columns: tuple[ColumnDifference, ...] = ()

    def lines(self) -> list[str]:
        key = ", ".join(map(str, self.key))
        if not self.columns:
            return [f"({key}): {self.kind}"]
        return [f"({key}): {c.column}: {c.old!r} -> {c.new!r}" + ("" if c.kind == "value" else f" ({c.kind})")
                for c in self.columns]


@dataclass(slots=True)
class CheckReport:
    """What a check found.

    Attributes:
        a / b: The two sides' labels.
        rows_a / rows_b: Rows compared on each side (sample mode: keys sampled and found).
        chunks / mismatched_chunks: Chunks compared and those whose digests differed.
        missing / extra / differing: Rows only in A, only in B, with a value that differs.
        duplicated: Keys of B found in two of its physical tables.
        precision / collation: Rows differing only by a lower temporal precision or by collation.
        differences: The differing rows, at most ``max_listed`` of them.
        notes: Column definitions that differ (precision, collation, type) and columns not compared.
    """

    a: str
    b: str
    rows_a: int = 0
    rows_b: int = 0
    chunks: int = 0
    mismatched_chunks: int = 0
    missing: int = 0
    extra: int = 0
    duplicated: int = 0
    differing: int = 0
    precision: int = 0
    collation: int = 0
    differences: list[RowDifference] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    max_listed: int = 1000

    @property
    def consistent(self) -> bool:
        """No row lost, added or changed (precision and collation differences are reported, not counted)."""
        return self.missing == 0 and self.extra == 0 and self.duplicated == 0 and self.differing == 0

    @property
    def listed_all(self) -> bool:
        return len(self.differences) == self.found

    @property
    def found(self) -> int:
        """Rows that differ in any way (precision and collation included)."""
        return self.missing + self.extra + self.duplicated + self.differing + self.precision + self.collation

    def add(self, diff: RowDifference) -> None:
        setattr(self, diff.kind, getattr(self, diff.kind) + 1)
        if len(self.differences) < self.max_listed:
            self.differences.append(diff)

    def merge(self, other: "CheckReport") -> None:
        """Add ``other``'s counts and differences (a check made of several pairs of sides)."""
        for name in ("rows_a", "rows_b", "chunks", "mismatched_chunks", "missing", "extra", "duplicated", "differing",
                     "precision", "collation"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        room = self.max_listed - len(self.differences)
        self.differences.extend(other.differences[: max(room, 0)])
        self.notes.extend(n for n in other.notes if n not in self.notes)

    def summary(self) -> str:
        return (f"{self.rows_a:,} rows in {self.a}, {self.rows_b:,} in {self.b}: {self.missing} missing, "
                f"{self.extra} extra, {self.duplicated} duplicated, {self.differing} differing, "
                f"{self.precision} precision only, "
                f"{self.collation} collation only ({self.chunks} chunks, {self.mismatched_chunks} mismatched)")


def _to_micro(value: Any) -> int | None:
    if isinstance(value, _dt.datetime):
        return (value.replace(tzinfo=None) - _dt.datetime(1, 1, 1)) // _dt.timedelta(microseconds=1)
    if isinstance(value, _dt.timedelta):
        return value // _dt.timedelta(microseconds=1)
    return None


def _same_at_precision(old: Any, new: Any, digits: int) -> bool:
    a, b = _to_micro(old), _to_micro(new)
    if a is None or b is None:
        return False
    unit = 10 ** (6 - digits)
    return bool(a // unit == b // unit or round(a / unit) == round(b / unit))


class Checker:
    """Compare two row sources with the same primary key.

    Args:
        a: The reference side ("old": a missing row is in ``a`` only).
        b: The side checked against it ("new").
        chunk_rows: Rows per chunk.
        leaf_rows: Bisect until a piece holds at most this many rows.
        max_listed: Differences listed in full (all are counted).
        hash: The row hash (default: ``crc32c`` where every server has it, else ``md5``).
    """

    def __init__(self, a: RowSource, b: RowSource, *, chunk_rows: int = CHUNK_ROWS, leaf_rows: int = LEAF_ROWS,
                 max_listed: int = 1000, hash: HashKind | None = None) -> None:
        if [k.lower() for k in a.key] != [k.lower() for k in b.key]:
            raise ConsistencyCheckError(
                f"{a.label} has primary key ({', '.join(a.key)}) and {b.label} ({', '.join(b.key)}): rows can be "
                "compared only by the same key", table=b.parts[0][1], data_source=b.parts[0][0])
        if chunk_rows < 1 or leaf_rows < 1:
            raise ConsistencyCheckError(f"chunk_rows ({chunk_rows}) and leaf_rows ({leaf_rows}) must be at least 1")
        self.a, self.b = a, b
        self.chunk_rows, self.leaf_rows, self.max_listed = chunk_rows, leaf_rows, max_listed
        self.columns, self.columns_b, self.notes = self._common_columns()
        servers = {(side.conns, ds) for side in (a, b) for ds, _ in side.parts}
        kind: HashKind = hash or ("crc32c" if all(has_crc32c(c, ds) for c, ds in servers) else "md5")
        self.shape_a, self.shape_b = RowShape(tuple(self.columns), kind), RowShape(tuple(self.columns_b), kind)
        self.key = a.key
        self._pool: ThreadPoolExecutor | None = None

    def _common_columns(self) -> tuple[list[ColumnInfo], list[ColumnInfo], list[str]]:
        by_b = {c.name.lower(): c for c in self.b.columns}
        cols_a, cols_b, notes = [], [], []
        for c in self.a.columns:
            other = by_b.pop(c.name.lower(), None)
            if other is None:
                notes.append(f"column {c.name!r} is only in {self.a.label}: not compared")
                continue
            cols_a.append(c)
            cols_b.append(other)
            if c.data_type in _TEMPORAL and other.data_type in _TEMPORAL and c.precision != other.precision:
                notes.append(f"column {c.name!r}: {c.column_type} in {self.a.label}, {other.column_type} in "
                             f"{self.b.label}: values compared to the lower precision are reported as precision")
            elif c.column_type != other.column_type:
                notes.append(f"column {c.name!r}: {c.column_type} in {self.a.label}, {other.column_type} in "
                             f"{self.b.label}")
            if c.collation != other.collation:
                notes.append(f"column {c.name!r}: collation {c.collation} in {self.a.label}, {other.collation} in "
                             f"{self.b.label}: case / trailing-space differences are reported as collation")
        notes.extend(f"column {c.name!r} is only in {self.b.label}: not compared" for c in by_b.values())
        if not cols_a:
            raise ConsistencyCheckError(f"{self.a.label} and {self.b.label} have no column in common")
        return cols_a, cols_b, notes

    def _report(self) -> CheckReport:
        return CheckReport(self.a.label, self.b.label, notes=list(self.notes), max_listed=self.max_listed)

    # -- whole check ------------------------------------------------------------------------

    def chunks(self) -> Iterator[Range]:
        """Key ranges of about ``chunk_rows`` rows of side A's largest part; the last one is open."""
        part = self.a.biggest_part()
        step = max(1, self.chunk_rows // len(self.a.parts))
        lo: Key | None = None
        while True:
            hi = self.a.key_at(part, (lo, None), step - 1)
            yield (lo, hi)
            if hi is None:
                return
            lo = hi

    def check(self, progress: Callable[[CheckReport], None] | None = None) -> CheckReport:
        """Compare every row: chunk digests, bisection of the chunks that differ.

        When the two sides share no data source, B's digest of a chunk is read
        on a second thread while A's is (each side has its own connections).
        """
        report = self._report()
        apart = not ({ds for ds, _ in self.a.parts} & {ds for ds, _ in self.b.parts})
        with ThreadPoolExecutor(1, thread_name_prefix="ddm-verify") if apart else _no_pool() as pool:
            self._pool = pool
            try:
                for rng in self.chunks():
                    self.compare_range(rng, report)
                    if progress is not None:
                        progress(report)
            finally:
                self._pool = None
        return report

    def digests(self, rng: Range) -> tuple[Digest, Digest]:
        """Both sides' digests of one key range (B's on the second thread during :meth:`check`)."""
        if self._pool is None:
            return self.a.digest(rng, self.shape_a), self.b.digest(rng, self.shape_b)
        other = self._pool.submit(self.b.digest, rng, self.shape_b)
        return self.a.digest(rng, self.shape_a), other.result()

    def compare_range(self, rng: Range, report: CheckReport | None = None) -> CheckReport:
        """Compare one key range (a chunk) into ``report``."""
        report = report if report is not None else self._report()
        da, db = self.digests(rng)
        report.chunks += 1
        report.rows_a += da.rows
        report.rows_b += db.rows
        if da != db:
            report.mismatched_chunks += 1
            self._bisect(rng, da, db, report)
        return report

    def _bisect(self, rng: Range, da: Digest, db: Digest, report: CheckReport) -> None:
        if da == db:
            return
        if max(da.rows, db.rows) > self.leaf_rows and min(da.rows, db.rows) > 0:
            side = self.a if da.rows >= db.rows else self.b
            part = max(side.parts, key=lambda p: side.part_rows(p, rng))
            mid = side.key_at(part, rng, side.part_rows(part, rng) // 2)
            if mid is not None and mid != rng[1]:
                left, right = (rng[0], mid), (mid, rng[1])
                la, lb = self.digests(left)
                self._bisect(left, la, lb, report)
                self._bisect(right, da - la, db - lb, report)
                return
        self._leaf(rng, report)

    def _leaf(self, rng: Range, report: CheckReport) -> None:
        (ha, twice_a), (hb, twice_b) = self.a.hashes(rng, self.shape_a), self.b.hashes(rng, self.shape_b)
        for k in _sorted(twice_b):
            report.add(RowDifference(k, "duplicated"))
        report.notes.extend(f"key ({', '.join(map(str, k))}) is in two tables of {self.a.label}" for k in twice_a)
        changed = [k for k, h in ha.items() if k in hb and hb[k] != h]
        for k in _sorted(k for k in ha if k not in hb):
            report.add(RowDifference(k, "missing"))
        for k in _sorted(k for k in hb if k not in ha):
            report.add(RowDifference(k, "extra"))
        self._compare_rows(_sorted(changed), report)

    def _compare_rows(self, keys: list[Key], report: CheckReport) -> None:
        if not keys:
            return
        old, new = self.a.rows_of(keys, self.shape_a), self.b.rows_of(keys, self.shape_b)
        for k in keys:
            if k not in old:
                report.add(RowDifference(k, "missing"))
            elif k not in new:
                report.add(RowDifference(k, "extra"))
            else:
                diff = self._row_difference(k, old[k], new[k])
                if diff is not None:
                    report.add(diff)

    def _row_difference(self, key: Key, old: Sequence[Any], new: Sequence[Any]) -> RowDifference | None:
        cols: list[ColumnDifference] = []
        for ca, cb, x, y in zip(self.columns, self.columns_b, old, new):
            if x == y and type(x) is type(y):
                continue
            kind: Literal["value", "precision", "collation"] = "value"
            if x is not None and y is not None:
                if (ca.precision != cb.precision and ca.data_type in _TEMPORAL and cb.data_type in _TEMPORAL
                        and _same_at_precision(x, y, min(ca.precision or 0, cb.precision or 0))):
                    kind = "precision"
                elif (ca.collation != cb.collation and isinstance(x, str) and isinstance(y, str)
                      and x.rstrip(" ").casefold() == y.rstrip(" ").casefold()):
                    kind = "collation"
            cols.append(ColumnDifference(ca.name, x, y, kind))
        if not cols:
            return None  # hashes differed through a representation the values do not show
        kinds = {c.kind for c in cols}
        row_kind: Literal["differing", "precision", "collation"] = (
            "differing" if "value" in kinds else "precision" if "precision" in kinds else "collation")
        return RowDifference(key, row_kind, tuple(cols))

    # -- sample --------------------------------------------------------------------------------

    def sample(self, n: int = 1000, rng: random.Random | None = None) -> CheckReport:
        """``n`` random keys of side A compared field by field on both sides (extra rows are not looked for)."""
        rng = rng if rng is not None else random.Random()
        report = self._report()
        keys = _sorted(self.a.random_keys(n, rng))
        old, new = self.a.rows_of(keys, self.shape_a), self.b.rows_of(keys, self.shape_b)
        report.rows_a, report.rows_b = len(old), len(new)
        for k in keys:
            if k not in old:
                continue  # deleted since it was drawn
            if k not in new:
                report.add(RowDifference(k, "missing"))
                continue
            diff = self._row_difference(k, old[k], new[k])
            if diff is not None:
                report.add(diff)
        return report


@contextlib.contextmanager
def _no_pool() -> Iterator[None]:
    yield None


def _sorted(keys: Iterable[Key]) -> list[Key]:
    out = list(keys)
    try:
        out.sort()
    except TypeError:  # keys of mixed types (NULL-free but e.g. int and str) keep their order
        pass
    return out


def migration_sides(
    old: ShardingConfig, new: ShardingConfig, plan: MigrationPlan, conns: Connections
) -> list[tuple[str, RowSource, RowSource]]:
    """``(table, old side, new side)`` per logic table and (source, target) pair of moving slots.

    The old side is every physical table of the logic table on the source data
    source, the new side every one on the target, both filtered to the slots
    moving between them (each row keeps its table index, so the unions match).
    Each broadcast table copied to a new data source is a pair of its own.
    """
    out: list[tuple[str, RowSource, RowSource]] = []
    for tp in plan.tables:
        old_table, new_table = old.table(tp.table), new.table(tp.table)
        assert old_table is not None and new_table is not None
        pairs: dict[tuple[str, str], list[int]] = {}
        for m in tp.moves:
            pairs.setdefault((m.source, m.target), []).append(m.slot)
        for (source, target), slots in sorted(pairs.items()):
            keep = SlotFilter.of_table(old_table, slots)
            a = RowSource(conns, [(source, t) for t in old_table.tables_by_source[source]], slots=keep,
                          label=f"{tp.table} on {source}")
            b = RowSource(conns, [(target, t) for t in new_table.tables_by_source[target]], slots=keep,
                          label=f"{tp.table} on {target}")
            out.append((tp.table, a, b))
    for copy in plan.broadcasts:
        for target in copy.targets:
            out.append((copy.table, RowSource(conns, [(copy.source, copy.table)]),
                        RowSource(conns, [(target, copy.table)])))
    return out
