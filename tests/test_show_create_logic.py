"""``SHOW CREATE TABLE`` of a sharded table answers as the logic table, on every path a caller takes.

The statement runs on the table's first physical table (they are alike); what comes back names that
physical table, and its constraint names carry the router's ``_<physical table>`` suffix (an
``AUTO_INCREMENT=`` counter, one table's own, is dropped too: a sharded table has none, see the last test). The caller — the thread executor, the asyncio executor,
the PEP 249 facade, a client of ``ddm proxy`` — gets the logic table's name, the logic DDL
(route/ddl/logic_ddl.py: the statement the table was created with, as MariaDB writes it) and no
counter; the text runs as written and creates the same table again. Other SHOW statements, and SHOW
CREATE TABLE of a table the configuration does not shard, answer as the data source does.
"""

from __future__ import annotations

from typing import Any, Iterator

import pymysql  # type: ignore[import-untyped]
import pytest

import ddm_core
from ddm_core import load_config
from ddm_core.execute import Executor
from ddm_core.route.ddl.logic_ddl import logic_ddl, logic_show_create
from runners import RUNNERS, BlockingAsyncExecutor
from services import fresh_mariadb_databases, mariadb_connect
from test_proxy_support import PASSWORD, USER, InProcessProxy, proxy_config

DDL = ("CREATE TABLE t_order (order_id BIGINT NOT NULL, user_id BIGINT NOT NULL, amount INT NULL, "
       "note VARCHAR(20) NULL, CONSTRAINT chk_amount CHECK (amount >= 0), KEY k_user (user_id), "
       "PRIMARY KEY (order_id))")  # fmt: skip


@pytest.fixture(scope="module")
def setup() -> Iterator[tuple[dict[str, Any], list[str]]]:
    with fresh_mariadb_databases(2) as databases:
        config = proxy_config(databases)
        with Executor(load_config(config), load_schema=False) as ex:
            ex.execute(DDL).close()
            ex.execute("CREATE TABLE plain_notes (id INT PRIMARY KEY, body TEXT)").close()  # not configured
            for i in range(1, 9):
                ex.execute("INSERT INTO t_order (order_id, user_id, amount) VALUES (%s, %s, %s)", (i, i, i)).close()
        yield config, databases


def _physical(databases: list[str]) -> tuple[str, str]:
    """The first physical table's name and ``SHOW CREATE TABLE`` text, read directly."""
    conn = mariadb_connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW CREATE TABLE `%s`.t_order_0_0" % databases[0])
            name, text = cur.fetchone()
    finally:
        conn.close()
    return str(name), str(text)


def _check(row: tuple[Any, ...], databases: list[str]) -> None:
    physical, text = _physical(databases)
    assert physical == "t_order_0_0" and "`chk_amount_t_order_0_0`" in text
    assert row == ("t_order", logic_ddl(text, physical, "t_order"))
    logic = row[1]
    assert logic.startswith("CREATE TABLE `t_order` (") and "AUTO_INCREMENT=" not in logic
    assert "CONSTRAINT `chk_amount` CHECK" in logic and "t_order_0_0" not in logic


@pytest.mark.parametrize("runner", RUNNERS)
def test_the_executors_answer_with_the_logic_table(setup: tuple[dict[str, Any], list[str]], runner: str) -> None:
    config, databases = setup
    ex: Any = Executor(load_config(config), load_schema=False) if runner == "threads" else BlockingAsyncExecutor(
        load_config(config), load_schema=False)  # fmt: skip
    try:
        for sql in ("SHOW CREATE TABLE t_order", "show create table T_ORDER", "SHOW CREATE TABLE logic_db.t_order"):
            result = ex.execute(sql)
            assert [d[0] for d in result.description] == ["Table", "Create Table"]
            (row,) = list(result)
            _check(tuple(row), databases)
        (plain,) = list(ex.execute("SHOW CREATE TABLE plain_notes"))  # not sharded: as the data source answers
        assert plain[0] == "plain_notes" and plain[1].startswith("CREATE TABLE `plain_notes`")
        columns = [r[0] for r in ex.execute("SHOW COLUMNS FROM t_order")]
        assert columns == ["order_id", "user_id", "amount", "note"]
    finally:
        ex.close()


