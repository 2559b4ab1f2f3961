"""Each backend's Dialect answers its questions; the registry finds it by name, URL or driver error.

Answers about how a backend behaves (result types, literal types, error codes,
cancelling, statistics statements, index names) are checked against the backend
itself: MariaDB on 127.0.0.1:3306 (a fresh database per test), PostgreSQL on
127.0.0.1:5432 (database ``test``, tables named per test) and SQLite files.
"""

from __future__ import annotations

import importlib
import socket
import sqlite3
import threading
import time
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any, Iterator

import pytest
import sqlglot

from ddm_core import ddl
from ddm_core.dialects import (
    DIALECTS,
    INPUT,
    KINDS,
    Dialect,
    ddl_kinds,
    dialect_for,
    dialect_of_error,
    find_dialect,
    input_dialect,
    titles,
)
from ddm_core.errors import ConfigError, DataSourceUnavailableError, DuplicateKeyError, UnsupportedSQLError
from ddm_core.execute.driver_errors import map_driver_error
from ddm_core.execute.drivers import driver_for
from ddm_core.metadata.urls import parse_url
from services import require_module, require_service

MYSQL, MARIADB, POSTGRESQL, SQLITE = (dialect_for(k) for k in ("mysql", "mariadb", "postgresql", "sqlite"))
MARIADB_SERVER = {"host": "127.0.0.1", "port": 3306, "user": "root", "password": ""}
PG_DSN = "host=127.0.0.1 port=5432 dbname=test user=postgres"


# -- servers ------------------------------------------------------------------------------------


def _mariadb_connect(database: str | None = None) -> Any:
    pymysql: Any = require_module("pymysql", "the MariaDB dialect tests")
    try:
        return pymysql.connect(**MARIADB_SERVER, database=database, ssl_disabled=True, autocommit=True,
                               connect_timeout=2)
    except pymysql.MySQLError as exc:
        require_service(f"MariaDB on {MARIADB_SERVER['host']}:{MARIADB_SERVER['port']}", str(exc))


