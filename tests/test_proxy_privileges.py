"""What a proxy user may run beyond the logic database's data: privileges, and KILL (docs/proxy.md#privileges).

The classifier is checked offline, by table and by property (random case, whitespace and comments
around the words that matter, the same words inside string literals). Then real clients — PyMySQL,
mysql-connector's prepared statements, raw commands on a PyMySQL connection — talk to an
in-process ``ProxyServer`` over a private ``mariadbd`` (so a regression that forwarded
``SHUTDOWN`` or ``SET GLOBAL`` could only reach a server this module started), and every refusal
is checked on the backend too: the file not written, the user not created, the database still
there, the other application's connection still alive.
"""

from __future__ import annotations

import copy
import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services import require_module

require_module("mysql_mimic", "ddm proxy")
pymysql: Any = require_module("pymysql", "the proxy's client tests")

from ddm_core import load_config  # noqa: E402
from ddm_core.errors import ConfigValidationError, ProxyAccessDeniedError, UnsupportedSQLError  # noqa: E402
from ddm_core.metadata.dump import to_native  # noqa: E402
from ddm_core.metadata.model import PROXY_PRIVILEGES  # noqa: E402
from ddm_core.proxy import native_password_hash  # noqa: E402
from ddm_core.proxy.kill import KillRequest, read_kill  # noqa: E402
from ddm_core.proxy.mysql_errors import error_info  # noqa: E402
from ddm_core.proxy.privileges import PLAIN, AccessControl, Privilege, required  # noqa: E402
from test_execute_support import PrivateMariaDB, running_mariadb  # noqa: E402
from test_proxy_support import PASSWORD, USER, InProcessProxy, create_tables, proxy_config  # noqa: E402

SCHEMA = "logic_db"
OTHER, FILER, BOSS = "other", "filer", "boss"  # no privileges; allow: [file]; allow: [admin]
OTHER_PASSWORD, FILER_PASSWORD, BOSS_PASSWORD = "0ther-Pw", "f1ler-Pw", "b0ss-Pw"


def needs(sql: str) -> set[tuple[str, str, str]]:
    """(privilege, scope, target) of each demand of ``sql``."""
    return {(d.privilege.value, d.scope, d.target) for d in required(sql, SCHEMA, formatted=False).demands}


# -- the classifier, offline -----------------------------------------------------------------------


