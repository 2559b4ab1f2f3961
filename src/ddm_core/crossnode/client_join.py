"""Joining a simple cross-node SELECT's parts in the client (the shape: :mod:`ddm_core.route.crossnode.local`).

Rows pair up when every key column of both sides is equal and none is NULL;
a LEFT JOIN keeps an unmatched row with NULLs. That is SQL's answer only for
keys Python compares as SQL does, which :func:`plain_keys` checks on the values
read: integers and decimals (by value: ``1 = 1.00``), NULL. A string compares
under its column's collation and a float as a double, so parts with such keys
are copied to the gathering node instead (docs/cross-node-queries.md#strategies).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Iterable, Sequence

from ddm_core.execute.result import Result
from ddm_core.route.crossnode import ExplainPlan
from ddm_core.route.crossnode.local import LocalJoin

__all__ = ["key_columns", "plain_keys", "join_rows", "explained"]

_VAR_STRING = 253  # the protocol's type code of a text column

Part = tuple[Sequence[Sequence[Any]], list[Sequence[Any]]]  # (DB-API description, rows)


def key_columns(local: LocalJoin) -> dict[int, set[str]]:
    """Per part, the (lower-case) columns the join compares."""
    out: dict[int, set[str]] = {}
    for step in local.steps:
        for a, ca, cb in step.keys:
            out.setdefault(a, set()).add(ca.lower())
            out.setdefault(step.part, set()).add(cb.lower())
    for a, ca, b, cb in local.filters:
        out.setdefault(a, set()).add(ca.lower())
        out.setdefault(b, set()).add(cb.lower())
    return out


def plain_keys(indexes: Iterable[int], rows: Sequence[Sequence[Any]]) -> bool:
    """Do these key columns hold only integers, decimals and NULLs (which Python compares as SQL does)?"""
    for i in indexes:
        for row in rows:
            value = row[i]
            if value is not None and (type(value) is not int and type(value) is not Decimal):
                return False
    return True


def join_rows(local: LocalJoin, parts: dict[int, Part]) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The statement's rows: ``(description, rows)``."""
    index = {k: {str(d[0]).lower(): i for i, d in enumerate(desc)} for k, (desc, _) in parts.items()}
    position = {local.first: 0}
    combos: list[tuple[Any, ...]] = [(row,) for row in parts[local.first][1]]
    for step in local.steps:
        right = [index[step.part][c.lower()] for _, _, c in step.keys]
        left = [(position[a], index[a][c.lower()]) for a, c, _ in step.keys]
        table: dict[tuple[Any, ...], list[Sequence[Any]]] = {}
        for row in parts[step.part][1]:
            key = tuple(row[i] for i in right)
            if None not in key:
                table.setdefault(key, []).append(row)
        joined: list[tuple[Any, ...]] = []
        for combo in combos:
            key = tuple(None if combo[p] is None else combo[p][i] for p, i in left)
            matches = table.get(key) if None not in key else None
            if matches:
                joined.extend(combo + (m,) for m in matches)
            elif step.outer:
                joined.append(combo + (None,))
        position[step.part] = len(position)
        combos = joined
    for a, ca, b, cb in local.filters:
        pa, ia, pb, ib = position[a], index[a][ca.lower()], position[b], index[b][cb.lower()]
        combos = [c for c in combos if c[pa] is not None and c[pb] is not None and c[pa][ia] is not None
                  and c[pa][ia] == c[pb][ib]]
    description: list[tuple[Any, ...]] = []
    picks: list[tuple[int, int]] = []
    for out in local.outputs:
        desc = parts[out.part][0]
        columns = range(len(desc)) if out.column is None else [index[out.part][out.column.lower()]]
        for i in columns:
            description.append((out.name if out.column is not None else desc[i][0], *desc[i][1:]))
            picks.append((position[out.part], i))
    rows = [tuple(None if c[p] is None else c[p][i] for p, i in picks) for c in combos]
    return description, rows


def explained(plan: ExplainPlan) -> Result:
    """``EXPLAIN`` of a cross-node SELECT, answered by the client: one row per step of its plan."""
    description = [(name, _VAR_STRING, None, None, None, None, True) for name in plan.columns]
    return Result.buffered(description, plan.explain())
