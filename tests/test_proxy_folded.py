"""Aggregates folded from the answers' bytes (proxy/folded_many.py) against an unsharded table and the decoded merge.

``t_fold`` is sharded over 2 data sources x 2 tables; ``t_all``, in a database of its own, holds the same rows
unsharded. Hypothesis writes rows — BIGINT and BIGINT UNSIGNED extremes, DECIMAL(60,30) values, NULLs, few or
none in the range read — and each aggregate read goes to the relaying proxy (folded), the decoding one (the
merge engine) and straight to MariaDB on ``t_all``: through PyMySQL the relaying proxy's values equal the
unsharded table's, type for type; on the wire its packets equal the decoding proxy's, text and binary rows.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Iterator

import pymysql  # type: ignore[import-untyped]
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ddm_core import load_config
from ddm_core.execute import Executor
from services import fresh_mariadb_databases, mariadb_connect
from test_proxy_many_loop import Served, _served, _table
from test_proxy_relay_bytes import Wire
from test_proxy_support import PASSWORD, USER, proxy_config

DDL = "CREATE TABLE {name} (id INTEGER NOT NULL, k BIGINT NULL, u BIGINT UNSIGNED NULL, d DECIMAL(60,30) NULL, " \
      "PRIMARY KEY (id))"  # fmt: skip
READS = (
    "SELECT COUNT(*), SUM(k), MIN(k), MAX(k), COUNT(k) FROM {t} WHERE id BETWEEN %s AND %s",
    "SELECT SUM(u), MIN(u), MAX(u), SUM(d), MIN(d), MAX(d) FROM {t} WHERE id BETWEEN %s AND %s",
)
BIGINT = st.integers(-(1 << 63), (1 << 63) - 1)
UNSIGNED = st.integers(0, (1 << 64) - 1)
DECIMALS = st.decimals(min_value=Decimal(-10) ** 29, max_value=Decimal(10) ** 29, places=30, allow_nan=False,
                       allow_infinity=False)  # fmt: skip
ROWS = st.dictionaries(st.integers(1, 64), st.tuples(st.none() | BIGINT, st.none() | UNSIGNED, st.none() | DECIMALS),
                       max_size=12)  # fmt: skip


class Setup:
    def __init__(self, executor: Executor, served: dict[str, Served], oracle: str) -> None:
        self.executor, self.served, self.oracle = executor, served, oracle


@pytest.fixture(scope="module")
def setup() -> Iterator[Setup]:
    with fresh_mariadb_databases(3) as databases:
        base = proxy_config(databases[:2])
        base["tables"] += [_table("t_fold")]
        base["runtime"] = {"allowFullRoute": True, "allowDmlFullRoute": True, "fullRouteThreshold": 64}
        conn = mariadb_connect()
        try:
            with conn.cursor() as cur:
                cur.execute(DDL.format(name=f"`{databases[2]}`.t_all"))
            conn.commit()
        finally:
            conn.close()
        with Executor(load_config(base), load_schema=False) as executor:
            executor.execute(DDL.format(name="t_fold")).close()
            served: dict[str, Served] = {}
            try:
                for name in ("relay", "decoded"):
                    served[name] = _served(base, name)
                yield Setup(executor, served, databases[2])
            finally:
                for one in served.values():
                    one.close()


def _write(setup: Setup, rows: dict[int, tuple[Any, ...]]) -> None:
    """``rows`` in ``t_fold`` (sharded) and ``t_all`` (unsharded), and nothing else."""
    executor = setup.executor
    executor.execute("DELETE FROM t_fold WHERE id BETWEEN 0 AND 1000").close()
    for key, values in rows.items():
        executor.execute("INSERT INTO t_fold (id, k, u, d) VALUES (%s, %s, %s, %s)", (key, *values)).close()
    conn = mariadb_connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"DELETE FROM `{setup.oracle}`.t_all")
            if rows:
                cur.executemany(f"INSERT INTO `{setup.oracle}`.t_all (id, k, u, d) VALUES (%s, %s, %s, %s)",
                                [(key, *values) for key, values in rows.items()])  # fmt: skip
        conn.commit()
    finally:
        conn.close()


def _typed(row: tuple[Any, ...]) -> list[tuple[type, Any]]:
    return [(type(v), v) for v in row]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=ROWS, low=st.integers(0, 40), span=st.integers(0, 70))
def test_folded_aggregates_are_the_unsharded_tables_and_the_decoded_merges(
    setup: Setup, rows: dict[int, tuple[Any, ...]], low: int, span: int
) -> None:
    _write(setup, rows)
    relay, decoded = setup.served["relay"], setup.served["decoded"]
    runtime = relay.server.runtime
    direct = mariadb_connect()
    client = pymysql.connect(host="127.0.0.1", port=relay.port, user=USER, password=PASSWORD, database="logic_db",
                             autocommit=True)  # fmt: skip
    try:
        for sql in READS:
            with direct.cursor() as cur:
                cur.execute(sql.format(t=f"`{setup.oracle}`.t_all"), (low, low + span))
                want = cur.fetchone()
            with client.cursor() as cur:
                for _ in range(2):  # the first of a shape is routed on a worker
                    before = runtime.many_folded
                    cur.execute(sql.format(t="t_fold"), (low, low + span))
                    got = cur.fetchone()
            assert _typed(got) == _typed(want), sql
            wires = {name: Wire(one.port, USER, PASSWORD, "logic_db") for name, one in setup.served.items()}
            try:
                literal = sql.format(t="t_fold") % (low, low + span)
                marked = sql.format(t="t_fold").replace("%s", "?")
                frames = {name: [wire.query(literal).frames, wire.execute(marked, [low, low + span], with_types=True).frames]
                          for name, wire in wires.items()}  # fmt: skip
            finally:
                for wire in wires.values():
                    wire.close()
            assert frames["relay"] == frames["decoded"], sql
        assert runtime.many_folded > before  # the relaying proxy folded them (the last read at least)
    finally:
        client.close()
        direct.close()
    relay.at_rest()
    decoded.at_rest()