@pytest.mark.parametrize(("sql", "expected"), [
    ("SELECT LOAD_FILE('/etc/hostname')", {("file", "operation", "LOAD_FILE()")}),
    ("SELECT 1 /*!, LOAD_FILE('/etc/hostname') */", {("file", "operation", "LOAD_FILE()")}),
    ("SELECT 1 /*!50000 , load_file('/etc/hostname') */", {("file", "operation", "LOAD_FILE()")}),
    ("SELECT `load_file` ('x')", {("file", "operation", "LOAD_FILE()")}),
    ("SELECT * FROM t_order INTO OUTFILE '/tmp/x'", {("file", "operation", "INTO OUTFILE")}),
    ("SELECT a INTO DUMPFILE '/tmp/x' FROM t_order", {("file", "operation", "INTO DUMPFILE")}),
    ("LOAD DATA LOCAL INFILE '/etc/passwd' INTO TABLE t_config", {("file", "operation", "LOAD DATA")}),
    ("LOAD XML INFILE 'x.xml' INTO TABLE t_config", {("file", "operation", "LOAD XML")}),
    ("INSERT INTO t_config (name) SELECT LOAD_FILE('/etc/hostname')", {("file", "operation", "LOAD_FILE()")}),
    ("CREATE TABLE t_x (id INT) DATA DIRECTORY = '/etc'", {("file", "operation", "DATA DIRECTORY")}),
    ("CREATE TABLE t_x (id INT) ENGINE=CONNECT TABLE_TYPE=CSV FILE_NAME='/etc/passwd'",
     {("admin", "operation", "ENGINE=CONNECT")}),
    ("SHOW PROCESSLIST", {("process", "operation", "SHOW PROCESSLIST")}),
    ("show full processlist", {("process", "operation", "SHOW PROCESSLIST")}),
    ("SHOW ENGINE INNODB STATUS", {("process", "operation", "SHOW ENGINE INNODB")}),
    ("SELECT * FROM information_schema.processlist", {("process", "operation", "information_schema.PROCESSLIST")}),
    ("EXPLAIN FOR CONNECTION 5", {("process", "operation", "EXPLAIN FOR CONNECTION")}),
    ("SELECT * FROM information_schema.USER_PRIVILEGES",
     {("admin", "operation", "information_schema.USER_PRIVILEGES")}),
    ("SHOW GRANTS", {("admin", "operation", "SHOW GRANTS")}),
    ("SHOW MASTER STATUS", {("admin", "operation", "SHOW MASTER STATUS")}),
    ("CREATE USER u IDENTIFIED BY 'x'", {("admin", "operation", "CREATE USER")}),
    ("GRANT ALL ON *.* TO u", {("admin", "operation", "GRANT ALL")}),
    ("REVOKE ALL ON *.* FROM u", {("admin", "operation", "REVOKE ALL")}),
    ("SHUTDOWN", {("admin", "operation", "SHUTDOWN")}),
    ("FLUSH PRIVILEGES", {("admin", "operation", "FLUSH PRIVILEGES")}),
    ("CALL p()", {("admin", "operation", "CALL p")}),
    ("HANDLER t_config OPEN", {("admin", "operation", "HANDLER t_config")}),
    ("DO SLEEP(1)", {("admin", "operation", "DO SLEEP")}),
    ("XA START 'x'", {("admin", "operation", "XA START")}),
    ("LOCK TABLES t_config READ", {("admin", "operation", "LOCK TABLES")}),
    ("PREPARE s FROM 'SELECT LOAD_FILE(1)'", {("admin", "operation", "PREPARE s")}),
    ("CREATE VIEW v AS SELECT 1", {("admin", "operation", "CREATE VIEW")}),
    ("START SLAVE", {("admin", "operation", "START SLAVE")}),
    ("ANALYZE TABLE t_config", {("admin", "operation", "ANALYZE TABLE")}),
    ("SELECT 1; SHUTDOWN", {("admin", "operation", "SHUTDOWN")}),
    ("/*M!100100 SHUTDOWN */", {("admin", "operation", "SHUTDOWN")}),
    ("CREATE DATABASE x", {("admin", "database", "x")}),
    ("DROP DATABASE IF EXISTS `x`", {("admin", "database", "x")}),
    ("CREATE SCHEMA logic_db", {("admin", "database", "logic_db")}),
    ("SELECT * FROM mysql.user", {("schemas", "table", "mysql.user")}),
    ("SELECT * FROM `mysql` . `user` u WHERE u.User = 'root'", {("schemas", "table", "mysql.user")}),
    ("SELECT * FROM t_order o JOIN other_db.t x ON o.user_id = x.id", {("schemas", "table", "other_db.t")}),
    ("(SELECT 1) UNION (SELECT * FROM performance_schema.threads)",
     {("schemas", "table", "performance_schema.threads")}),
    ("INSERT INTO other_db.t (a) VALUES (1)", {("schemas", "table", "other_db.t")}),
    ("REPLACE INTO mysql.user SELECT * FROM t_config", {("schemas", "table", "mysql.user")}),
    ("UPDATE t_config c, mysql.user u SET c.name = u.User", {("schemas", "table", "mysql.user")}),
    ("DROP TABLE mysql.user", {("schemas", "table", "mysql.user")}),
    ("RENAME TABLE t_config TO mysql.t", {("schemas", "table", "mysql.t")}),
    ("SHOW TABLES FROM other_db", {("schemas", "database", "other_db")}),
    ("SHOW COLUMNS FROM t FROM other_db", {("schemas", "table", "other_db.t")}),
    ("SHOW CREATE TABLE mysql.user", {("schemas", "table", "mysql.user")}),
    ("DESC mysql.user", {("schemas", "table", "mysql.user")}),
    ("EXPLAIN SELECT * FROM mysql.user", {("schemas", "table", "mysql.user")}),
    ("SELECT sys.format_bytes(1)", {("schemas", "routine", "sys.format_bytes")}),
    ("SHOW DATABASES LIKE 'ddm%'", {("schemas", "operation", "SHOW DATABASES LIKE")}),
])  # fmt: skip
def test_statements_that_need_a_privilege(sql: str, expected: set[tuple[str, str, str]]) -> None:
    assert needs(sql) == expected


