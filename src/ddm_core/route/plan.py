"""What the router returns: a frozen plan of routed units plus how to merge them.

A :class:`RoutePlan` is all the executor needs: each :class:`RouteUnit` is one
statement for one data source (SQL already rewritten to physical tables, with
exactly the params that SQL needs), and :class:`MergeSpec` says how to turn
the units' rows into the rows one unsharded table would have given — without
parsing anything again.
"""

from __future__ import annotations

from enum import Enum
from operator import itemgetter
from typing import Any, NamedTuple

# The merge layer owns its input contract (MergeSpec); plans carry it.
from ddm_core.merge.spec import NO_MERGE, Aggregate, MergeSpec

__all__ = [
    "RouteKind",
    "RouteUnit",
    "TableRoute",
    "Aggregate",
    "MergeSpec",
    "RoutePlan",
    "NO_MERGE",
    "single_unit_plan",
    "EXPLAIN_COLUMNS",
]

_DATA_SOURCE = itemgetter(0)  # RouteUnit.data_source

#: The columns of :meth:`RoutePlan.explain`'s rows, as ``PREVIEW`` (and a cross-node ``EXPLAIN``) answer them.
EXPLAIN_COLUMNS = ("data_source_name", "actual_sql", "params", "reason")


class RouteKind(str, Enum):
    """How wide a statement went."""

    SINGLE = "single"  # one unit
    MULTI = "multi"  # several units chosen by shard conditions
    BROADCAST = "broadcast"  # every data source (broadcast tables, DDL)
    FULL = "full"  # every node of a sharded table: no usable shard condition
    CROSS_NODE = "cross-node"  # parts read, then joined on one node (``RoutePlan.cross_node``)


# Plans are built on every route() call: NamedTuples construct several times
# faster than frozen dataclasses, and are just as immutable.


class RouteUnit(NamedTuple):
    """One statement for one data source.

    Attributes:
        data_source: The data source name the statement goes to.
        sql: Rewritten SQL (physical table names), in the caller's paramstyle
            family: ``%s`` for ``%s``/``%(name)s`` input, ``?`` for ``?`` input.
        params: Exactly the parameters ``sql`` needs, in order.
        tables: Logic table → physical table used by this unit.
    """

    data_source: str
    sql: str
    params: tuple[Any, ...] = ()
    tables: tuple[tuple[str, str], ...] = ()


class TableRoute(NamedTuple):
    """Why a logic table went where it went (for plans, previews and logs)."""

    logic_table: str
    nodes: tuple[str, ...]  # "ds_2.t_order_2_1", in unit order
    reason: str  # which condition and algorithm decided, or why every node




class RoutePlan(NamedTuple):
    """The result of :meth:`ddm_core.Router.route`.

    Attributes:
        units: Statements per data source, in a stable order (data source
            order of the configuration, then node order).
        kind: See :class:`RouteKind`.
        tables: Per logic table: the nodes used and why.
        merge: How to merge the units' rows (:data:`NO_MERGE` for one unit or DML).
        statement: ``select``, ``insert``, ``update``, ``delete``, ``ddl``,
            ``show``, ``other`` — what the executor should expect back.
        is_write: The statement changes data or schema (goes to primaries;
            counts for cross-shard transaction checks).
        generated_keys: Key values the router generated for INSERT rows, in
            row order (empty when none were generated).
        force_primary: A hint asked for the primary even for reads.
        dual: During a migration's dual-write phases, the units that write the
            same rows at their new location (docs/migration.md#dual-write): run
            after ``units`` succeed, best effort — a failure is logged and
            counted, never raised (catch-up repairs it).
        cross_node: For ``RouteKind.CROSS_NODE`` (no units of its own): the parts to read and
            the statement to run over their copies (:class:`ddm_core.route.crossnode.CrossNodePlan`).
    """

    units: tuple[RouteUnit, ...]
    kind: RouteKind
    tables: tuple[TableRoute, ...] = ()
    merge: MergeSpec = NO_MERGE
    statement: str = "select"
    is_write: bool = False
    generated_keys: tuple[Any, ...] = ()
    force_primary: bool = False
    dual: tuple[RouteUnit, ...] = ()
    cross_node: Any = None

    @property
    def data_sources(self) -> tuple[str, ...]:
        """Distinct data sources of the units, in unit order."""
        return tuple(dict.fromkeys(map(_DATA_SOURCE, self.units)))  # no frame per unit

    def explain(self) -> list[tuple[str, str, str, str]]:
        """Rows of ``(data source, SQL, params, why)`` — the route preview."""
        if self.cross_node is not None:
            explained: list[tuple[str, str, str, str]] = self.cross_node.explain()
            return explained
        why = "; ".join(f"{t.logic_table}: {t.reason}" for t in self.tables) or self.kind.value
        return [(u.data_source, u.sql, repr(list(u.params)), why) for u in self.units]


_new_tuple = tuple.__new__


def single_unit_plan(
    data_source: str, sql: str, params: tuple[Any, ...], physical: tuple[tuple[str, str], ...],
    why: tuple[TableRoute, ...], statement: str, is_write: bool, generated_keys: tuple[Any, ...] = (),
    force_primary: bool = False,
) -> RoutePlan:
    """The plan of a statement a fast path routed to one node (``RouteKind.SINGLE``, nothing to merge).

    ``physical``: the unit's logic → physical tables; ``why``: the plan's
    :class:`TableRoute` s. Built with ``tuple.__new__`` directly: the
    NamedTuples' ``__new__`` and ``_make`` are a Python frame each, and this
    runs on every point route.
    """
    unit = _new_tuple(RouteUnit, (data_source, sql, params, physical))
    return _new_tuple(
        RoutePlan, ((unit,), RouteKind.SINGLE, why, NO_MERGE, statement, is_write, generated_keys, force_primary, (), None)
    )
