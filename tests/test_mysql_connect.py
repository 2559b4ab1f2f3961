"""One recipe opens every MySQL / MariaDB connection: executor, ``ddm ddl --execute``, ``ddm demo``.

Same defaults everywhere (utf8mb4, autocommit, TLS off unless asked for,
connect / read / write timeouts always set), checked on real connections to
the local MariaDB; plus what the recipe relies on inside PyMySQL, so an upgrade
that moves it fails here rather than silently dropping a timeout.
"""

from __future__ import annotations

import re
import socket
import struct
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

from ddm_core import load_config
from ddm_core.cli.demo import MySQLServer
from ddm_core.ddl import _connect as ddl_connect
from ddm_core.errors import ConfigError, CrossShardTransactionError
from ddm_core.execute import Executor
from ddm_core.execute.drivers import driver_for
from ddm_core.execute.mysql_connect import CHARSET, DEFAULT_SOCKET_TIMEOUT, open_mysql, tls_arguments
from test_execute_support import mysql_raw, sharding_config

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def database() -> Iterator[str]:
    name = f"ddm_recipe_{uuid.uuid4().hex[:8]}"
    admin = mysql_raw()
    with admin.cursor() as cur:
        cur.execute(f"CREATE DATABASE {name}")
    try:
        yield name
    finally:
        with admin.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {name}")
        admin.close()


def socket_bounds(raw: Any) -> tuple[float | None, float | None]:
    """(read, write) seconds a connection waits at most: the kernel's SO_RCVTIMEO / SO_SNDTIMEO, else PyMySQL's."""
    if raw._read_timeout is not None:
        return raw._read_timeout, raw._write_timeout
    sock = raw._sock
    out = []
    for option in (socket.SO_RCVTIMEO, socket.SO_SNDTIMEO):
        sec, usec = struct.unpack("ll", sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("ll")))
        out.append(sec + usec / 1_000_000 if sec or usec else None)
    return out[0], out[1]


def assert_recipe(raw: Any, *, connect_timeout: float, socket_timeout: float, database: str | None) -> None:
    """What every ddm-core MySQL connection is like, on the client and on the server."""
    try:
        assert raw.connect_timeout == connect_timeout
        assert socket_bounds(raw) == (socket_timeout, socket_timeout)
        assert raw.charset == CHARSET and raw.get_autocommit() and raw.ssl is False
        with raw.cursor() as cur:
            cur.execute("SELECT DATABASE(), @@character_set_client, @@character_set_results, @@autocommit")
            assert cur.fetchone() == (database, "utf8mb4", "utf8mb4", 1)
            cur.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
            assert cur.fetchone() == ("Ssl_cipher", "")  # not encrypted
            cur.execute("SELECT %s", (memoryview(b"raw"),))
            assert cur.fetchone() in ((b"raw",), ("raw",))
    finally:
        raw.close()


def test_the_recipe_defaults() -> None:
    raw = open_mysql(host="127.0.0.1", port=3306, user="root", password="", database=None, connect_timeout=2.0)
    try:
        assert raw.connect_timeout == 2.0
        assert socket_bounds(raw) == (DEFAULT_SOCKET_TIMEOUT, DEFAULT_SOCKET_TIMEOUT)
        assert raw._sock.gettimeout() is None  # blocking: the kernel enforces the bound (Linux, no TLS)
        assert raw.charset == CHARSET and raw.get_autocommit() and raw.ssl is False
    finally:
        raw.close()


def test_executor_ddl_and_demo_open_connections_alike(database: str) -> None:
    url = f"mysql://127.0.0.1:3306/{database}?socketTimeout=2500&connectTimeout=500"
    config = load_config(sharding_config({"ds_0": {"url": url, "username": "root", "password": ""}}, tables=1))
    endpoint = config.data_sources["ds_0"].primary
    # The executor's driver (pools, schema loading, KILL QUERY connections).
    assert_recipe(driver_for(endpoint.dialect).connect(endpoint, 3.0),
                  connect_timeout=0.5, socket_timeout=2.5, database=database)
    # ddm ddl --execute: the same adapter.
    assert_recipe(ddl_connect(config, "ds_0", 5.0), connect_timeout=0.5, socket_timeout=2.5, database=database)
    # ddm demo --mysql: a server-level connection by the same recipe.
    assert_recipe(MySQLServer("127.0.0.1", 3306, "root", "").connect(),
                  connect_timeout=5.0, socket_timeout=DEFAULT_SOCKET_TIMEOUT, database=None)


@pytest.mark.parametrize(("options", "message"), [
    ({"socketTimeout": "0"}, "socketTimeout='0' must be > 0"),
    ({"socketTimeout": "soon"}, "socketTimeout='soon' is not a number"),
    ({"connectTimeout": "-5"}, "connectTimeout='-5' must be > 0"),
    ({"sslMode": "VERIFY_CA"}, "sslMode='VERIFY_CA' is not one of"),
])
def test_unusable_url_options_name_themselves(database: str, options: dict[str, str], message: str) -> None:
    query = "&".join(f"{k}={v}" for k, v in options.items())
    url = f"mysql://127.0.0.1:3306/{database}?{query}"
    config = load_config(sharding_config({"ds_0": {"url": url, "username": "root", "password": ""}}, tables=1))
    endpoint = config.data_sources["ds_0"].primary
    with pytest.raises(ConfigError) as info:
        driver_for(endpoint.dialect).connect(endpoint, 1.0).close()
    assert message in str(info.value) and "'ds_0'" in str(info.value)


