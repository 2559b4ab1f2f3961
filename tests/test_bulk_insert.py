"""executemany's bulk path: chunks routed first, rows regrouped per physical table, re-cut to limits."""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import pytest

import ddm_core.dbapi as dbapi
from ddm_core import Router, load_config
from ddm_core.execute import Executor
from ddm_core.execute.bulk import regroup
from ddm_core.route.plan import RoutePlan, RouteUnit
from test_execute_support import sharding_config

INSERT = "INSERT INTO t_order (user_id, amount, note) VALUES (%s, %s, %s)"


def _config(tmp_path: Path) -> Any:
    urls = {f"ds_{i}": f"sqlite:///{tmp_path / f'ds_{i}.db'}" for i in range(4)}
    return load_config(sharding_config(urls))


def _plans(router: Router, rows: list[tuple[Any, ...]], chunk: int) -> list[RoutePlan]:
    batch = dbapi.insert_batch(INSERT)
    assert batch is not None
    return [router.route(*batch.build(rows[s : s + chunk])) for s in range(0, len(rows), chunk)]


def _no_limits(ds: str) -> tuple[int | None, int | None]:
    return None, None


def _rows_by_table(units: tuple[RouteUnit, ...], width: int) -> dict[tuple[str, str], list[tuple[Any, ...]]]:
    out: dict[tuple[str, str], list[tuple[Any, ...]]] = collections.defaultdict(list)
    for u in units:
        p = u.params
        out[(u.data_source, u.tables[0][1])] += [tuple(p[i : i + width]) for i in range(0, len(p), width)]
    return out


def test_chunks_are_regrouped_into_one_insert_per_table(tmp_path: Path) -> None:
    router = Router(_config(tmp_path))
    rows = [(u, u % 7, f"n{u}") for u in range(1, 3001)]
    plans = _plans(router, rows, 1000)
    assert sum(len(p.units) for p in plans) == 48  # 3 chunks x 16 tables
    merged = regroup(plans, "(%s, %s, %s)", "%s", _no_limits)
    assert merged is not None and len(merged.units) == 16 and merged.is_write
    # Generated keys keep the order of all rows; each table gets its rows, in order, with their keys.
    keys = merged.generated_keys
    assert keys == tuple(k for p in plans for k in p.generated_keys) and len(keys) == 3000
    got = _rows_by_table(merged.units, 4)  # three columns + the generated order_id
    expected = _rows_by_table(tuple(u for p in plans for u in p.units), 4)
    assert got == expected
    for u in merged.units:  # one statement text per table: head, rows, nothing after
        n = len(u.params) // 4
        assert u.sql.count("(%s, %s, %s, %s)") == n and u.sql.endswith("(%s, %s, %s, %s)")


def test_statements_are_cut_to_the_parameter_and_byte_limits(tmp_path: Path) -> None:
    router = Router(_config(tmp_path))
    rows = [(u, 1, "x" * 40) for u in range(1, 2001)]
    plans = _plans(router, rows, 500)
    by_params = regroup(plans, "(%s, %s, %s)", "%s", lambda ds: (None, 40))  # 10 rows of 4 params
    assert by_params is not None and all(len(u.params) <= 40 for u in by_params.units)
    by_bytes = regroup(plans, "(%s, %s, %s)", "%s", lambda ds: (4000, None))
    assert by_bytes is not None
    assert all(len(u.sql) + 2 * sum(len(str(v)) + 3 for v in u.params) <= 4000 for u in by_bytes.units)
    for merged in (by_params, by_bytes):  # cut differently, the same rows
        assert _rows_by_table(merged.units, 4) == _rows_by_table(tuple(u for p in plans for u in p.units), 4)


