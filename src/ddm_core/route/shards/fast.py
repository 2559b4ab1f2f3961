"""The point-route fast path: ``WHERE shard_col = ?`` without the general machinery.

Most traffic of an order-style service is one equality on the shard key. For
such a statement the data node is a function of one or two values, so on the
first route of a statement we decide which condition picks each strategy
level's target and precompute, per table, the algorithms' scalar functions
(:meth:`~ddm_core.algorithms.ShardingAlgorithm.scalar`: a compiled slot
lookup, a hash modulo, an inline expression evaluated once per remainder) and
a node lookup table. A route then costs two scalar calls, a template fill and
the plan objects — no DNF, no value combinations, no dicts per call.

A level is decided by the ``=`` conditions on all of its sharding columns
(``key``), by a gene id for a SLOTS database (``gene``), or by nothing: one
target (``one``) or every target of the level (``every``, allowed when the
other level is decided, e.g. ``order_id = ?`` finds the database by the id's
gene and reads each of its tables). Conditions the fast path does not model
(IN, ranges, OR, hints, subqueries) leave a statement to the general path.

The fast path raises whatever its scalar functions raise for a value they
cannot route (NULL, a wrong type, no such target); the caller then takes the
general path, which raises the real error — or, if the general path answers,
counts a *fast-path miss* and says so in the plan (tests keep them at zero).
"""

from __future__ import annotations

import operator
from typing import Any, Callable, Sequence

from ddm_core.algorithms import ShardingAlgorithm, TargetSet
from ddm_core.errors import DdmError
from ddm_core.ids import gene_of
from ddm_core.metadata.model import Strategy, StrategyKind
from ddm_core.route.shards.conditions import Conjunction, Eq, Param, Source
from ddm_core.route.shards.targets import TableRouter

__all__ = ["PointRoute", "TableScalars", "LevelSources", "point_route", "row_route", "miss_note", "GENERATED"]

Scalar = Callable[[Any], int]
Getter = Callable[[Sequence[Any]], Any]
#: A level's sources (parameters or literals, one per sharding column) and whether it reads them as a tuple.
LevelSources = tuple[tuple[Source, ...], bool]

#: The source of a generated key in a one-row INSERT: the caller appends the key after the params.
GENERATED = Param(-1)

_ONE, _EVERY, _KEY, _GENE = "one", "every", "key", "gene"


class TableScalars:
    """Per table, shared by every point statement on it: the levels' scalar functions and node indexes.

    Built on first use and kept by the table's :class:`TableRouter` (its
    lifetime is that router's, i.e. one configuration version).
    """

    def __init__(self, router: TableRouter) -> None:
        self.router = router
        # Auto tables: the table strategy alone picks among every physical table.
        sources: Sequence[str] = ("",) if router.table.auto else router.sources
        self.tables: list[TargetSet] = [router.tables_of[ds] for ds in sources]
        index = router.auto_index if router.table.auto else None
        self.lut: list[list[int]] = [
            [index[t] if index is not None else router.index[(ds, t)] for t in self.tables[d]]
            for d, ds in enumerate(sources)
        ]
        self.every: list[tuple[int, ...]] = [tuple(sorted(nodes)) for nodes in self.lut]
        self._db: Scalar | None = None
        self._gene: Scalar | None = None
        self._tb: list[Scalar] | None = None

    def db(self) -> Scalar:
        """Database index from the database strategy's value(s)."""
        if self._db is None:
            self._db = _level_scalar(self.router.db, self.router.sources)
        return self._db

    def gene(self) -> Scalar:
        """Database index from a gene id (the SLOTS database's slot it carries)."""
        if self._gene is None:
            gene = self.router.gene
            assert gene is not None  # point_route asks for it only then
            bits = gene[1]
            slot_index: Callable[[int], int] = self.router.db.sharder.slot_scalar(self.router.sources)
            mask = (1 << bits) - 1

            def by_gene(value: Any) -> int:
                # gene_of is lenient like int() on other types, as the general path is.
                return slot_index(value & mask if type(value) is int else gene_of(value, bits))

            self._gene = by_gene
        return self._gene

    def tb(self) -> list[Scalar]:
        """Per database index: table index from the table strategy's value(s)."""
        if self._tb is None:
            self._tb = [_level_scalar(self.router.tb, targets) for targets in self.tables]
        return self._tb