def test_tls_only_when_the_url_asks() -> None:
    assert tls_arguments({}, "x") == {"ssl_disabled": True}
    assert tls_arguments({"useSSL": "false"}, "x") == {"ssl_disabled": True}
    assert tls_arguments({"sslMode": "disabled"}, "x") == {"ssl_disabled": True}
    assert tls_arguments({"useSSL": "true"}, "x") == {"ssl_disabled": False}  # negotiated when the server offers it
    assert tls_arguments({"sslmode": "PREFERRED"}, "x") == {"ssl_disabled": False}
    assert tls_arguments({"sslMode": "REQUIRED"}, "x") == {"ssl": {"check_hostname": False, "verify_mode": "none"}}


def test_pymysql_still_has_what_the_recipe_relies_on() -> None:
    raw = mysql_raw()
    try:
        for attribute in ("_read_timeout", "_write_timeout", "connect_timeout", "encoders",
                          "_execute_command", "_read_ok_packet", "_sock", "set_character_set", "select_db"):
            assert hasattr(raw, attribute), attribute
    finally:
        raw.close()


def test_pymysql_is_a_core_dependency() -> None:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    dependencies = re.search(r"^dependencies = \[(.*?)^\]", text, re.S | re.M)
    assert dependencies is not None and re.search(r'"PyMySQL>=', dependencies.group(1))


def test_cross_shard_write_refusal_says_what_to_do(tmp_path: Path) -> None:
    urls = {f"ds_{i}": f"sqlite:///{tmp_path / f'ds_{i}.db'}" for i in range(2)}
    config = load_config(sharding_config(urls, tables=1))
    with Executor(config) as ex:
        ex.execute("CREATE TABLE t_order (order_id INTEGER PRIMARY KEY, user_id INTEGER NOT NULL)").close()
        source = {u: ex.router.route("SELECT 1 FROM t_order WHERE user_id = %s", (u,)).units[0].data_source
                  for u in range(1, 50)}
        a = 1
        b = next(u for u, ds in source.items() if ds != source[a])
        with ex.transaction():
            ex.execute("INSERT INTO t_order (order_id, user_id) VALUES (%s, %s)", (1, a)).close()
            with pytest.raises(CrossShardTransactionError) as info:
                ex.execute("INSERT INTO t_order (order_id, user_id) VALUES (%s, %s)", (2, b))
    message = str(info.value)
    assert "nothing was sent" in message and "autocommit=True" in message
    assert "one transaction per data source" in message and "transaction(mode='xa')" in message
    assert "planned" not in message  # the XA mode exists: the way out is real


# -- column descriptions decoded once per shape (execute/pymysql_results.py) -------------------------

TYPED_COLUMNS = (
    "i TINYINT, si SMALLINT UNSIGNED, mi MEDIUMINT, bi BIGINT UNSIGNED, b BIT(5), bo BOOLEAN, "
    "d DECIMAL(12,3), f FLOAT, db DOUBLE, dt DATE, tm TIME(3), ts TIMESTAMP(6) NULL, dtt DATETIME(2), "
    "y YEAR, c CHAR(3), vc VARCHAR(20) CHARACTER SET latin1, bn BINARY(3), vb VARBINARY(8), "
    "tx TEXT, bl BLOB, e ENUM('a','b'), st SET('x','y'), j JSON, g POINT NULL"
)
TYPED_ROW = (
    "-7, 65000, -8000000, 18446744073709551615, b'10101', TRUE, 123456789.125, 1.5, -2.25, '2026-12-01', "
    "'-12:34:56.789', '2026-12-01 10:11:12.123456', '1999-12-31 23:59:59.99', 2026, 'abc', 'caf\u00e9', "
    "'xyz', x'00ff10', 'long text \u4e2d\u6587', x'deadbeef', 'b', 'x,y', '{\"k\": [1, 2]}', ST_GeomFromText('POINT(1 2)')"
)


def test_cached_column_descriptions_match_stock_pymysql(database: str) -> None:
    stock = mysql_raw(database)
    cached = open_mysql(host="127.0.0.1", port=3306, user="root", password="", database=database, connect_timeout=5)
    assert type(cached).__name__ == "FastResultConnection"
    queries = [
        "SELECT * FROM typed",
        "SELECT i, d, tx FROM typed",
        "SELECT tx AS renamed, i + 1, CAST(j AS CHAR), COUNT(*) OVER () FROM typed",
        "SELECT * FROM typed WHERE i = -99",  # no rows, same columns
        "SELECT 1, 'one', NULL, 2.5",
    ]
    try:
        with stock.cursor() as cur:
            cur.execute(f"CREATE TABLE typed ({TYPED_COLUMNS})")
            cur.execute(f"INSERT INTO typed VALUES ({TYPED_ROW}), ({TYPED_ROW})")
        for round_ in range(3):  # the first round fills the cache, the others read from it
            for sql in queries:
                for unbuffered in (False, True):
                    pymysql = __import__("pymysql")
                    kind = pymysql.cursors.SSCursor if unbuffered else pymysql.cursors.Cursor
                    with stock.cursor(kind) as a, cached.cursor(kind) as b:
                        a.execute(sql)
                        b.execute(sql)
                        assert b.description == a.description, (round_, sql)
                        rows_a, rows_b = a.fetchall(), b.fetchall()
                        assert rows_b == rows_a, (round_, sql)
                        assert [[type(v) for v in r] for r in rows_b] == [[type(v) for v in r] for r in rows_a]
        assert len(cached.ddm_columns) == len(queries) - 1  # the empty result shares its shape
        # The encoding is part of the key: after a character-set change the columns decode afresh.
        for conn in (stock, cached):
            conn.set_character_set("latin1")
        with stock.cursor() as a, cached.cursor() as b:
            a.execute("SELECT vc, tx FROM typed")
            b.execute("SELECT vc, tx FROM typed")
            assert (b.description, b.fetchall()) == (a.description, a.fetchall())
    finally:
        stock.close()
        cached.close()
