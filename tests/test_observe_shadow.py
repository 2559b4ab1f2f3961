"""Shadow routing on MariaDB: MOD in use, an INLINE expression as the candidate.

``MOD`` takes the remainder the mathematical way (``-5 mod 4 = 3``); the
INLINE expression ``ds_${user_id % 4}`` takes Java's (``-5 % 4 = -1``, no such
data source). So the candidate agrees on 0 and every positive key and refuses
every negative key that is not a multiple of 4 — the edge case a team wants
to find before switching. Expected figures come from that arithmetic
(``math.fmod``), the rows' places from reading each database directly.
"""

from __future__ import annotations

import logging
import math
from typing import Any, Iterator

import pytest
from prometheus_client import CollectorRegistry

from ddm_core import load_config, metrics
from ddm_core.errors import ConfigError
from ddm_core.execute import Executor
from ddm_core.observe import ShadowRouter
from ddm_core.observe.shadow import NODES, SHADOW_ERROR
from services import fresh_mariadb_databases, mariadb_rows

KEYS = range(-8, 9)
DDL = "CREATE TABLE t_order (order_id BIGINT NOT NULL PRIMARY KEY, user_id BIGINT NOT NULL)"


def config(dbs: list[str], algorithm: dict[str, Any]) -> Any:
    return load_config({
        "dataSources": {f"ds_{i}": {"url": f"mysql://127.0.0.1:3306/{db}", "username": "root", "password": ""}
                        for i, db in enumerate(dbs)},
        "pool": {"maxSize": 2, "minIdle": 0, "acquireTimeoutMs": 1000},
        "tables": [{"logicTable": "t_order", "dataNodes": "ds_${0..3}.t_order",
                    "databaseStrategy": {"kind": "standard", "columns": ["user_id"], "algorithm": "db"},
                    "keyGenerator": {"column": "order_id", "type": "snowflake"}}],
        "algorithms": {"db": algorithm},
    })  # fmt: skip


MOD = {"type": "MOD", "props": {"sharding-count": 4}}
INLINE = {"type": "INLINE", "props": {"algorithm-expression": "ds_${user_id % 4}"}}


@pytest.fixture()
def dbs() -> Iterator[list[str]]:
    with fresh_mariadb_databases(4) as names:
        with Executor(config(names, MOD), load_schema=False) as ex:
            ex.execute(DDL).close()
        yield names


def refused_by_inline(key: int) -> bool:
    return math.fmod(key, 4) < 0  # Java's remainder: negative, so no data source ds_-N


def test_mismatches_are_the_negative_keys(dbs: list[str], caplog: pytest.LogCaptureFixture) -> None:
    router = ShadowRouter(config(dbs, MOD), config(dbs, INLINE))
    registry = CollectorRegistry()
    caplog.set_level(logging.WARNING, logger="ddm_core.observe.shadow")
    with Executor(router, load_schema=False) as ex:
        installed = metrics.install(registry, executor=ex)
        for k in KEYS:  # explicit ids: compared (generated ones would differ between the two routes)
            ex.execute("INSERT INTO t_order (order_id, user_id) VALUES (%s, %s)", (1000 + k, k)).close()
        for k in KEYS:
            with ex.execute("SELECT order_id FROM t_order WHERE user_id = %s", (k,)) as r:
                assert r.fetchall() == [(1000 + k,)]  # the primary's routes, unchanged
        ex.execute("INSERT INTO t_order (user_id) VALUES (%s)", (3,)).close()  # generated key: skipped
        text = installed.text()
        installed.uninstall()
    # Every row is where MOD (floor remainder) put it: ds_(k mod 4).
    for k in KEYS:
        assert mariadb_rows(dbs[k % 4], "SELECT order_id FROM t_order WHERE user_id = %s", (k,))[0][0] == 1000 + k
    refused = [k for k in KEYS if refused_by_inline(k)]
    assert refused == [-7, -6, -5, -3, -2, -1]
    counts = router.counts()
    assert counts.compared == {"t_order": 2 * len(KEYS)}
    assert counts.mismatches == {("t_order", SHADOW_ERROR): 2 * len(refused)}
    assert counts.skipped == 1
    assert sorted({m.params[1] if len(m.params) == 2 else m.params[0] for m in router.recent}) == refused
    assert all(m.kind == SHADOW_ERROR and "ds_-" in (m.error or "") for m in router.recent)
    logged = [r.getMessage() for r in caplog.records if r.name == "ddm_core.observe.shadow"]
    assert len(logged) == 2 * len(refused)
    assert any("params (-5,)" in line and "WHERE user_id = %s" in line for line in logged)
    assert 'ddm_shadow_compared_total{table="t_order"} 34.0' in text
    assert f'ddm_shadow_mismatches_total{{kind="shadow-error",table="t_order"}} {2.0 * len(refused)}' in text


def test_other_nodes_are_reported_with_both_routes(dbs: list[str]) -> None:
    # A candidate that shifts every key by one data source: each compared route differs.
    shifted = {"type": "INLINE", "props": {"algorithm-expression": "ds_${(user_id + 1) % 4}"}}
    router = ShadowRouter(config(dbs, MOD), config(dbs, shifted), log_limit=0)
    for k in range(0, 8):
        router.route("SELECT * FROM t_order WHERE user_id = %s", (k,))
    assert router.counts().mismatches == {("t_order", NODES): 8}
    first = router.recent[0]
    assert (first.primary, first.shadow) == (("ds_0.t_order",), ("ds_1.t_order",))
    # A multi-key statement compares node sets, not order.
    router.route("SELECT * FROM t_order WHERE user_id IN (0, 1, 2, 3)")
    assert router.counts().mismatches == {("t_order", NODES): 8}  # the same four nodes: no difference


def test_sampling_and_bad_settings(dbs: list[str]) -> None:
    draws = iter([0.9, 0.1, 0.9, 0.1])
    router = ShadowRouter(config(dbs, MOD), config(dbs, INLINE), sample=0.5, rng=lambda: next(draws))
    for k in (-1, -2, -3, -5):
        router.route("SELECT * FROM t_order WHERE user_id = %s", (k,))
    assert router.counts().compared == {"t_order": 2}  # the two draws below 0.5
    with pytest.raises(ConfigError, match="within 0..1"):
        ShadowRouter(config(dbs, MOD), config(dbs, INLINE), sample=2.0)
    with pytest.raises(ConfigError, match="t_nope are not sharded tables of the shadow"):
        ShadowRouter(config(dbs, MOD), config(dbs, INLINE), tables=["t_nope"])
