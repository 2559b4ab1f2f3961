"""INSERT ... SELECT whose rows do not stay on the node they are read from.

The SELECT runs as any SELECT does (merged across shards, or itself across
nodes), and its rows are inserted in batches through the router, which routes
each row by the target's shard key and generates keys as a plain INSERT would.
The statement is atomic only inside one transaction that may write to every
data source it reaches: the runner opens an XA transaction for an autocommit
caller, or refuses (docs/cross-node-queries.md#insert-select).
"""

from __future__ import annotations

from typing import Any, NamedTuple, Sequence

from sqlglot import exp

from ddm_core.route.plan import RouteKind, RoutePlan

__all__ = ["InsertSelectStatement", "InsertSelectPlan", "compile_insert_select", "BATCH_ROWS"]

#: Rows per INSERT; a last, smaller batch is cut into powers of two so that few statement texts exist.
BATCH_ROWS = 256


class InsertSelectStatement(NamedTuple):
    """An INSERT ... SELECT compiled once per SQL text."""

    head: str  # ``INSERT [IGNORE] INTO target [(columns)]``
    tail: str  # `` ON DUPLICATE KEY UPDATE ...`` (pyformat) or ""
    select: str  # the SELECT (pyformat)
    target: str
    reason: str

    def route(self, bound: Sequence[Any]) -> RoutePlan:
        params = {f"p{i}": v for i, v in enumerate(bound)}
        return RoutePlan((), RouteKind.CROSS_NODE, statement="insert", is_write=True,
                         cross_node=InsertSelectPlan(self, params))

    def insert(self, rows: int, width: int) -> str:
        """The INSERT of ``rows`` rows of ``width`` values: ``%(vN)s`` placeholders, then the tail's."""
        marks = iter(range(rows * width))
        values = ", ".join("(" + ", ".join(f"%(v{next(marks)})s" for _ in range(width)) + ")" for _ in range(rows))
        return f"{self.head} VALUES {values}{self.tail}"


class InsertSelectPlan(NamedTuple):
    statement: InsertSelectStatement
    params: dict[str, Any]

    @property
    def strategy(self) -> str:
        return "insert ... select"

    @property
    def reason(self) -> str:
        return self.statement.reason

    def explain(self) -> list[tuple[str, str, str, str]]:
        s = self.statement
        return [
            ("select", s.select, "", f"read merged ({s.reason})"),
            ("insert", f"{s.head} VALUES (...){s.tail}", "", f"rows inserted into {s.target} in batches of "
             f"{BATCH_ROWS} through the router, by each row's shard key, in one XA transaction (or the "
             "caller's)"),
        ]


def compile_insert_select(tree: exp.Insert, reason: str, pyformat: Any) -> InsertSelectStatement:
    """Cut ``INSERT ... SELECT`` (parsed, ``:pN`` placeholders) into its SELECT and the INSERT of its rows."""
    select = tree.expression
    conflict = tree.args.get("conflict")
    head = tree.copy()
    head.set("expression", None)
    head.set("conflict", None)
    table = tree.this.this if isinstance(tree.this, exp.Schema) else tree.this
    return InsertSelectStatement(
        head=pyformat(head).strip(),
        tail=" " + pyformat(conflict) if conflict is not None else "",
        select=pyformat(select),
        target=table.name if isinstance(table, exp.Table) else str(table),
        reason=reason,
    )