@pytest.mark.parametrize("sql", [
    "SELECT * FROM t_order WHERE order_id = %s",
    "SELECT o.amount FROM t_order o JOIN t_dict d ON o.user_id = d.id WHERE o.order_id = 1",
    "SELECT * FROM logic_db.t_order WHERE user_id = 1",
    "SELECT 'load_file(''/etc/hostname'')', \"INTO OUTFILE '/tmp/x'\" FROM t_config",
    "SELECT * FROM t_config WHERE name = 'mysql.user' -- LOAD_FILE('/etc/hostname')",
    "SELECT * FROM t_config /* SHUTDOWN; LOAD_FILE('x') */ WHERE id = 1",
    "SELECT `mysql.user` FROM t_config",
    "INSERT INTO t_config (name) VALUES ('SHOW PROCESSLIST; SHUTDOWN')",
    "REPLACE INTO t_config (id, name) VALUES (1, 'x')",
    "UPDATE t_order SET amount = amount + 1 WHERE order_id = 1",
    "DELETE FROM t_order WHERE order_id = 1",
    "WITH x AS (SELECT * FROM t_config) SELECT * FROM x",
    "CREATE TABLE t_new (id INT PRIMARY KEY)",
    "CREATE OR REPLACE TEMPORARY TABLE t_tmp (id INT)",
    "ALTER TABLE t_small ADD COLUMN extra INT",
    "CREATE UNIQUE INDEX i ON t_config (name)",
    "DROP TABLE IF EXISTS t_new",
    "TRUNCATE TABLE t_config",
    "RENAME TABLE t_a TO t_b",
    "SHOW TABLES", "SHOW FULL TABLES FROM `logic_db`", "SHOW CREATE TABLE t_order", "SHOW COLUMNS FROM t_order",
    "SHOW INDEX FROM t_order", "SHOW COLLATION", "SHOW CHARACTER SET", "DESC t_order", "DESCRIBE t_order",
    "EXPLAIN SELECT * FROM t_order WHERE order_id = 1",
    "SELECT table_name FROM information_schema.TABLES WHERE table_schema = DATABASE()",
    "SELECT column_name FROM information_schema.columns c WHERE c.table_name = 't_order'",
    "SAVEPOINT a", "RELEASE SAVEPOINT a", "ROLLBACK TO SAVEPOINT a",
    "SELECT 1 + 1",
])  # fmt: skip
def test_plain_statements_need_nothing(sql: str) -> None:
    assert required(sql, SCHEMA, formatted="%s" in sql) is PLAIN


@pytest.mark.parametrize(("sql", "word"), [
    ("/*!40101 SET GLOBAL max_connections = 1 */", "SET"), ("/*! KILL 5 */", "KILL"), ("/*!USE mysql */", "USE"),
])  # fmt: skip
def test_the_proxys_own_statements_are_never_forwarded_hidden_in_a_comment(sql: str, word: str) -> None:
    found = required(sql, SCHEMA, formatted=False)
    assert found.forbidden == word
    access = AccessControl(SCHEMA)
    access.take(load_config(_offline_config()).proxy.users)
    with pytest.raises(UnsupportedSQLError, match="never forwarded"):
        access.check(found, BOSS, "127.0.0.1", sql)  # not even for a user allowed admin


# Random spellings of the words that matter: case, whitespace and comments between the tokens.
_GAP = st.lists(st.sampled_from([" ", "\n", "\t", "  ", "/* x */", "/**/", "-- c\n", "# c\n"]), min_size=1,
                max_size=3).map("".join)  # fmt: skip
_TIGHT_GAP = st.one_of(st.just(""), _GAP)


def _spaces(gap: str) -> str:
    """``gap`` without comments: the router refuses a comment inside an executable comment (route/text/placeholders.py)."""
    return "".join(c for c in gap if c in " \t\n") or " "


def _any_case(word: str) -> st.SearchStrategy[str]:
    return st.lists(st.booleans(), min_size=len(word), max_size=len(word)).map(
        lambda upper: "".join(c.upper() if u else c.lower() for c, u in zip(word, upper)))


@settings(max_examples=150, deadline=None)
@given(lead=_TIGHT_GAP, gap=_GAP, tight=_TIGHT_GAP, fn=_any_case("load_file"), sel=_any_case("select"),
       executable=st.booleans())  # fmt: skip
def test_load_file_is_found_however_it_is_spelt(lead: str, gap: str, tight: str, fn: str, sel: str,
                                                executable: bool) -> None:  # fmt: skip
    if executable:
        tight = _spaces(tight)
    call = f"{fn}{tight}('/etc/hostname')"
    sql = f"{lead}{sel}{gap}{'/*! ' + call + ' */' if executable else call}"
    assert ("file", "operation", "LOAD_FILE()") in needs(sql)
    # the same words in a string literal are data, not code
    quoted = call.replace("'", "''")
    assert required(f"{lead}{sel}{gap}'{quoted}' FROM t_config", SCHEMA, formatted=False) is PLAIN