def test_the_logic_text_creates_the_same_table(setup: tuple[dict[str, Any], list[str]]) -> None:
    config, databases = setup
    with Executor(load_config(config), load_schema=False) as ex:
        (row,) = list(ex.execute("SHOW CREATE TABLE t_order"))
    physical, text = _physical(databases)
    conn = mariadb_connect()
    try:
        with conn.cursor() as cur:  # the logic text, run as written in a scratch database, makes the same table
            cur.execute(f"USE `{databases[1]}`")
            cur.execute(row[1])
            cur.execute("SHOW CREATE TABLE t_order")
            again = cur.fetchone()[1]
            cur.execute("DROP TABLE t_order")
    finally:
        conn.close()
    assert again == row[1]
    assert again == logic_ddl(text, physical, "t_order")


def test_the_facade_and_the_proxy_answer_with_the_logic_table(setup: tuple[dict[str, Any], list[str]]) -> None:
    config, databases = setup
    facade = ddm_core.connect(load_config(config), load_schema=False)
    try:
        cur = facade.cursor()
        cur.execute("SHOW CREATE TABLE t_order")
        _check(tuple(cur.fetchone()), databases)
    finally:
        facade.close()
    proxy = InProcessProxy(load_config(config), load_schema=False)
    try:
        for prepared in (False, True):  # text, and a prepared statement (mysql-connector)
            if prepared:
                connector = pytest.importorskip("mysql.connector")
                client: Any = connector.connect(host="127.0.0.1", port=proxy.port, user=USER, password=PASSWORD,
                                                database="logic_db", use_pure=True, ssl_disabled=True)  # fmt: skip
                cur = client.cursor(prepared=True)
            else:
                client = pymysql.connect(host="127.0.0.1", port=proxy.port, user=USER, password=PASSWORD,
                                         database="logic_db")  # fmt: skip
                cur = client.cursor()
            try:
                cur.execute("SHOW CREATE TABLE t_order")
                row = tuple(v.decode() if isinstance(v, (bytes, bytearray)) else v for v in cur.fetchone())
                _check(row, databases)
            finally:
                client.close()
    finally:
        proxy.close()


def test_a_row_of_bytes_is_read_as_text() -> None:
    text = b"CREATE TABLE `t_x_1` (\n  `id` int(11) NOT NULL\n) ENGINE=InnoDB AUTO_INCREMENT=12 DEFAULT CHARSET=utf8mb4"
    assert logic_show_create("t_x", frozenset({"t_x"}), (b"t_x_1", text)) == (
        "t_x", "CREATE TABLE `t_x` (\n  `id` int(11) NOT NULL\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4")
    assert logic_ddl("CREATE TABLE `a_1` (`id` int)", "a_1", "we`ird").startswith("CREATE TABLE `we``ird` (")
    child = ("CREATE TABLE `item_0_1` (`id` int, CONSTRAINT `fk_a_item_0_1` FOREIGN KEY (`id`) REFERENCES `t_0_1` (`id`), "
             "CONSTRAINT `fk_b_item_0_1` FOREIGN KEY (`id`) REFERENCES `other_0_1` (`id`), "
             "CONSTRAINT `fk_c_item_0_1` FOREIGN KEY (`id`) REFERENCES `t_1_1` (`id`))")
    _, shown = logic_show_create("item", frozenset({"item", "t"}), ("item_0_1", child))
    # a bound table on the same node: its logic name; a table not sharded, or of another suffix: as written
    assert "`fk_a` FOREIGN KEY (`id`) REFERENCES `t` (`id`)" in shown
    assert "REFERENCES `other_0_1`" in shown and "REFERENCES `t_1_1`" in shown