@pytest.fixture()
def mariadb() -> Iterator[Any]:
    """A connection to a fresh database ddm_test_<random>, dropped afterwards."""
    admin = _mariadb_connect()
    name = f"ddm_test_{uuid.uuid4().hex[:10]}"
    with admin.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{name}`")
    conn = _mariadb_connect(name)
    try:
        yield conn
    finally:
        conn.close()
        with admin.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        admin.close()


@pytest.fixture()
def postgres() -> Iterator[tuple[Any, str]]:
    """An autocommit connection to PostgreSQL and a table-name prefix; its tables are dropped afterwards."""
    psycopg: Any = require_module("psycopg", "the PostgreSQL dialect tests")
    try:
        conn = psycopg.connect(PG_DSN, autocommit=True, connect_timeout=2)
    except psycopg.Error as exc:
        require_service("PostgreSQL on 127.0.0.1:5432", str(exc))
    prefix = f"t_dialect_{uuid.uuid4().hex[:8]}"
    try:
        yield conn, prefix
    finally:
        for (table,) in conn.execute("SELECT tablename FROM pg_tables WHERE tablename LIKE %s", (prefix + "%",)):
            conn.execute(f'DROP TABLE "{table}"')
        conn.close()


def _closed_port() -> int:
    """A local TCP port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


# -- registry ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("mysql", "mysql"),
        ("MariaDB", "mariadb"),
        ("postgresql", "postgresql"),
        ("postgres", "postgresql"),
        ("sqlite", "sqlite"),
        ("mysql://h:3306/db", "mysql"),
        ("jdbc:mariadb://h/db", "mariadb"),
        ("JDBC:MySQL://h/db", "mysql"),
        ("postgresql+psycopg://h/db", "postgresql"),
        ("jdbc:postgres://h/db", "postgresql"),
        ("sqlite:///data/a.db", "sqlite"),
        ("sqlite::memory:", "sqlite"),
    ],
)
def test_registry_maps_names_and_url_schemes(text: str, kind: str) -> None:
    assert dialect_for(text).name == kind
    assert find_dialect(text) is dialect_for(text)


def test_registry_holds_one_instance_per_backend_and_no_shared_scheme() -> None:
    assert KINDS == ("mysql", "mariadb", "postgresql", "sqlite")
    assert [d.name for d in DIALECTS] == list(KINDS)
    assert all(isinstance(d, Dialect) and dialect_for(d.name) is d for d in DIALECTS)
    schemes = [s for d in DIALECTS for s in d.schemes]
    assert len(schemes) == len(set(schemes)), schemes


def test_every_url_scheme_parses_to_its_dialect_and_default_port() -> None:
    for d in DIALECTS:
        for scheme in d.schemes:
            url = f"{scheme}:///x.db" if d.default_port is None else f"{scheme}://h/db"
            parsed = parse_url(url)
            assert (parsed.dialect, parsed.port) == (d.name, d.default_port), url


@pytest.mark.parametrize(("text", "name"), [("oracle", "oracle"), ("oracle://h:1521/db", "oracle"),
                                            ("jdbc:db2://h/db", "db2"), ("Informix", "informix")])
def test_unknown_backend_is_a_config_error_naming_it(text: str, name: str) -> None:
    assert find_dialect(text) is None
    with pytest.raises(ConfigError) as info:
        dialect_for(text)
    assert f"unknown database backend {name!r}" in info.value.message
    assert "mysql, mariadb, postgresql, sqlite" in info.value.message
    assert info.value.context["value"] == text


def test_ddl_is_written_in_mysql_and_sqlite_only() -> None:
    assert ddl_kinds() == ("mysql", "sqlite")  # MariaDB writes MySQL's DDL
    assert ddl.DIALECTS == ddl_kinds()
    assert [d.name for d in DIALECTS if d.writes_ddl] == ["mysql", "mariadb", "sqlite"]
    with pytest.raises(UnsupportedSQLError, match="not written for PostgreSQL"):
        POSTGRESQL.ddl_statements("CREATE TABLE t_0 (a INT)")


def test_input_dialect_is_mysql() -> None:
    assert INPUT == "mysql" and input_dialect() is MYSQL
    # what the router and DDL generator read and regenerate: MySQL text
    tree = sqlglot.parse_one("SELECT `a` FROM t WHERE b = 'x' LIMIT 1, 2", read=INPUT)
    assert tree.args["offset"].expression.name == "1" and tree.args["limit"].expression.name == "2"
    assert tree.sql(INPUT) == "SELECT `a` FROM t WHERE b = 'x' LIMIT 2 OFFSET 1"


def test_mariadb_answers_as_mysql_under_its_own_name() -> None:
    assert isinstance(MARIADB, type(MYSQL)) and MARIADB is not MYSQL
    assert (MARIADB.name, MARIADB.title, MARIADB.schemes) == ("mariadb", "MariaDB", ("mariadb",))
    for question in ("sqlglot_name", "default_port", "driver_module", "paramstyle", "writes_ddl",
                     "sum_of_integers_is_decimal", "avg_scale_increment", "decimal_max_scale"):
        assert getattr(MARIADB, question) == getattr(MYSQL, question), question
    assert MARIADB.cancel_statement(7) == MYSQL.cancel_statement(7) == "KILL QUERY 7"
    assert MARIADB.analyze_statement(["a"]) == MYSQL.analyze_statement(["a"]) == "ANALYZE TABLE a"


# -- driver adapters -----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_each_dialect_has_a_driver_adapter_speaking_its_paramstyle(kind: str) -> None:
    dialect = dialect_for(kind)
    module: Any = require_module(dialect.driver_module, f"the {dialect.title} driver")
    driver = driver_for(kind)
    assert driver.dialect is dialect and driver.paramstyle == dialect.paramstyle
    # the DB-API module accepts the style: "format" SQL runs on pyformat drivers
    assert module.paramstyle in {"format": ("format", "pyformat"), "qmark": ("qmark",)}[dialect.paramstyle]
    assert all(m.lstrip("_") == dialect.driver_module for m in dialect.error_modules)


# -- SQL text ------------------------------------------------------------------------------------


def test_identifiers_are_quoted_only_when_needed() -> None:
    assert [d.identifier("t_a") for d in (MYSQL, POSTGRESQL, SQLITE)] == ["t_a"] * 3
    assert [d.identifier("t-b") for d in (MYSQL, POSTGRESQL, SQLITE)] == ["`t-b`", '"t-b"', '"t-b"']


def test_mysql_writes_the_routed_ddl_unchanged_and_keeps_index_names(mariadb: Any) -> None:
    sql = "CREATE TABLE `t_0` (id BIGINT PRIMARY KEY COMMENT 'x', a INT, KEY idx_a (a)) ENGINE=InnoDB"
    assert MYSQL.ddl_statements(sql) == [sql]
    with mariadb.cursor() as cur:
        for stmt in MYSQL.ddl_statements(sql):
            cur.execute(stmt)
        cur.execute("SELECT DISTINCT index_name FROM information_schema.statistics "
                    "WHERE table_schema = DATABASE() AND table_name = 't_0'")
        assert {r[0] for r in cur.fetchall()} == {"PRIMARY", MYSQL.index_name("t_0", "idx_a")}
    assert MYSQL.index_name("t_0", "idx_a") == "idx_a"


def test_sqlite_translates_ddl_and_prefixes_index_names(tmp_path: Path) -> None:
    sql = "CREATE TABLE `t_0` (id BIGINT PRIMARY KEY COMMENT 'x', a INT, KEY idx_a (a)) ENGINE=InnoDB"
    statements = SQLITE.ddl_statements(sql)
    assert len(statements) == 2 and "ENGINE" not in statements[0] and "COMMENT" not in statements[0]
    db = sqlite3.connect(tmp_path / "a.db")
    try:
        for stmt in statements:
            db.execute(stmt)
        indexes = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")}
    finally:
        db.close()
    assert indexes == {SQLITE.index_name("t_0", "idx_a")} == {"t_0_idx_a"}
    assert POSTGRESQL.index_name("t_0", "idx_a") == "t_0_idx_a"  # per-schema names there too


def test_analyze_statements_run_on_mariadb(mariadb: Any) -> None:
    with mariadb.cursor() as cur:
        cur.execute("CREATE TABLE t_a (a INT)")
        cur.execute("CREATE TABLE `t-b` (a INT)")
        cur.execute(MYSQL.analyze_statement(["t_a", "t-b"]))
        rows = cur.fetchall()
    assert sorted(r[0].split(".", 1)[1] for r in rows if r[2] == "status") == ["t-b", "t_a"]
    assert all(r[3] == "OK" for r in rows if r[2] == "status")


def test_analyze_statement_runs_on_sqlite(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "a.db")
    try:
        db.executescript("CREATE TABLE t_a (a INT); CREATE INDEX i ON t_a (a); INSERT INTO t_a VALUES (1), (2);")
        db.execute(SQLITE.analyze_statement(["t_a"]))
        assert db.execute("SELECT tbl, idx FROM sqlite_stat1").fetchall() == [("t_a", "i")]
    finally:
        db.close()


def test_analyze_statement_runs_on_postgresql(postgres: tuple[Any, str]) -> None:
    conn, prefix = postgres
    names = [f"{prefix}_a", f"{prefix}-b"]
    for name in names:
        conn.execute(f"CREATE TABLE {POSTGRESQL.identifier(name)} (a INT)")
        conn.execute(f"INSERT INTO {POSTGRESQL.identifier(name)} VALUES (1), (2), (3)")
    conn.execute(POSTGRESQL.analyze_statement(names))
    tuples = dict(conn.execute("SELECT relname, reltuples FROM pg_class WHERE relname = ANY(%s)", (names,)).fetchall())
    assert tuples == {name: 3 for name in names}  # -1 until analyzed


def test_number_literals_read_as_each_backend_reads_them(mariadb: Any, postgres: tuple[Any, str]) -> None:
    literals = ("123.45", "1.5e3")
    with mariadb.cursor() as cur:
        cur.execute(f"SELECT {', '.join(literals)}")
        mysql_values = cur.fetchone()
    pg_values = postgres[0].execute(f"SELECT {', '.join(literals)}").fetchone()
    db = sqlite3.connect(":memory:")
    sqlite_values = db.execute(f"SELECT {', '.join(literals)}").fetchone()
    db.close()
    for dialect, values in ((MYSQL, mysql_values), (POSTGRESQL, pg_values), (SQLITE, sqlite_values)):
        for text, value in zip(literals, values):
            assert dialect.exact_literal(text) == isinstance(value, Decimal), (dialect, text, value)


# -- result typing -------------------------------------------------------------------------------


def test_mysql_avg_and_integer_sum_types_match_mariadb(mariadb: Any) -> None:
    with mariadb.cursor() as cur:
        cur.execute("CREATE TABLE t (d DECIMAL(10, 2), i INT, s DECIMAL(30, 26))")
        cur.execute("INSERT INTO t VALUES (1.00, 1, 1), (2.00, 2, 2), (2.00, 2, 2)")
        cur.execute("SELECT AVG(d), SUM(d), AVG(i), SUM(i), AVG(s), SUM(s), COUNT(*) FROM t")
        avg_d, sum_d, avg_i, sum_i, avg_s, sum_s, count = cur.fetchone()
    assert isinstance(sum_i, Decimal) == MYSQL.sum_of_integers_is_decimal
    for average, total in ((avg_d, sum_d), (avg_i, sum_i), (avg_s, sum_s)):
        merged = MYSQL.exact_average(Decimal(total), count)
        assert merged == average and str(merged) == str(average), (total, average)
    assert len(str(avg_s).split(".")[1]) == MYSQL.decimal_max_scale  # 26 + 4


def test_sqlite_avg_and_integer_sum_types_match_sqlite() -> None:
    db = sqlite3.connect(":memory:")
    try:
        db.executescript("CREATE TABLE t (i INT); INSERT INTO t VALUES (1), (2), (2);")
        avg_i, sum_i, count = db.execute("SELECT AVG(i), SUM(i), COUNT(*) FROM t").fetchone()
    finally:
        db.close()
    assert isinstance(sum_i, int) and not SQLITE.sum_of_integers_is_decimal
    merged = SQLITE.exact_average(Decimal(sum_i), count)
    assert type(merged) is float and merged == avg_i


def test_postgresql_results_keep_mysql_typing() -> None:
    # documented in dialects/postgresql.py: PostgreSQL's numeric AVG scale is not modelled
    assert POSTGRESQL.exact_average(Decimal("5.00"), 3) == MYSQL.exact_average(Decimal("5.00"), 3) == Decimal("1.666667")
    assert POSTGRESQL.sum_of_integers_is_decimal == MYSQL.sum_of_integers_is_decimal


# -- connections ---------------------------------------------------------------------------------


def test_sqlite_memory_connections_do_not_share_data(tmp_path: Path) -> None:
    for database in (":memory:", str(tmp_path / "a.db")):
        first, second = sqlite3.connect(database), sqlite3.connect(database)
        try:
            first.execute("CREATE TABLE t (a INT)")
            first.commit()
            seen = bool(second.execute("SELECT count(*) FROM sqlite_master WHERE name = 't'").fetchone()[0])
        finally:
            first.close()
            second.close()
        assert seen == SQLITE.connections_share_data(database), database
    assert not SQLITE.connections_share_data(None)  # no database: ":memory:"
    assert MYSQL.connections_share_data("db") and POSTGRESQL.connections_share_data("db")


def test_prepare_storage_creates_the_sqlite_directory_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    database = tmp_path / "nested" / "dir" / "a.db"
    SQLITE.prepare_storage(str(database))
    sqlite3.connect(database).close()
    assert database.is_file()
    monkeypatch.chdir(tmp_path / "nested")
    for server in (MYSQL, POSTGRESQL):
        server.prepare_storage("x/y")  # a schema name, not a path
        SQLITE.prepare_storage(":memory:")
    assert sorted(p.name for p in (tmp_path / "nested").iterdir()) == ["dir"]


def test_mysql_cancel_statement_stops_a_running_query(mariadb: Any) -> None:
    pymysql: Any = importlib.import_module("pymysql")
    busy = _mariadb_connect()
    result: list[Any] = []

    def run() -> None:
        with busy.cursor() as cur:
            try:
                cur.execute("SELECT SLEEP(30)")
                result.append(cur.fetchone())
            except pymysql.err.OperationalError as exc:
                result.append(exc.args[0])

    worker = threading.Thread(target=run)
    worker.start()
    try:
        with mariadb.cursor() as cur:
            for _ in range(500):  # wait until the SLEEP is running, or KILL QUERY finds nothing to stop
                cur.execute("SELECT COUNT(*) FROM information_schema.processlist WHERE id = %s AND info LIKE 'SELECT SLEEP%%'",
                            (busy.thread_id(),))
                if cur.fetchone()[0]:
                    break
                time.sleep(0.01)
            statement = MYSQL.cancel_statement(busy.thread_id())
            assert statement is not None
            cur.execute(statement)
        worker.join(timeout=20)
        # MariaDB reports ER_QUERY_INTERRUPTED (MySQL's SLEEP returns 1 instead); either way it stopped
        assert result in ([1317], [(1,)])
    finally:
        worker.join()
        busy.close()
    assert POSTGRESQL.cancel_statement(1) is None and SQLITE.cancel_statement(1) is None  # driver API instead


# -- errors --------------------------------------------------------------------------------------


def test_sqlite_errors_are_classified(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "a.db")
    db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, u TEXT UNIQUE, n TEXT NOT NULL)")
    db.execute("INSERT INTO t VALUES (1, 'a', 'x')")
    raised: dict[str, sqlite3.Error] = {}
    for key, stmt in (("pk", "INSERT INTO t VALUES (1, 'b', 'x')"), ("unique", "INSERT INTO t VALUES (2, 'a', 'x')"),
                      ("not null", "INSERT INTO t VALUES (3, 'c', NULL)")):
        with pytest.raises(sqlite3.IntegrityError) as info:
            db.execute(stmt)
        raised[key] = info.value
    db.close()
    with pytest.raises(sqlite3.OperationalError) as cantopen:
        sqlite3.connect(tmp_path)  # a directory
    raised["cantopen"] = cantopen.value
    for key, exc in raised.items():
        code = exc.sqlite_errorname
        assert dialect_of_error(exc) is SQLITE
        assert SQLITE.is_duplicate_key(exc, code) == (key in ("pk", "unique")), key
        assert SQLITE.is_disconnect(exc, code) == (key == "cantopen"), key
        # without extended codes (older Pythons) the message still tells
        assert SQLITE.is_duplicate_key(exc, None) == (key in ("pk", "unique")), key
    assert isinstance(map_driver_error(raised["unique"], data_source="ds", endpoint="ds", sql="INSERT"), DuplicateKeyError)
    assert isinstance(map_driver_error(raised["cantopen"], data_source="ds", endpoint="ds", sql=None),
                      DataSourceUnavailableError)


def test_mysql_errors_are_classified(mariadb: Any) -> None:
    pymysql: Any = importlib.import_module("pymysql")
    raised: dict[str, Exception] = {}
    with mariadb.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, n INT NOT NULL)")
        cur.execute("INSERT INTO t VALUES (1, 1)")
        for key, stmt in (("duplicate", "INSERT INTO t VALUES (1, 2)"), ("not null", "INSERT INTO t VALUES (2, NULL)")):
            with pytest.raises(pymysql.err.IntegrityError) as info:
                cur.execute(stmt)
            raised[key] = info.value
    with pytest.raises(pymysql.err.OperationalError) as refused:
        pymysql.connect(host="127.0.0.1", port=_closed_port(), user="root", connect_timeout=2)
    raised["refused"] = refused.value
    closed = _mariadb_connect()
    closed.close()
    with pytest.raises(pymysql.err.InterfaceError) as gone:
        closed.cursor().execute("SELECT 1")
    raised["closed"] = gone.value
    for key, exc in raised.items():
        code = exc.args[0]  # PyMySQL: (errno, message)
        assert dialect_of_error(exc) is MYSQL  # MariaDB shares PyMySQL and its codes
        assert MYSQL.is_duplicate_key(exc, code) == (key == "duplicate"), key
        assert MYSQL.is_disconnect(exc, code) == (key in ("refused", "closed")), key


def test_postgresql_errors_are_classified(postgres: tuple[Any, str]) -> None:
    conn, prefix = postgres
    psycopg: Any = importlib.import_module("psycopg")
    conn.execute(f"CREATE TABLE {prefix} (id INT PRIMARY KEY, n INT NOT NULL)")
    conn.execute(f"INSERT INTO {prefix} VALUES (1, 1)")
    raised: dict[str, Exception] = {}
    for key, stmt in (("duplicate", f"INSERT INTO {prefix} VALUES (1, 2)"),
                      ("not null", f"INSERT INTO {prefix} VALUES (2, NULL)")):
        with pytest.raises(psycopg.errors.IntegrityError) as info:
            conn.execute(stmt)
        raised[key] = info.value
    with pytest.raises(psycopg.OperationalError) as refused:
        psycopg.connect(f"host=127.0.0.1 port={_closed_port()} dbname=test user=postgres", connect_timeout=2)
    raised["refused"] = refused.value
    for key, exc in raised.items():
        code = getattr(exc, "sqlstate", None)
        assert dialect_of_error(exc) is POSTGRESQL
        assert POSTGRESQL.is_duplicate_key(exc, code) == (key == "duplicate"), key
        assert POSTGRESQL.is_disconnect(exc, code) == (key == "refused"), key


def test_errors_of_other_modules_belong_to_no_dialect() -> None:
    assert dialect_of_error(ValueError("x")) is None
    assert dialect_of_error(OSError(111, "refused")) is None


# -- server features ----------------------------------------------------------------------------

#: What each feature's callers run, as one probe: a backend claims the feature iff the probe runs there.
#: ``{table}`` is a one-column table of the backend's connection.
FEATURE_PROBES: dict[str, str] = {
    "runs_mysql_sql": "SELECT NOW(6) + INTERVAL 5 MICROSECOND, UTC_TIMESTAMP(6), GREATEST(1, 2)",
    "supports_xa": "XA RECOVER",
    "reports_replication": "SHOW SLAVE STATUS",
    "has_binlog": "SELECT @@log_bin",
    "locks_rows": "SELECT x FROM {table} FOR UPDATE",
    "deletes_with_limit": "DELETE FROM {table} WHERE x < 0 LIMIT 1",
    "supports_skip_locked": "SELECT x FROM {table} FOR UPDATE SKIP LOCKED",
    "has_crc32c": "SELECT CRC32C('a')",
}
#: A feature a backend may have without claiming it: SQLite runs DELETE ... LIMIT only when built with
#: SQLITE_ENABLE_UPDATE_DELETE_LIMIT, so ddm-core does not rely on it.
BUILD_DEPENDENT = {("sqlite", "deletes_with_limit")}


def _claims(dialect: Dialect, feature: str, version: str) -> bool:
    answer = getattr(dialect, feature)
    return bool(answer(version) if callable(answer) else answer)


def _runs(execute: Any, sql: str) -> bool:
    try:
        execute(sql)
    except Exception:  # each driver's own error class: the backend refused the statement
        return False
    return True


def _check_features(dialect: Dialect, execute: Any, table: str, version: str) -> None:
    for feature, probe in FEATURE_PROBES.items():
        claimed, runs = _claims(dialect, feature, version), _runs(execute, probe.format(table=table))
        if (dialect.name, feature) in BUILD_DEPENDENT:
            assert not claimed, feature
        else:
            assert claimed == runs, f"{dialect.name} {version}: {feature} is {claimed}, {probe!r} runs: {runs}"


@pytest.mark.parametrize("kind", ["mysql", "mariadb"])
def test_mysql_family_features_are_the_servers(mariadb: Any, kind: str) -> None:
    """A mysql:// URL may reach MariaDB: both dialects answer from the server's VERSION()."""
    from ddm_core.execute.collations import _prepared_collations

    def execute(sql: str) -> None:
        with mariadb.cursor() as cur:
            cur.execute(sql)
            cur.fetchall()

    execute("CREATE TABLE t_probe (x INT PRIMARY KEY) ENGINE=InnoDB")
    with mariadb.cursor() as cur:
        cur.execute("SELECT VERSION()")
        version = str(cur.fetchone()[0])
    _check_features(dialect_for(kind), execute, "t_probe", version)
    assert dialect_for(kind).describes_prepared_columns
    assert len(_prepared_collations(mariadb, "SELECT x, 'a' FROM t_probe")) == 2


def test_sqlite_features_are_the_engines(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "a.db")
    try:
        db.execute("CREATE TABLE t_probe (x INT PRIMARY KEY)")
        _check_features(SQLITE, lambda sql: db.execute(sql).fetchall(), "t_probe", sqlite3.sqlite_version)
        assert not SQLITE.describes_prepared_columns  # no MySQL protocol to prepare on
    finally:
        db.close()


def test_postgresql_features_are_the_servers(postgres: tuple[Any, str]) -> None:
    conn, prefix = postgres
    table = f"{prefix}_probe"
    conn.execute(f"CREATE TABLE {table} (x INT PRIMARY KEY)")
    version = str(conn.execute("SELECT version()").fetchone()[0])
    _check_features(POSTGRESQL, lambda sql: conn.execute(sql).fetchall(), table, version)
    assert not POSTGRESQL.describes_prepared_columns


@pytest.mark.parametrize(
    ("version", "skip_locked", "crc32c"),
    [
        ("8.0.36", True, False),
        ("8.0.0", False, False),
        ("5.7.44-log", False, False),
        ("10.5.9-MariaDB", False, False),
        ("10.6.0-MariaDB-1:10.6.0+maria~focal", True, False),
        ("10.7.8-MariaDB", True, False),
        ("10.8.1-MariaDB-log", True, True),
        ("11.4.2-MariaDB", True, True),
        ("not a release", False, False),
        (None, False, False),
    ],
)
def test_mysql_family_features_follow_the_release(version: str | None, skip_locked: bool, crc32c: bool) -> None:
    for dialect in (MYSQL, MARIADB):
        assert dialect.supports_skip_locked(version) is skip_locked
        assert dialect.has_crc32c(version or "") is crc32c


def test_messages_name_the_backends_with_a_feature() -> None:
    assert titles(lambda d: d.supports_xa) == "MySQL or MariaDB"
    assert titles(lambda d: not d.locks_rows) == "SQLite"
    assert titles(lambda d: d.writes_ddl, "and") == "MySQL, MariaDB and SQLite"


# -- the logical SHOW TABLES: table listing, literals, byte order (route/ddl/show_tables.py) --------------

#: Names a SHOW TABLES literal may have to spell: a backslash, a quote, LIKE's wildcards.
AWKWARD_NAMES = ["t_a\\b", "o'clock", "100%_done", "plain"]


def _listing_answers_hold(conn: Any, dialect: Dialect) -> None:
    cur = conn.cursor()
    for text in AWKWARD_NAMES:
        cur.execute(f"SELECT {dialect.string_literal(text)}")
        assert cur.fetchall()[0][0] == text
    for sql in ("CREATE TABLE t_b (id INTEGER PRIMARY KEY AUTOINCREMENT)", "CREATE TABLE `B_a` (id INT)",
                "CREATE VIEW v_a AS SELECT id FROM t_b"):
        cur.execute(sql.replace(" AUTOINCREMENT", "") if dialect is not SQLITE else sql)
    name, kind, tables = dialect.listed_tables()
    cur.execute(f"SELECT {name}, {kind} {tables} ORDER BY {dialect.binary_order(name)}")
    # SQLite's own sqlite_sequence is not listed; in byte order upper case comes first.
    assert [tuple(r) for r in cur.fetchall()] == [("B_a", "BASE TABLE"), ("t_b", "BASE TABLE"), ("v_a", "VIEW")]


def test_sqlite_lists_its_tables_and_spells_literals(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "one.db", isolation_level=None)
    try:
        _listing_answers_hold(conn, SQLITE)
    finally:
        conn.close()


def test_mariadb_lists_its_tables_and_spells_literals(mariadb: Any) -> None:
    _listing_answers_hold(mariadb, MARIADB)