@settings(max_examples=150, deadline=None)
@given(lead=_TIGHT_GAP, gap=_GAP, words=st.sampled_from([
    ("shutdown",), ("into", "outfile"), ("show", "processlist"), ("create", "user"), ("kill", "query"),
]), cases=st.data())  # fmt: skip
def test_danger_words_in_any_case_and_spacing(lead: str, gap: str, words: tuple[str, ...], cases: Any) -> None:
    spelt = gap.join(cases.draw(_any_case(w)) for w in words)
    if words == ("into", "outfile"):
        sql = f"{lead}SELECT * FROM t_config{gap}{spelt}{gap}'/tmp/x'"
        assert ("file", "operation", "INTO OUTFILE") in needs(sql)
    elif words == ("kill", "query"):
        hidden = _spaces(gap).join(cases.draw(_any_case(w)) for w in words)
        assert required(f"{lead}/*!{_spaces(gap)}{hidden} 5 */", SCHEMA, formatted=False).forbidden == "KILL"
    else:
        assert needs(f"{lead}{spelt}"), spelt
    assert required(f"{lead}SELECT '{spelt}'{gap}FROM t_config", SCHEMA, formatted=False) is PLAIN


@settings(max_examples=100, deadline=None)
@given(text=st.text(st.sampled_from("abc LOAD_FILE()SHUTDOWN;mysql.user/*!*/#-'\\\"\n"), max_size=60))
def test_nothing_inside_a_string_literal_needs_a_privilege(text: str) -> None:
    literal = "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"
    assert required(f"SELECT * FROM t_config WHERE name = {literal}", SCHEMA, formatted=False) is PLAIN


def test_long_and_unclosed_texts_are_read_in_one_pass() -> None:
    # Each would take minutes were a pattern retried from every position of a run (quadratic).
    assert needs(" " * 48_000 + "SHUTDOWN") == {("admin", "operation", "SHUTDOWN")}
    assert needs("SELECT " + "a" * 48_000 + " FROM mysql.user") == {("schemas", "table", "mysql.user")}
    assert needs("SELECT " + "a" * 48_000 + " " * 48_000 + ". b") == set()  # a column of a table: no database
    assert required("SELECT 1 " + "/*" * 24_000, SCHEMA, formatted=False) is PLAIN  # a comment to the end
    assert needs("SELECT 1 /*! " + "/*" * 24_000) == set()  # refused by the router, read to the end here


def test_kill_forms() -> None:
    assert read_kill("5", "KILL 5") == KillRequest(5, False)
    assert read_kill("CONNECTION 5", "KILL CONNECTION 5") == KillRequest(5, False)
    assert read_kill("query  17", "KILL query 17") == KillRequest(17, True)
    assert read_kill("HARD QUERY 17", "KILL HARD QUERY 17") == KillRequest(17, True)
    assert read_kill("CONNECTION_ID()", "KILL CONNECTION_ID()") == KillRequest(None, False)
    for rest in ("USER app", "QUERY ID 5", "5 + 1", ""):
        with pytest.raises(UnsupportedSQLError, match="KILL"):
            read_kill(rest, f"KILL {rest}")


def test_refusals_carry_mysqls_codes() -> None:
    access = AccessControl(SCHEMA)
    access.take(load_config(_offline_config()).proxy.users)
    cases = {
        "SELECT LOAD_FILE('/etc/hostname')": (1227, "FILE privilege"),
        "SELECT * FROM mysql.user": (1142, "SELECT command denied to user 'app'@'10.0.0.9' for table 'mysql.user'"),
        "DROP DATABASE x": (1044, "Access denied for user 'app'@'10.0.0.9' to database 'x'"),
        "SELECT sys.format_bytes(1)": (1370, "routine 'sys.format_bytes'"),
    }
    for sql, (code, words) in cases.items():
        with pytest.raises(ProxyAccessDeniedError) as info:
            access.check(required(sql, SCHEMA, formatted=False), USER, "10.0.0.9", sql)
        mapped = error_info(info.value)
        assert mapped.code == code and words in mapped.message, mapped
        assert "proxy.users[].allow: [" in mapped.message and sql[:20] in mapped.message
    access.check(required("SELECT LOAD_FILE('/etc/hostname')", SCHEMA, formatted=False), FILER, "h", "x")
    assert access.allows(BOSS, Privilege.ADMIN) and not access.allows(USER, Privilege.ADMIN)


# -- configuration ---------------------------------------------------------------------------------


