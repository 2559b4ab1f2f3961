"""The point-route fast path: ``WHERE shard_col = ?`` without the general machinery.

Most traffic is one equality on the shard key (seed 004: 68 %). For such a
statement the data node is a function of one or two values, so at compile
time we precompute per-target scalar functions (the algorithms' ``scalar``
paths: a compiled slot lookup, a hash modulo) and a node lookup table; a
route then costs two scalar calls, a template fill and the plan objects.
Anything unusual — a hint, a NULL value, an error — takes the general path,
which gives the same answer (tests check both agree).
"""

from __future__ import annotations

import weakref
from typing import Any, Callable, Sequence

from ddm_core.algorithms import ShardingAlgorithm, TargetSet
from ddm_core.metadata.model import Strategy, StrategyKind
from ddm_core.route.conditions import Conjunction, Eq, Param, Source
from ddm_core.route.targets import TableRouter

__all__ = ["PointRoute", "point_route", "scalar_index"]

Scalar = Callable[[Any], int]


def scalar_index(algorithm: ShardingAlgorithm, targets: TargetSet, column: str) -> Scalar:
    """value → index into ``targets`` for a single-column algorithm."""
    fast: Callable[[TargetSet], Scalar] | None = getattr(algorithm, "scalar", None)
    if fast is not None:
        return fast(targets)
    position = targets.position

    def generic(value: Any) -> int:
        return position[algorithm.precise(targets, {column: value})[0]]

    return generic


class PointRoute:
    """Node index of a point statement from its bound params."""

    __slots__ = ("db_source", "tb_source", "db_fn", "tb_fns", "lut")

    def __init__(self, router: TableRouter, db_source: Source | None, tb_source: Source | None) -> None:
        self.db_source = db_source
        self.tb_source = tb_source
        db_fn, tb_fns, self.lut = _scalars(router)
        # A level without a source (strategy NONE, one target) uses index 0.
        self.db_fn: Scalar | None = None if db_source is None else db_fn
        self.tb_fns: list[Scalar | None] = [None if tb_source is None else f for f in tb_fns]

    def node(self, bound: Sequence[Any]) -> int:
        """The node index; raises like the general path on a bad value (callers fall back)."""
        # A level's function is None exactly when its source is (see __init__).
        src = self.db_source
        db_fn = self.db_fn
        ds = 0 if src is None or db_fn is None else db_fn(bound[src.index] if type(src) is Param else src.value)
        src = self.tb_source
        tb_fn = self.tb_fns[ds]
        tb = 0 if src is None or tb_fn is None else tb_fn(bound[src.index] if type(src) is Param else src.value)
        return self.lut[ds][tb]


_SCALARS: "weakref.WeakKeyDictionary[TableRouter, tuple[Any, list[Any], list[list[int]]]]" = weakref.WeakKeyDictionary()


def _scalars(router: TableRouter) -> tuple[Scalar | None, list[Scalar | None], list[list[int]]]:
    """Per table (built once, shared by every point statement on it): the database scalar,
    one table scalar per data source, and the node lookup table."""
    found = _SCALARS.get(router)
    if found is None:
        db, tb = router.db, router.tb
        sharded = (StrategyKind.STANDARD,)
        db_fn = scalar_index(db.sharder, router.sources, db.columns[0]) if db.kind in sharded else None
        tb_fns: list[Scalar | None] = []
        lut: list[list[int]] = []
        for ds in router.sources:
            targets = router.tables_of[ds]
            tb_fns.append(scalar_index(tb.sharder, targets, tb.columns[0]) if tb.kind in sharded else None)
            lut.append([router.index[(ds, t)] for t in targets])
        found = _SCALARS[router] = (db_fn, tb_fns, lut)
    return found


def _eq_source(strategy: Strategy, conj: Conjunction, targets: int) -> tuple[bool, Source | None]:
    """(usable, source) for one strategy level of a point route."""
    if strategy.kind is StrategyKind.NONE:
        return targets == 1, None
    if strategy.kind is not StrategyKind.STANDARD or len(strategy.columns) != 1:
        return False, None
    atoms = conj.get(strategy.columns[0].lower(), ())
    if len(atoms) != 1 or type(atoms[0]) is not Eq:
        return False, None
    return True, atoms[0].source


def point_route(router: TableRouter, dnf: list[Conjunction] | None) -> PointRoute | None:
    """A :class:`PointRoute` when the statement's conditions allow one, else ``None``."""
    if dnf is None or len(dnf) != 1 or router.table.auto:
        return None
    conj = dnf[0]
    db_ok, db_source = _eq_source(router.db, conj, len(router.sources))
    tables_per_source = {len(t) for t in router.tables_of.values()}
    tb_ok, tb_source = _eq_source(router.tb, conj, max(tables_per_source))
    if not (db_ok and tb_ok):
        return None
    return PointRoute(router, db_source, tb_source)