def test_units_of_another_shape_are_left_as_routed(tmp_path: Path) -> None:
    router = Router(_config(tmp_path))
    plans = _plans(router, [(1, 1, "a"), (2, 2, "b")], 2)
    odd = plans[0]._replace(units=tuple(u._replace(sql=u.sql + " ON DUPLICATE KEY UPDATE note = %s",
                                                   params=(*u.params, "z")) for u in plans[0].units))
    assert regroup([odd], "(%s, %s, %s)", "%s", _no_limits) is None
    select = router.route("SELECT 1 FROM t_order WHERE user_id = %s", (1,))
    assert regroup([select], "(%s, %s, %s)", "%s", _no_limits) is None


@pytest.mark.parametrize("batch_rows", [1000, 7, None])
def test_executemany_lands_every_row_once(tmp_path: Path, batch_rows: int | None) -> None:
    config = _config(tmp_path)
    with Executor(config) as ex:
        ex.execute("CREATE TABLE t_order (order_id BIGINT PRIMARY KEY, user_id BIGINT, amount INT, note TEXT, "
                   "slow INT NOT NULL DEFAULT 0)").close()
        conn = dbapi.connect(executor=ex, autocommit=True)
        cur = conn.cursor()
        cur.batch_rows = batch_rows
        rows = [(u, u % 5, f"n{u}") for u in range(1, 2501)]
        assert cur.executemany(INSERT, rows) == 2500
        keys = cur.generated_keys
        assert len(set(keys)) == 2500
        cur.execute("SELECT order_id, user_id, amount, note FROM t_order")
        got = sorted(cur.fetchall(), key=lambda r: r[1])
        assert [r[1:] for r in got] == rows
        assert [r[0] for r in got] == list(keys)  # keys in row order
        conn.close()


def test_a_migrations_dual_units_are_regrouped_with_the_rows(tmp_path: Path) -> None:
    router = Router(_config(tmp_path))
    rows = [(u, 1, f"n{u}") for u in range(1, 1201)]
    plans = _plans(router, rows, 400)
    # The same rows written again elsewhere, as a migration's dual write does: every unit also on ds_9.
    dual_plans = [p._replace(dual=tuple(u._replace(data_source="ds_9") for u in p.units)) for p in plans]
    merged = regroup(dual_plans, "(%s, %s, %s)", "%s", _no_limits)
    assert merged is not None and len(merged.dual) == len(merged.units) == 16
    moved = {(ds.replace("ds_9", "*"), t): r for (ds, t), r in _rows_by_table(merged.dual, 4).items()}
    assert moved == {("*", t): r for (_, t), r in _rows_by_table(merged.units, 4).items()}
    assert regroup(plans, "(%s, %s, %s)", "%s", _no_limits).dual == ()  # type: ignore[union-attr]
    odd = dual_plans[0]._replace(dual=tuple(u._replace(sql=u.sql + " ON DUPLICATE KEY UPDATE note = %s",
                                                       params=(*u.params, "z")) for u in dual_plans[0].dual))
    assert regroup([odd], "(%s, %s, %s)", "%s", _no_limits) is None  # run as routed, each with its dual units


def test_a_constant_row_template_is_what_fill_gives() -> None:
    """``Template.constant`` (the bulk path's shortcut) equals ``fill`` wherever it is set, and only there."""
    from ddm_core.route.text.template import Template

    bound = list(range(100, 112))
    physical = ["t_order_0_1"]
    cases = [
        (Template("(%s, %s, %s)", (3, 4, 5)), True),
        (Template("(%s, 'a{{b}}', NOW())", (0,)), True),  # escaped braces: formatted once
        (Template("(%s, %s)", (5, 3)), False),  # parameters out of order
        (Template("(%s, (SELECT 1 FROM {0}))", (2,)), False),  # names a table
        (Template("()", ()), True),
    ]
    for template, constant in cases:
        assert (template.constant is not None) is constant, template.fmt
        if template.constant is not None:
            text, first, end = template.constant
            assert (text, tuple(bound[first:end])) == template.fill(physical, bound)