def _offline_config(**proxy: Any) -> dict[str, Any]:
    config = proxy_config(["db_0", "db_1"], **proxy)
    config["proxy"]["users"] += [
        {"name": OTHER, "passwordHash": native_password_hash(OTHER_PASSWORD)},
        {"name": FILER, "passwordHash": native_password_hash(FILER_PASSWORD), "allow": ["file"]},
        {"name": BOSS, "passwordHash": native_password_hash(BOSS_PASSWORD), "allow": ["ADMIN", "process", "admin"]},
    ]
    return config


def test_allow_is_read_validated_and_dumped() -> None:
    assert tuple(p.value for p in Privilege) == PROXY_PRIVILEGES  # the loader's list is the proxy's
    loaded = load_config(_offline_config())
    by_name = {u.name: u for u in loaded.proxy.users}
    assert by_name[USER].allow == () and by_name[FILER].allow == ("file",)
    assert by_name[BOSS].allow == ("admin", "process")  # case folded, duplicates dropped, sorted
    assert load_config(to_native(loaded, secrets="keep")).proxy.users == loaded.proxy.users  # a dump round-trips
    bad = _offline_config()
    bad["proxy"]["users"][0]["allow"] = ["file", "superuser"]
    with pytest.raises(ConfigValidationError) as info:
        load_config(bad)
    assert "proxy.users[0].allow" in str(info.value)
    assert "file, process, admin, schemas" in str(info.value) and "superuser" in str(info.value)


# -- real clients against a proxy over a private mariadbd --------------------------------------------


class Served(InProcessProxy):
    """An in-process ProxyServer on its own event loop thread, over ``backend``."""

    def __init__(self, config: dict[str, Any], backend: PrivateMariaDB, other_db: str, audit: Path) -> None:
        self.config, self.backend, self.other_db, self.audit = config, backend, other_db, audit
        super().__init__(load_config(config))

    def take(self, config: dict[str, Any]) -> None:
        """A reload of the proxy section, as the configuration holder hands it over (on the loop)."""
        async def take() -> bool:
            return bool(self.server.take(load_config(config)))

        assert self.call(take())

    def connect(self, user: str = USER, password: str = PASSWORD, **extra: Any) -> Any:
        return pymysql.connect(host="127.0.0.1", port=self.port, user=user, password=password, database=SCHEMA,
                               connect_timeout=10, ssl_disabled=True, autocommit=True, **extra)  # fmt: skip



@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    base = tmp_path_factory.mktemp("privileges-mariadbd")
    with running_mariadb(base, ("--skip-log-bin", "--secure-file-priv=")) as backend:
        databases = [backend.create_database(f"ddm_priv_{i}_") for i in range(2)]
        other_db = backend.create_database("other_app_")  # another application's data on the same server
        raw = backend.raw(other_db)
        with raw.cursor() as cur:
            cur.execute("CREATE TABLE secrets (id INT PRIMARY KEY, secret VARCHAR(40))")
            cur.execute("INSERT INTO secrets VALUES (1, 'the other application''s')")
        raw.close()
        audit = base / "audit.jsonl"
        config = _offline_config(auditLog=str(audit), auditAll=True)
        for source, database in zip(config["dataSources"].values(), databases):
            source["url"] = f"mysql://127.0.0.1:{backend.port}/{database}"
        create_tables(config)
        served = Served(config, backend, other_db, audit)
        try:
            yield served
        finally:
            served.close()


def _refused(conn: Any, sql: str, code: int, *words: str) -> str:
    with conn.cursor() as cur, pytest.raises(pymysql.err.MySQLError) as info:
        cur.execute(sql)
    assert info.value.args[0] == code, info.value.args
    message = str(info.value.args[1])
    for word in words:
        assert word in message, message
    return message


def _backend(served: Served, sql: str, database: str | None = None) -> list[tuple[Any, ...]]:
    conn = served.backend.raw(database)
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            return list(cur.fetchall())
    finally:
        conn.close()


