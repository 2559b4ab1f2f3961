"""One statement shape read from the proxy's loop with values that reach other units each time
(route/query/unit_shapes.py: the units are made once per nodes picked, the values filled per statement).

``t_mod``: MOD over the data sources, so a range narrower than them reaches one data source, a wider one both;
``t_slots``: SLOTS, a range reaches all four tables whatever its bounds, an ``IN`` list the tables of its ids.
Each read, text (PyMySQL) and prepared (mysql-connector's binary protocol), in autocommit and on a transaction's
pins, must answer exactly its own rows, as the worker path does.
"""

from __future__ import annotations

from typing import Any, Iterator

import pytest
from mysql import connector

from ddm_core import load_config
from ddm_core.execute import Executor
from services import fresh_mariadb_databases
from test_proxy_support import PASSWORD, USER, InProcessProxy, connect, proxy_config

ROWS = 40
#: (low, high) of each read in turn: wide, narrow, wide, the other data source alone, one id, both again
RANGES = [(1, 40), (4, 4), (3, 30), (5, 5), (6, 7), (2, 2), (1, 40), (9, 12)]
SHAPES = {
    "sum": "SELECT SUM(k), COUNT(*) FROM {t} WHERE id BETWEEN %s AND %s",
    "simple": "SELECT id FROM {t} WHERE id BETWEEN %s AND %s",
    "order": "SELECT c FROM {t} WHERE id BETWEEN %s AND %s ORDER BY c",
    "distinct": "SELECT DISTINCT c FROM {t} WHERE id BETWEEN %s AND %s ORDER BY c",
    "in": "SELECT id FROM {t} WHERE id IN (%s, %s)",
}


def _expected(kind: str, low: int, high: int) -> list[tuple[Any, ...]]:
    ids = range(low, high + 1) if kind != "in" else sorted({low, high})
    if kind == "sum":
        return [(sum(i * 3 for i in ids), len(ids))]
    if kind in ("simple", "in"):
        return sorted((i,) for i in ids)
    cs = [(f"c{i % 6}",) for i in ids]
    return sorted(set(cs)) if kind == "distinct" else sorted(cs)


@pytest.fixture(scope="module")
def proxies() -> Iterator[dict[str, InProcessProxy]]:
    with fresh_mariadb_databases(2) as databases:
        base = proxy_config(databases)
        base["tables"] += [
            {"logicTable": "t_mod", "shardKey": "id", "algorithm": "mod", "shardCount": 2, "tablePerShard": 2,
             "databases": ["ds_0", "ds_1"], "tableKey": "id"},
            {"logicTable": "t_slots", "shardKey": "id", "algorithm": "slots", "slotCount": 64, "shardCount": 2,
             "tablePerShard": 2, "databases": ["ds_0", "ds_1"], "tableKey": "id"},
        ]  # fmt: skip
        base["runtime"] = {"allowFullRoute": True, "allowDmlFullRoute": False, "fullRouteThreshold": 64}
        with Executor(load_config(base), load_schema=False) as ex:
            for table in ("t_mod", "t_slots"):
                ex.execute(f"CREATE TABLE {table} (id INTEGER NOT NULL, k INTEGER NOT NULL, c CHAR(8) NOT NULL, "
                           "PRIMARY KEY (id))").close()  # fmt: skip
                for i in range(1, ROWS + 1):
                    ex.execute(f"INSERT INTO {table} (id, k, c) VALUES (%s, %s, %s)", (i, i * 3, f"c{i % 6}")).close()
        served: dict[str, InProcessProxy] = {}
        try:
            for name, kind in (("loop", {}), ("workers", {"inlineStatements": False})):
                config = {**base, "proxy": {**base["proxy"], **kind}}
                config["pool"] = {**config["pool"], "maxSize": 6, "minIdle": 2, "acquireTimeoutMs": 3000}
                served[name] = InProcessProxy(load_config(config))
            yield served
        finally:
            for one in served.values():
                one.close()


def _reads(cursor: Any, sql: str, pinned: bool) -> list[list[tuple[Any, ...]]]:
    answers = []
    if pinned:
        cursor.execute("BEGIN")
        point = "SELECT k FROM t_mod WHERE id = " + ("%s" if "%s" in sql else "?")
        for i in range(1, 9):  # both data sources pinned first, as sysbench's point selects do
            cursor.execute(point, (i,))
            cursor.fetchall()
    for low, high in RANGES:
        cursor.execute(sql, (low, high))
        answers.append(sorted(tuple(int(v) if type(v).__name__ == "Decimal" else v for v in row)
                              for row in cursor.fetchall()))  # fmt: skip
    if pinned:
        cursor.execute("COMMIT")
    return answers


@pytest.mark.parametrize("pinned", [False, True], ids=["autocommit", "pinned"])
@pytest.mark.parametrize("prepared", [False, True], ids=["text", "prepared"])
@pytest.mark.parametrize("table", ["t_mod", "t_slots"])
@pytest.mark.parametrize("kind", list(SHAPES))
def test_each_read_of_a_shape_answers_its_own_rows(
    proxies: dict[str, InProcessProxy], kind: str, table: str, prepared: bool, pinned: bool
) -> None:
    sql = SHAPES[kind].format(t=table)
    want = [_expected(kind, low, high) for low, high in RANGES]
    for name, one in proxies.items():
        before = one.server.runtime.many_inlined
        if prepared:
            conn = connector.connect(host="127.0.0.1", port=one.port, user=USER, password=PASSWORD,
                                     database="logic_db", use_pure=False, autocommit=True, ssl_disabled=True)  # fmt: skip
            cursor = conn.cursor(prepared=True)
            got = _reads(cursor, sql.replace("%s", "?"), pinned)
        else:
            conn = connect(one.port, autocommit=True)
            cursor = conn.cursor()
            got = _reads(cursor, sql, pinned)
        cursor.close()
        conn.close()
        assert got == want, name
        if name == "loop" and kind != "in":  # the multi-unit reads went from the loop (the first routes the shape)
            assert one.server.runtime.many_inlined > before
