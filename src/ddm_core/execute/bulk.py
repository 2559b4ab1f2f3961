"""Bulk INSERTs: rows routed in chunks, regrouped per physical table, re-cut to the server's limits.

``executemany("INSERT ... VALUES (%s, ...)", rows)`` routes its rows in
chunks (one SQL text per chunk size, so the router parses it once). Each
chunk's plan has one multi-row INSERT per physical table the chunk touches:
sent as they are, 20 000 rows over 16 tables in chunks of 1000 would be 320
small statements (and 320 commits in autocommit mode). :func:`regroup` joins
every chunk's rows for the same physical table and cuts them again into as
few statements as the server accepts: at most half its packet limit by an
estimate of the rows' literal size (the other half is headroom for rows
bigger than the sampled ones), at most ``max_statement_params`` bound
parameters. Rows keep their order within each table, and the generated keys
their order over all rows.

A unit is re-cut only when its SQL is exactly ``head`` + the row template
repeated + ``tail`` with every parameter inside the rows; anything else (a
template the router rewrote otherwise) leaves the plans as they were routed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ddm_core.route.plan import NO_MERGE, RouteKind, RoutePlan, RouteUnit, TableRoute

__all__ = ["regroup", "Limits"]

#: ``data source -> (most bytes, most parameters)`` of one statement (``None``: no limit).
Limits = Callable[[str], tuple[int | None, int | None]]

_SAMPLE_ROWS = 16
_FIXED = 32  # literal bytes assumed for a value that is not a string (numbers, dates, NULL)


@dataclass(slots=True)
class _Target:
    data_source: str
    head: str
    row: str
    tail: str
    tables: tuple[tuple[str, str], ...]
    width: int
    params: list[Any] = field(default_factory=list)
    rows: int = 0


def regroup(plans: Sequence[RoutePlan], row: str, placeholder: str, limits: Limits) -> RoutePlan | None:
    """One plan with every chunk's rows per physical table, cut to fit the server's limits.

    Args:
        plans: The routed plans of the chunks, in row order.
        row: The caller's row template (``"(%s, %s)"``), as the router copies it into units.
        placeholder: ``"%s"`` or ``"?"``: the units' parameter marker.
        limits: The statement limits of a data source.

    Returns:
        The regrouped plan, or ``None`` when a unit is not of the expected shape
        (run ``plans`` as they are then).
    """
    rows = (row, row[:-1] + ", " + placeholder + ")")  # the router appends a generated key
    keys: list[Any] = []
    for plan in plans:
        if plan.statement != "insert" or not plan.is_write:
            return None
        keys.extend(plan.generated_keys)
    targets = _targets([u for plan in plans for u in plan.units], rows, placeholder)
    # A migration's dual writes (docs/migration.md#dual-write) are regrouped the same way.
    dual_targets = _targets([u for plan in plans for u in plan.dual], rows, placeholder)
    if targets is None or dual_targets is None:
        return None
    units = [u for t in targets.values() for u in _statements(t, limits(t.data_source))]
    dual = [u for t in dual_targets.values() for u in _statements(t, limits(t.data_source))]
    nodes = tuple(dict.fromkeys(f"{t.data_source}.{physical}" for t in targets.values() for _, physical in t.tables))
    why = f"{sum(t.rows for t in targets.values())} row(s) routed in {len(plans)} chunk(s), regrouped per table"
    return RoutePlan(
        tuple(units),
        RouteKind.SINGLE if len(units) == 1 else RouteKind.MULTI,
        tuple(TableRoute(r.logic_table, nodes, why) for r in plans[0].tables) if plans else (),
        NO_MERGE,
        "insert",
        True,
        generated_keys=tuple(keys),
        force_primary=any(p.force_primary for p in plans),
        dual=tuple(dual),
    )


def _targets(
    units: Sequence[RouteUnit], rows: tuple[str, str], placeholder: str
) -> dict[tuple[str, str, str, str], _Target] | None:
    """Every unit's rows joined per physical table (``None``: a unit is not of the expected shape)."""
    targets: dict[tuple[str, str, str, str], _Target] = {}
    for unit in units:
        cut = _cut(unit, rows, placeholder)
        if cut is None:
            return None
        head, template, tail, count, width = cut
        key = (unit.data_source, head, template, tail)
        target = targets.get(key)
        if target is None:
            target = targets[key] = _Target(unit.data_source, head, template, tail, unit.tables, width)
        target.params.extend(unit.params)
        target.rows += count
    return targets


def _cut(unit: RouteUnit, rows: tuple[str, str], placeholder: str) -> tuple[str, str, str, int, int] | None:
    """``(head, row template, tail, rows, params per row)`` of a multi-row INSERT unit, if it is one."""
    sql, params = unit.sql, unit.params
    for template in rows:
        width = template.count(placeholder)
        if not width or len(params) % width:
            continue
        count = len(params) // width
        start = sql.find(template)
        if start < 0:
            continue
        end = start + count * len(template) + (count - 1) * 2
        if sql[start:end] != ", ".join([template] * count):
            continue
        head, tail = sql[:start], sql[end:]
        if placeholder in head or placeholder in tail:
            continue
        return head, template, tail, count, width
    return None


def _statements(target: _Target, limits: tuple[int | None, int | None]) -> list[RouteUnit]:
    """``target``'s rows as few INSERTs as fit ``limits``."""
    most_bytes, most_params = limits
    width, total = target.width, target.rows
    per = total
    if most_params:
        per = min(per, max(1, most_params // width))
    if most_bytes:
        room = most_bytes // 2 - len(target.head) - len(target.tail)
        per = min(per, max(1, room // (_row_bytes(target) + len(target.row) + 2)))
    params = target.params
    out = []
    for first in range(0, total, per):
        n = min(per, total - first)
        sql = target.head + ", ".join([target.row] * n) + target.tail
        out.append(RouteUnit(target.data_source, sql, tuple(params[first * width : (first + n) * width]), target.tables))
    return out


def _row_bytes(target: _Target) -> int:
    """The largest literal size of a sample of the target's rows (strings: UTF-8 bytes, escaped)."""
    width, total, params = target.width, target.rows, target.params
    step = max(1, total // _SAMPLE_ROWS)
    largest = 0
    for r in range(0, total, step):
        size = 0
        for value in params[r * width : (r + 1) * width]:
            if isinstance(value, str):
                size += 2 * len(value.encode()) + 3
            elif isinstance(value, (bytes, bytearray)):
                size += 2 * len(value) + 10
            elif isinstance(value, memoryview):
                size += 2 * value.nbytes + 10
            else:
                size += _FIXED
        largest = max(largest, size)
    return largest