def test_file_functions_and_statements_are_refused(served: Served, tmp_path: Path) -> None:
    conn = served.connect(local_infile=True)
    _refused(conn, "SELECT LOAD_FILE('/etc/hostname')", 1227, "FILE privilege", "proxy.users[].allow: [file]")
    _refused(conn, "SELECT 1 /*!, LOAD_FILE('/etc/hostname') */", 1227, "FILE privilege")
    _refused(conn, "SELECT LOAD_FILE('/etc/hostname') FROM t_config WHERE id = 1", 1227, "LOAD_FILE()")
    outfile = tmp_path / f"out_{uuid.uuid4().hex[:6]}.txt"
    _refused(conn, f"SELECT * FROM t_config INTO OUTFILE '{outfile}'", 1227, "INTO OUTFILE")
    assert not outfile.exists()
    source = tmp_path / "rows.txt"
    source.write_text("1\tsmuggled\n")
    _refused(conn, f"LOAD DATA LOCAL INFILE '{source}' INTO TABLE t_config", 1227, "LOAD DATA")
    _refused(conn, f"LOAD DATA INFILE '{source}' INTO TABLE t_config", 1227, "LOAD DATA")
    assert _backend(served, "SELECT COUNT(*) FROM t_config", _database(served, "ds_0")) == [(0,)]
    conn.close()


def test_a_user_allowed_file_reads_a_file(served: Served) -> None:
    conn = served.connect(FILER, FILER_PASSWORD)
    with conn.cursor() as cur:
        cur.execute("SELECT LOAD_FILE('/etc/hostname')")
        assert cur.fetchone()[0] == Path("/etc/hostname").read_bytes()
    _refused(conn, "SHOW PROCESSLIST", 1227, "PROCESS privilege", f"proxy user {FILER!r}")
    conn.close()


def test_data_statements_and_strings_that_look_dangerous_still_work(served: Served) -> None:
    conn = served.connect()
    name = "load_file('/x') INTO OUTFILE; SHUTDOWN"  # t_config.name is a VARCHAR(40)
    with conn.cursor() as cur:
        cur.execute("INSERT INTO t_order (order_id, user_id, amount) VALUES (1, 10, 5)")
        cur.execute("SELECT amount FROM t_order WHERE user_id = 10 AND order_id = 1")
        assert cur.fetchall() == ((5,),)
        cur.execute("INSERT INTO t_config (name) VALUES (%s)", (name,))
        cur.execute("SELECT name, 'LOAD_FILE(''/etc/hostname'')' FROM t_config WHERE name = %s", (name,))
        assert cur.fetchall() == ((name, "LOAD_FILE('/etc/hostname')"),)
        cur.execute("SELECT table_name FROM information_schema.TABLES WHERE table_schema = DATABASE() "
                    "AND table_name = 't_config'")  # fmt: skip
        assert cur.fetchall() == (("t_config",),)  # the metadata drivers read stays open
        cur.execute("SHOW TABLES")
        assert "t_order" in [r[0] for r in cur.fetchall()]
        cur.execute("DESC t_config")
        assert [r[0] for r in cur.fetchall()] == ["id", "name"]
        cur.execute("DELETE FROM t_config WHERE name = %s", (name,))
        cur.execute("DELETE FROM t_order WHERE user_id = 10 AND order_id = 1")
    conn.close()


def test_process_and_admin_statements_are_refused_and_reach_no_data_source(served: Served) -> None:
    conn = served.connect()
    before = _backend(served, "SELECT @@GLOBAL.max_connections")
    _refused(conn, "SHOW PROCESSLIST", 1227, "PROCESS privilege")
    _refused(conn, "SELECT * FROM information_schema.PROCESSLIST", 1227, "PROCESS privilege")
    _refused(conn, "SHOW GRANTS", 1227, "ADMIN privilege")
    _refused(conn, "CREATE USER intruder IDENTIFIED BY 'x'", 1227, "ADMIN privilege", "CREATE USER")
    _refused(conn, "GRANT ALL ON *.* TO intruder", 1227, "ADMIN privilege")
    _refused(conn, "SHUTDOWN", 1227, "ADMIN privilege")
    _refused(conn, "FLUSH PRIVILEGES", 1227, "ADMIN privilege")
    _refused(conn, "HANDLER t_config OPEN", 1227, "ADMIN privilege")
    _refused(conn, "LOCK TABLES t_config WRITE", 1227, "ADMIN privilege")
    _refused(conn, "/*!40101 SET GLOBAL max_connections = 7 */", 1235, "not forwarded")  # a SET, as the server reads it
    _refused(conn, "SET GLOBAL max_connections = 7", 1235, "not forwarded")
    _refused(conn, "SET @@global.max_connections = 7", 1235, "not forwarded")
    assert _backend(served, "SELECT @@GLOBAL.max_connections") == before
    assert _backend(served, "SELECT COUNT(*) FROM mysql.user WHERE User = 'intruder'") == [(0,)]
    assert _backend(served, "SELECT 1") == [(1,)]  # SHUTDOWN never reached it
    with conn.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM t_config")  # the session goes on after each refusal
        assert cur.fetchone() == (0,)
    conn.close()
    boss = served.connect(BOSS, BOSS_PASSWORD)
    with boss.cursor() as cur:
        cur.execute("SHOW PROCESSLIST")  # allow: [process, admin]: the data source's own list
        assert cur.fetchall()
    boss.close()


