"""What the router returns: a frozen plan of routed units plus how to merge them.

A :class:`RoutePlan` is all the executor needs: each :class:`RouteUnit` is one
statement for one data source (SQL already rewritten to physical tables, with
exactly the params that SQL needs), and :class:`MergeSpec` says how to turn
the units' rows into the rows one unsharded table would have given — without
parsing anything again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable, NamedTuple, Sequence

__all__ = [
    "RouteKind",
    "RouteUnit",
    "TableRoute",
    "Aggregate",
    "MergeSpec",
    "RoutePlan",
    "NO_MERGE",
]


class RouteKind(str, Enum):
    """How wide a statement went."""

    SINGLE = "single"  # one unit
    MULTI = "multi"  # several units chosen by shard conditions
    BROADCAST = "broadcast"  # every data source (broadcast tables, DDL)
    FULL = "full"  # every node of a sharded table: no usable shard condition


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


@dataclass(frozen=True, slots=True)
class Aggregate:
    """One aggregate the merger must finish.

    Attributes:
        func: ``COUNT``, ``SUM``, ``MIN``, ``MAX``, ``AVG``.
        column: Where the merged value goes (index into unit rows).
        args: Unit-row columns that feed it: ``(column,)``, or for AVG
            ``(sum_column, count_column)``; for DISTINCT aggregates the column
            holding the (grouped) argument values.
        distinct: ``COUNT(DISTINCT x)`` / ``SUM(DISTINCT x)``: the units were
            grouped by ``x`` as well, and the merger counts/sums distinct values.
    """

    func: str
    column: int
    args: tuple[int, ...]
    distinct: bool = False


@dataclass(frozen=True, slots=True)
class MergeSpec:
    """How to merge the units' rows. Column indexes refer to unit rows.

    Attributes:
        order_by: ``(column, descending)`` keys the units' rows are sorted by
            (each unit sorts server-side); empty when order does not matter.
        group_by: Group key columns (rows arrive sorted by them when
            ``order_by`` starts with them; otherwise the merger hashes).
        aggregates: Aggregates to re-aggregate across units.
        distinct: Remove duplicate rows (over the visible columns).
        having: Predicate over a merged row (``None``: no HAVING left to do).
        offset: Rows to skip after merging.
        limit: Rows to return after merging (``None``: all).
        visible: Number of leading columns the caller sees; derived columns the
            router added (sort keys, AVG counts, ...) follow them and are dropped.
            ``None`` when the column count is only known at run time
            (``SELECT *``): then ``derived`` columns are counted from the end.
        derived: Number of trailing derived columns.
        column_names: Names of the visible columns as the caller wrote them
            (``AVG(amount)`` even though the units ran ``SUM``), ``None`` for a
            column whose unit name is already right (only aggregates are
            named), ``()`` when unknown (``SELECT *``).
    """

    order_by: tuple[tuple[int, bool], ...] = ()
    group_by: tuple[int, ...] = ()
    aggregates: tuple[Aggregate, ...] = ()
    distinct: bool = False
    having: Callable[[Sequence[Any]], bool] | None = field(default=None, compare=False)
    offset: int = 0
    limit: int | None = None
    visible: int | None = None
    derived: int = 0
    column_names: tuple[str | None, ...] = ()

    @property
    def is_trivial(self) -> bool:
        """Nothing to do beyond concatenating the units' rows."""
        return not (
            self.order_by
            or self.group_by
            or self.aggregates
            or self.distinct
            or self.having
            or self.offset
            or self.limit is not None
            or self.derived
        )


NO_MERGE = MergeSpec()


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
    """

    units: tuple[RouteUnit, ...]
    kind: RouteKind
    tables: tuple[TableRoute, ...] = ()
    merge: MergeSpec = NO_MERGE
    statement: str = "select"
    is_write: bool = False
    generated_keys: tuple[Any, ...] = ()
    force_primary: bool = False

    @property
    def data_sources(self) -> tuple[str, ...]:
        """Distinct data sources of the units, in unit order."""
        return tuple(dict.fromkeys(u.data_source for u in self.units))

    def explain(self) -> list[tuple[str, str, str, str]]:
        """Rows of ``(data source, SQL, params, why)`` — the route preview."""
        why = "; ".join(f"{t.logic_table}: {t.reason}" for t in self.tables) or self.kind.value
        return [(u.data_source, u.sql, repr(list(u.params)), why) for u in self.units]