def table_scalars(router: TableRouter) -> TableScalars:
    """The router's :class:`TableScalars`, built on first use."""
    found = router.point_scalars
    if not isinstance(found, TableScalars):
        found = router.point_scalars = TableScalars(router)
    return found


def _level_scalar(strategy: Strategy, targets: TargetSet) -> Scalar:
    algorithm: ShardingAlgorithm = strategy.sharder
    columns = [c.lower() for c in strategy.columns]  # as the general path passes them to precise
    if strategy.kind is StrategyKind.STANDARD:
        return algorithm.scalar(targets, columns[0])
    return algorithm.multi_scalar(targets, columns)


def _getter(sources: Sequence[Source], as_tuple: bool) -> Getter:
    """bound params → the level's value (one value, or a tuple for a complex strategy)."""
    if all(type(s) is Param for s in sources):
        indexes = [s.index for s in sources]  # type: ignore[union-attr]
        if len(indexes) > 1 or not as_tuple:
            return operator.itemgetter(*indexes)  # C: bound[i], or (bound[i], bound[j], ...)
        i = indexes[0]
        return lambda bound: (bound[i],)
    if not as_tuple and len(sources) == 1:
        value = sources[0].value  # type: ignore[union-attr]
        return lambda _bound: value
    parts = tuple(sources)
    return lambda bound: tuple([bound[s.index] if type(s) is Param else s.value for s in parts])


class PointRoute:
    """The node index (or indexes) of a point statement from its bound params.

    Attributes:
        pick: ``bound → node index`` when one node answers (:attr:`single`),
            else ``bound → ascending node indexes``.
    """

    __slots__ = ("single", "pick", "_describe", "db_fn", "db_get", "tb_fns", "tb_get", "lut", "every", "db_mode",
                 "tb_mode", "db_sources", "tb_sources", "router")

    def __init__(self, scalars: TableScalars, db: tuple[str, Getter | None], tb: tuple[str, Getter | None],
                 description: Callable[[], str], sources: tuple[LevelSources, LevelSources] = (((), False), ((), False))
                 ) -> None:  # fmt: skip
        (db_mode, self.db_get), (tb_mode, self.tb_get) = db, tb
        self.db_mode, self.tb_mode = db_mode, tb_mode
        #: Per level, what it reads (``_getter``'s input) and whether as a tuple: for the compiled point path.
        self.db_sources, self.tb_sources = sources
        self.router = scalars.router
        self.db_fn: Scalar | None = scalars.gene() if db_mode == _GENE else scalars.db() if db_mode == _KEY else None
        tb_fns = scalars.tb() if tb_mode == _KEY else None
        self.tb_fns: list[Scalar | None] = list(tb_fns) if tb_fns is not None else [None] * len(scalars.lut)
        self.lut = scalars.lut
        self.every = scalars.every
        self._describe = description
        self.single = db_mode != _EVERY and tb_mode != _EVERY
        if self.single:
            self.pick: Callable[[Sequence[Any]], Any] = self._node
        elif db_mode == _EVERY:
            self.pick = self._nodes_in_every_database
        else:
            self.pick = self._every_table

    @property
    def description(self) -> str:
        """Which condition decides each level (what ``fast_path`` reports)."""
        return self._describe()

    def _database(self, bound: Sequence[Any]) -> int:
        fn = self.db_fn
        return 0 if fn is None else fn(self.db_get(bound))  # type: ignore[misc]

    def _node(self, bound: Sequence[Any]) -> int:
        # A level's function is None exactly when it has one target (see point_route).
        fn = self.db_fn
        ds = 0 if fn is None else fn(self.db_get(bound))  # type: ignore[misc]
        tb_fn = self.tb_fns[ds]
        return self.lut[ds][0 if tb_fn is None else tb_fn(self.tb_get(bound))]  # type: ignore[misc]

    def _every_table(self, bound: Sequence[Any]) -> tuple[int, ...]:
        return self.every[self._database(bound)]

    def _nodes_in_every_database(self, bound: Sequence[Any]) -> tuple[int, ...]:
        value = self.tb_get(bound)  # type: ignore[misc]
        return tuple(sorted(lut[fn(value)] for lut, fn in zip(self.lut, self.tb_fns)))  # type: ignore[misc]