def test_databases_and_other_schemas_are_refused(served: Served) -> None:
    conn = served.connect()
    created = f"intruder_{uuid.uuid4().hex[:6]}"
    _refused(conn, f"CREATE DATABASE {created}", 1044, f"to database '{created}'")
    _refused(conn, f"DROP DATABASE {served.other_db}", 1044, f"to database '{served.other_db}'")
    _refused(conn, "SELECT * FROM mysql.user", 1142, "SELECT command denied", "'mysql.user'")
    _refused(conn, f"SELECT * FROM {served.other_db}.secrets", 1142, f"'{served.other_db}.secrets'",
             "proxy.users[].allow: [schemas]")  # fmt: skip
    physical = _database(served, "ds_1")
    _refused(conn, f"DELETE FROM {physical}.t_config", 1142, "DELETE command denied")
    databases = {r[0] for r in _backend(served, "SHOW DATABASES")}
    assert created not in databases and served.other_db in databases
    assert _backend(served, "SELECT secret FROM secrets", served.other_db) == [("the other application's",)]
    conn.close()


def test_refusals_are_audited_without_physical_statements(served: Served) -> None:
    conn = served.connect()
    marker = uuid.uuid4().hex[:8]
    _refused(conn, f"SELECT LOAD_FILE('/etc/{marker}')", 1227)
    conn.close()
    records = [json.loads(line) for line in served.audit.read_text().splitlines() if marker in line]
    assert len(records) == 1 and records[0]["physical"] == [] and "FILE privilege" in records[0]["error"]
    assert records[0]["user"] == USER


def test_prepared_statements_are_refused_at_prepare_and_at_execute(served: Served) -> None:
    mysql_connector: Any = require_module("mysql.connector", "prepared statements against the proxy")
    conn = mysql_connector.connect(host="127.0.0.1", port=served.port, user=USER, password=PASSWORD,
                                   database=SCHEMA, ssl_disabled=True)  # fmt: skip
    cur = conn.cursor(prepared=True)
    with pytest.raises(mysql_connector.Error) as info:
        cur.execute("SELECT LOAD_FILE(%s)", ("/etc/hostname",))
    assert info.value.errno == 1227
    cur.execute("SELECT name FROM t_config WHERE id = %s", (1,))
    assert cur.fetchall() == []
    conn.close()
    # COM_STMT_PREPARE by hand: the answer is an error packet, so no statement id is handed out
    raw = served.connect()
    raw._execute_command(0x16, "SELECT * FROM mysql.user WHERE User = ?")  # COM_STMT_PREPARE
    with pytest.raises(pymysql.err.MySQLError) as refused:
        raw._read_packet()
    assert refused.value.args[0] == 1142
    with raw.cursor() as cur:
        cur.execute("SELECT 1")  # the connection is in step after the refusal
        assert cur.fetchone() == (1,)
    raw.close()
    # Prepared while allowed; the allow list shrinks (a reload); the next execute is refused
    conn = mysql_connector.connect(host="127.0.0.1", port=served.port, user=FILER, password=FILER_PASSWORD,
                                   database=SCHEMA, ssl_disabled=True)  # fmt: skip
    cur = conn.cursor(prepared=True)
    cur.execute("SELECT LOAD_FILE(%s)", ("/etc/hostname",))
    assert cur.fetchall() == [(Path("/etc/hostname").read_bytes(),)]
    shrunk = copy.deepcopy(served.config)
    shrunk["proxy"]["users"][2]["allow"] = []
    served.take(shrunk)
    try:
        with pytest.raises(mysql_connector.Error) as info:
            cur.execute("SELECT LOAD_FILE(%s)", ("/etc/hostname",))
        assert info.value.errno == 1227
    finally:
        served.take(served.config)
        conn.close()


