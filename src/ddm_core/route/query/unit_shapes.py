"""A multi-node plan's units apart from their values, made once per statement and nodes picked.

Routing a multi-node SELECT again builds the same physical names, unit texts (a data source's tables
combined in one ``UNION ALL``: route/query/per_source.py), tables and reasons whenever the same nodes are
picked; only the params differ. :class:`QueryStatement <ddm_core.route.query.query.QueryStatement>` keeps
those parts as :class:`PlanShape` per picked nodes (at most :data:`MAX_SHAPES`), and each call only fills in
its values (:func:`fill_units`).

What a shape depends on: the statement (its compiled text, tables and rewrite, made under one
configuration and table metadata version: a reload or a schema change replaces the statement and so
its shapes), the nodes picked, whether they cover every node and the pick's note. A hint, a join whose
tables have nodes of their own and the checks that read values (a shard key update) take the uncached
path.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ddm_core.route.plan import RouteKind, RouteUnit, TableRoute

__all__ = ["UnitShape", "PlanShape", "MAX_SHAPES", "fill_units"]

#: Node sets remembered per statement; past this many (a statement whose values reach many different
#: combinations of nodes) the cache starts again: a miss costs one uncached route.
MAX_SHAPES = 64

_new_tuple = tuple.__new__


class UnitShape(NamedTuple):
    """One unit without its params."""

    data_source: str
    #: The unit's text, behind the data source's SQL comment.
    sql: str
    #: How many times it takes the statement's params in turn (the branches of a ``UNION ALL``, else 1).
    branches: int
    #: The union's own placeholders (its LIMIT) follow the branches' params.
    suffixed: bool
    tables: tuple[tuple[str, str], ...]


class PlanShape(NamedTuple):
    """What a route to these nodes reuses: everything of its plan but the params and the merge spec."""

    units: tuple[UnitShape, ...]
    kind: RouteKind
    tables: tuple[TableRoute, ...]
    #: The statement's multi-node rewrite applies (its template, merge spec and LIMIT m+n).
    multi: bool
    #: The units are a data source's tables in one ``UNION ALL`` (its LIMIT takes a value of the call).
    union: bool


def fill_units(
    shapes: tuple[UnitShape, ...], params: tuple[Any, ...], suffix_params: tuple[Any, ...]
) -> tuple[RouteUnit, ...]:
    """The units of ``shapes`` for one call: ``params`` once per branch, then ``suffix_params`` where the union
    has placeholders of its own (built with ``tuple.__new__``: a NamedTuple's ``__new__`` is a Python frame)."""
    # (a tuple times 1, or plus (), is that tuple itself: the one-table units build nothing)
    return tuple([
        _new_tuple(RouteUnit, (s.data_source, s.sql, params * s.branches + (suffix_params if s.suffixed else ()),
                               s.tables))
        for s in shapes
    ])  # fmt: skip
