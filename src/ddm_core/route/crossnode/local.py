"""The shape of a cross-node SELECT simple enough to join in the client, without copies.

A statement qualifies when it only filters each table by itself (conditions
already pushed into the parts), pairs tables by column equalities, and returns
columns: ``SELECT o.id, i.sku FROM t_order o JOIN t_item i ON i.order_id =
o.id WHERE o.user_id = ?``. Then the parts' rows hold everything the answer
needs, and pairing them by key gives exactly the server's rows *when the keys
compare in Python as in SQL*: integers and decimals by value, NULL never equal.
The runner checks the values it read; strings (collations) and floats go to
the gathering node instead (docs/cross-node-queries.md#strategies).

No grouping, aggregates, DISTINCT, ORDER BY, LIMIT, subqueries or expressions:
the server's rules for those are not reproduced here.
"""

from __future__ import annotations

from typing import NamedTuple

from sqlglot import exp

from ddm_core.route.crossnode.parts import Occurrence, conjuncts

__all__ = ["LocalJoin", "JoinStep", "Output", "local_join"]


class JoinStep(NamedTuple):
    """Join part ``part`` to the rows so far: ``keys`` are ``(earlier part, its column, this part's column)``."""

    part: int
    outer: bool  # LEFT JOIN: a row without a match keeps NULLs for this part
    keys: tuple[tuple[int, str, str], ...]


class Output(NamedTuple):
    part: int
    column: str | None  # None: every column of the part (``q.*``)
    name: str  # the result column's name


class LocalJoin(NamedTuple):
    first: int  # the FROM part
    steps: tuple[JoinStep, ...]
    filters: tuple[tuple[int, str, int, str], ...]  # WHERE equalities between parts, applied after the joins
    outputs: tuple[Output, ...]


def local_join(tree: exp.Expr, occurrences: list[Occurrence]) -> LocalJoin | None:
    """``tree``'s shape as a client-side join, or ``None`` when it is not that simple."""
    if not isinstance(tree, exp.Select) or any(tree.args.get(a) for a in (
            "group", "having", "order", "limit", "offset", "distinct", "qualify", "windows", "with_", "locks",
            "into", "kind")):
        return None
    if any(isinstance(n, (exp.Subquery, exp.AggFunc, exp.Window)) or (isinstance(n, exp.Select) and n is not tree)
           for n in tree.walk()):
        return None
    by_node = {id(o.node): k for k, o in enumerate(occurrences)}
    by_name = {o.qualifier.lower(): k for k, o in enumerate(occurrences)}
    source = tree.args.get("from_")
    first = by_node.get(id(source.this)) if source is not None else None
    if first is None or len(by_name) != len(occurrences):
        return None
    pushed = {id(c) for o in occurrences for c in o.conditions}
    seen = [first]
    steps = []
    for join in tree.args.get("joins") or []:
        side = (join.side or "").upper()
        k = by_node.get(id(join.this))
        if k is None or side not in ("", "LEFT") or join.args.get("using") or join.args.get("method") \
                or (join.kind or "").upper() not in ("", "INNER", "CROSS", "OUTER"):
            return None
        pairs = _equalities(join.args.get("on"), pushed, by_name)
        if pairs is None:
            return None
        keys = []
        for (a, ca), (b, cb) in pairs:
            if b == k and a in seen:
                keys.append((a, ca, cb))
            elif a == k and b in seen:
                keys.append((b, cb, ca))
            else:
                return None
        if not keys:
            return None  # a cross product: the server builds it without holding it in the client
        steps.append(JoinStep(k, side == "LEFT", tuple(keys)))
        seen.append(k)
    where = tree.args.get("where")
    found = _equalities(where.this if where is not None else None, pushed, by_name)
    if found is None:
        return None
    filters = [(a, ca, b, cb) for (a, ca), (b, cb) in found]
    outputs = []
    for item in tree.expressions:
        name = item.alias if isinstance(item, exp.Alias) else None
        node = item.this if isinstance(item, exp.Alias) else item
        if not isinstance(node, exp.Column) or not node.table or node.table.lower() not in by_name:
            return None
        k = by_name[node.table.lower()]
        if isinstance(node.this, exp.Star):
            outputs.append(Output(k, None, "*"))
        else:
            outputs.append(Output(k, node.name, name or node.name))
    return LocalJoin(first, tuple(steps), tuple(filters), tuple(outputs))


def _equalities(condition: exp.Expr | None, pushed: set[int], by_name: dict[str, int]
                ) -> list[tuple[tuple[int, str], tuple[int, str]]] | None:  # fmt: skip
    """The conjuncts of ``condition`` not pushed into a part, each an equality between two parts
    (``None``: one is something else)."""
    out = []
    for conjunct in conjuncts(condition):
        if id(conjunct) in pushed:
            continue
        pair = _equality(conjunct, by_name)
        if pair is None:
            return None
        out.append(pair)
    return out


def _equality(condition: exp.Expr, by_name: dict[str, int]) -> tuple[tuple[int, str], tuple[int, str]] | None:
    """``a.x = b.y`` between two different parts, as ((a, x), (b, y))."""
    if not (isinstance(condition, exp.EQ) and isinstance(condition.left, exp.Column)
            and isinstance(condition.right, exp.Column)):
        return None
    a, b = by_name.get(condition.left.table.lower()), by_name.get(condition.right.table.lower())
    if a is None or b is None or a == b:
        return None
    return (a, condition.left.name), (b, condition.right.name)