def test_a_statement_shape_is_read_once(served: Served) -> None:
    access = served.server.runtime.access
    conn, filer = served.connect(), served.connect(FILER, FILER_PASSWORD)
    with conn.cursor() as cur, filer.cursor() as fcur:
        before = access.read
        for key in (101, 102, 103):  # one shape: the literal becomes a parameter
            cur.execute(f"SELECT name FROM t_config WHERE id = {key}")
        fcur.execute("SELECT LOAD_FILE('/etc/hostname') FROM t_config WHERE id = 1")
        fcur.execute("SELECT LOAD_FILE('/etc/hostname') FROM t_config WHERE id = 2")
        assert access.read - before == 2
        # the shape's answer is per text, its check per user: the same text is refused to app
        _refused(conn, "SELECT LOAD_FILE('/etc/hostname') FROM t_config WHERE id = 3", 1227)
        assert access.read - before == 2
    conn.close()
    filer.close()


# -- KILL -------------------------------------------------------------------------------------------


def _database(served: Served, source: str) -> str:
    return str(served.config["dataSources"][source]["url"].rsplit("/", 1)[-1])


def _session_id(conn: Any) -> int:
    with conn.cursor() as cur:
        cur.execute("SELECT CONNECTION_ID()")
        return int(cur.fetchone()[0])


def test_kill_never_reaches_a_data_sources_connection(served: Served) -> None:
    bystander = served.backend.raw()  # another application's connection to the same server
    thread_id = bystander.thread_id()
    conn = served.connect()
    _refused(conn, f"KILL {thread_id}", 1094, f"Unknown thread id: {thread_id}")
    _refused(conn, f"KILL QUERY {thread_id}", 1094)
    _refused(conn, f"/*! KILL {thread_id} */", 1094, f"Unknown thread id: {thread_id}")  # a KILL, as the server reads it
    with bystander.cursor() as cur:
        cur.execute("SELECT 1")
        assert cur.fetchone() == (1,)
    bystander.close()
    conn.close()


def test_kill_of_another_users_session_is_denied_and_of_ones_own_works(served: Served) -> None:
    theirs = served.connect(OTHER, OTHER_PASSWORD)
    mine, killer = served.connect(), served.connect()
    _refused(killer, f"KILL {_session_id(theirs)}", 1095, f"You are not owner of thread {_session_id(theirs)}",
             "proxy.users[].allow: [admin]")  # fmt: skip
    with theirs.cursor() as cur:
        cur.execute("SELECT 1")
    mine_id = _session_id(mine)
    with killer.cursor() as cur:
        cur.execute(f"KILL {mine_id}")
    with pytest.raises(pymysql.err.MySQLError), mine.cursor() as cur:
        cur.execute("SELECT 1")
    deadline = time.monotonic() + 10  # a bound on the wait, not a measurement
    while mine_id in served.server.runtime.sessions and time.monotonic() < deadline:
        time.sleep(0.02)
    assert mine_id not in served.server.runtime.sessions
    boss = served.connect(BOSS, BOSS_PASSWORD)  # allow: [admin]: any session
    with boss.cursor() as cur:
        cur.execute(f"KILL CONNECTION {_session_id(theirs)}")
    with pytest.raises(pymysql.err.MySQLError), theirs.cursor() as cur:
        cur.execute("SELECT 1")
    for conn in (killer, boss):
        conn.close()


def test_kill_query_interrupts_the_running_statement(served: Served) -> None:
    victim, killer = served.connect(), served.connect()
    victim_id = _session_id(victim)
    outcome: list[BaseException | tuple[Any, ...]] = []

    def run() -> None:
        try:
            with victim.cursor() as cur:
                cur.execute("SELECT SLEEP(2)")
                outcome.append(cur.fetchall())
        except BaseException as exc:  # noqa: B036  # handed to the test's thread
            outcome.append(exc)

    running = threading.Thread(target=run)
    running.start()
    deadline = time.monotonic() + 20  # a bound on the wait, not a measurement
    sleeping = "SELECT 1 FROM information_schema.PROCESSLIST WHERE INFO LIKE '%SLEEP(2)%' AND ID <> CONNECTION_ID()"
    while time.monotonic() < deadline and not _backend(served, sleeping):  # it runs on the data source
        time.sleep(0.02)
    with killer.cursor() as cur:
        cur.execute(f"KILL QUERY {victim_id}")
    running.join(30)
    assert len(outcome) == 1 and isinstance(outcome[0], pymysql.err.MySQLError), outcome
    assert outcome[0].args[0] == 1317
    with victim.cursor() as cur:  # KILL QUERY ends the statement, not the session
        cur.execute("SELECT COUNT(*) FROM t_config")
        assert cur.fetchone() == (0,)
        cur.execute(f"KILL QUERY {victim_id}")  # its own, between statements: nothing to end
        cur.execute("SELECT 1")
        assert cur.fetchone() == (1,)
    victim.close()
    killer.close()
