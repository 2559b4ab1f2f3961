"""The compiled point path of a cached statement: its point route, handed to ``_fast.point`` once.

:meth:`Router.route <ddm_core.route.Router.route>` answers a cached point
statement (one node, decided by ``=`` on the shard key) with one compiled call,
:class:`~ddm_core._fast.point_py.PointPath`, before any interpreted frame of
the general path. This module builds that object from what the general path
decided on the statement's first routes (its :class:`PointRoute`, normalizer,
template and per-node parts), or says the statement has none. Whatever the
compiled call does not cover it hands back, and the general path routes it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

from ddm_core._fast import SELECTED
from ddm_core.algorithms.inline import InlineAlgorithm
from ddm_core.algorithms.mod import HashModAlgorithm, ModAlgorithm
from ddm_core.hashing import hash64
from ddm_core.metadata.model import Strategy, StrategyKind
from ddm_core.route.plan import NO_MERGE, RouteKind, RoutePlan, RouteUnit
from ddm_core.route.shards.conditions import Literal, Param, Source
from ddm_core.route.shards.fast import PointRoute
from ddm_core.route.text.placeholders import Translated
from ddm_core.route.text.template import Template

if TYPE_CHECKING:
    from ddm_core._fast.point import PointFront, PointPath
else:
    PointPath = SELECTED.point.PointPath
    PointFront = SELECTED.point.PointFront

__all__ = ["PointPath", "PointFront", "point_path", "remainder_period"]

#: One level of a :class:`PointPath`: ``(sources, as_tuple, scalar, period, floor, hasher)`` (``_fast/point_py.py``).
Level = tuple[tuple[tuple[int, Any], ...], bool, Callable[[Any], int], int, bool, "Callable[[Any], int] | None"]


#: What :func:`remainder_period` returns: ``(period, floor, hasher)`` (see ``_fast/point_py.py``'s ``Level``).
Remainder = tuple[int, bool, "Callable[[Any], int] | None"]
_NONE: Remainder = (0, True, None)


def remainder_period(strategy: Strategy) -> Remainder:
    """How the level's scalar answers by a remainder alone, or ``(0, True, None)``: it does not.

    ``MOD`` without offsets takes an int's ``value % count`` (floored); a
    one-column inline expression with a period names the same target for ints
    of one truncated remainder (see ``algorithms/inline.py``); ``HASH_MOD`` of
    ``key-type: auto`` takes ``hash64(value) % count`` of any value. Exact
    types only: a subclass may answer otherwise.
    """
    if strategy.kind is not StrategyKind.STANDARD or len(strategy.columns) != 1:
        return _NONE
    algorithm = strategy.sharder
    kind = type(algorithm)
    if kind is ModAlgorithm and not algorithm.start_offset and not algorithm.stop_offset:
        return algorithm.count, True, None
    if kind is HashModAlgorithm and algorithm.key_type == "auto":
        return algorithm.count, True, hash64
    if kind is InlineAlgorithm:
        expression = algorithm.expression
        period = expression.period
        if expression.columns and algorithm._reads(strategy.columns[0]) and period is not None:
            return period, False, None
    return _NONE


def _sources(sources: Sequence[Source]) -> tuple[tuple[int, Any], ...] | None:
    out = []
    for source in sources:
        if type(source) is Param and source.index >= 0:
            out.append((source.index, None))
        elif type(source) is Literal:
            out.append((-1, source.value))
        else:
            return None
    return tuple(out)


def point_path(
    point: PointRoute | None | bool, translated: Translated, normalized: frozenset[int] | None, template: Template,
    nodes: dict[int, Any], statement: str, is_write: bool, locking: bool,
) -> PointPath | None:
    """The compiled point path of a statement, or ``None`` (every call takes the general path).

    Args:
        point: The statement's point route (anything else: it has none).
        translated: Its placeholders (how parameters bind).
        normalized: Param indexes its normalizer reads as integers (``None``: unknown).
        template: Its rewrite template (which params the unit gets).
        nodes: Its per-node parts, filled by the general path (shared, not copied).
    """
    if not isinstance(point, PointRoute) or not point.single or normalized is None or template.names:
        return None
    if translated.style == "pyformat":
        names: tuple[str | int, ...] | None = tuple(translated.names)
    elif translated.style in ("format", "qmark", "none"):
        names = None
    else:
        return None
    router = point.router
    db: Level | None = None
    if point.db_fn is not None:
        sources = _sources(point.db_sources[0])
        if sources is None:
            return None
        remainder = remainder_period(router.db) if point.db_mode == "key" else _NONE
        db = (sources, point.db_sources[1], point.db_fn, *remainder)
    tb: list[Level | None] = []
    tb_sources = _sources(point.tb_sources[0])
    remainder = remainder_period(router.tb)
    for fn in point.tb_fns:
        if fn is None:
            tb.append(None)
        elif tb_sources is None:
            return None
        else:
            tb.append((tb_sources, point.tb_sources[1], fn, *remainder))
    count = len(translated.names)
    params = None if template.identity and len(template.params) == count else template.params
    tail = (NO_MERGE, statement, is_write, (), locking, (), None)
    try:
        return PointPath(names, count, sorted(normalized), db, tb, point.lut, nodes, params, RouteUnit, RoutePlan,
                         RouteKind.SINGLE, tail)
    except ValueError:  # a parameter index the statement does not have: never expected, never guessed
        return None