def miss_note(exc: Exception) -> str:
    """What a plan's reason adds when the general path answered for the fast path."""
    text = str(exc).split("\n", 1)[0]
    if len(text) > 160:
        text = text[:157] + "..."
    return f"; fast path missed ({type(exc).__name__}: {text})"


def _decide(strategy: Strategy, eqs: dict[str, Source], targets: int) -> tuple[str, Sequence[Source]] | None:
    """How the ``=`` conditions decide one strategy level: (mode, sources), or ``None`` (general path)."""
    kind = strategy.kind
    if kind is StrategyKind.HINT:
        return None  # needs a hint value: the general path says what is missing
    if kind is StrategyKind.NONE:
        return (_ONE if targets == 1 else _EVERY), ()
    columns = [c.lower() for c in strategy.columns]
    if all(c in eqs for c in columns):
        return _KEY, [eqs[c] for c in columns]
    # Some or none of them: the general path reads every target of the level too.
    return (_ONE if targets == 1 else _EVERY), ()


def _describe(level: str, mode: str, strategy: Strategy, gene_column: str = "") -> str:
    if mode == _KEY:
        alg = strategy.sharder
        return f"{level} by {', '.join(strategy.columns)} ({alg.label})"
    if mode == _GENE:
        return f"{level} by the gene of {gene_column}"
    return f"every {level}" if mode == _EVERY else f"the one {level}"


def point_route(router: TableRouter, dnf: list[Conjunction] | None) -> PointRoute | None:
    """A :class:`PointRoute` when the statement's conditions allow one, else ``None``."""
    if dnf is None or len(dnf) != 1:
        return None
    eqs: dict[str, Source] = {}
    for column, atoms in dnf[0].items():
        if column in router.columns:
            # Every condition on a column the table routes by must be one `=`: IN, ranges and
            # repeated conditions are the general path's (it intersects and narrows them).
            if len(atoms) != 1 or type(atoms[0]) is not Eq:
                return None
            eqs[column] = atoms[0].source
    return _point(router, eqs)


def row_route(router: TableRouter, sources: dict[str, Source]) -> PointRoute | None:
    """A :class:`PointRoute` for one INSERT row: ``sources`` gives every sharding column's value.

    ``None`` when a level cannot be decided by the row alone (a hint strategy;
    no strategy but several targets), which the general path refuses or asks a hint for.
    """
    found = _point(router, sources, gene=False)
    return found if found is not None and found.single else None


def _point(router: TableRouter, eqs: dict[str, Source], gene: bool = True) -> PointRoute | None:
    table = router.table
    tb = _decide(router.tb, eqs, max(len(t) for t in router.tables_of.values()))
    if table.auto:
        db: tuple[str, Sequence[Source]] | None = (_ONE, ())
    else:
        db = _decide(router.db, eqs, len(router.sources))
        if (db is not None and db[0] == _EVERY and gene and router.gene is not None and router.gene[0] in eqs
                and hasattr(router.db.sharder, "slot_scalar")):  # SLOTS; another slot algorithm: the general path
            db = _GENE, [eqs[router.gene[0]]]  # an id carries its database (as the general path reads it)
    if db is None or tb is None:
        return None
    decided = db[0] in (_KEY, _GENE) or tb[0] == _KEY
    if (db[0] == _EVERY or tb[0] == _EVERY) and not decided:
        return None  # nothing narrows: a full route, the general path's (it applies the full-route rules)
    complex_db = router.db.kind is StrategyKind.COMPLEX
    complex_tb = router.tb.kind is StrategyKind.COMPLEX
    db_mode, tb_mode = db[0], tb[0]

    def description() -> str:  # built when asked for: first sight pays only for what routes
        table_part = _describe("table", tb_mode, router.tb)
        if table.auto:
            return table_part
        return f"{_describe('database', db_mode, router.db, router.gene[0] if router.gene else '')}; {table_part}"

    db_tuple = complex_db and db[0] == _KEY
    try:
        return PointRoute(
            table_scalars(router),
            (db[0], _getter(db[1], db_tuple) if db[1] else None),
            (tb[0], _getter(tb[1], complex_tb) if tb[1] else None),
            description,
            ((tuple(db[1]), db_tuple), (tuple(tb[1]), complex_tb)),
        )
    except DdmError:
        return None  # an algorithm cannot serve these targets: the general path raises why
