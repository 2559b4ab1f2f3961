"""Results in the client's character set: through ``ddm proxy`` a client reads text as MariaDB itself sends it.

The data sources send UTF-8 (the pools read results as utf8mb4). MariaDB converts a result's text to the
session's ``character_set_results`` — set by the handshake's character set, by ``SET NAMES`` or by the
variable itself — and writes a character that set lacks as ``?``. The same rows (text in latin1, beyond it, beyond
the BMP, NULL) live in ``t_notes`` sharded over 2 data sources and in one table of a plain database;
each query is read through the proxy and straight from MariaDB by the same client with the same character
sets, and must give the same column types, column character sets, values and Python types: one-unit reads (the
front's and the relay's statements while results are UTF-8, decoded once they are not), multi-unit reads
concatenated, merged in order and aggregated; by PyMySQL (text), mysql-connector prepared (binary) and the
``mariadb`` command-line client (its output's bytes).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Iterator

import pymysql  # type: ignore[import-untyped]
import pytest
from mysql_mimic.charset import Collation

from test_proxy_support import PASSWORD, USER, Read, prepared_reader, proxy_and_reference, typed_rows

#: Notes in latin1 (é, Ø, ï, and ’ € “ …, which MariaDB's latin1 has as Windows-1252 does), beyond it (中), beyond
#: the BMP (😀), ASCII and NULL.
NOTES = ["né", "Ø", "naïve café", "中文", "x😀y", "plain", None, "é中é", "’€“…"]
DDL = "CREATE TABLE t_notes (order_id BIGINT NOT NULL PRIMARY KEY, user_id BIGINT NOT NULL, note VARCHAR(40))"
INSERT = "INSERT INTO t_notes (order_id, user_id, note) VALUES (%s, %s, %s)"
ROWS = [(order, order % 7, NOTES[order % len(NOTES)]) for order in range(1, 41)]
QUERIES = [
    "SELECT order_id, note FROM t_notes WHERE user_id = 2 AND order_id = 9",  # one unit
    "SELECT note, order_id FROM t_notes WHERE user_id = 4 AND note = 'né'",  # one unit, a latin1 literal
    "SELECT order_id, user_id, note FROM t_notes WHERE user_id IN (1, 2, 3) ORDER BY order_id",  # merged in order
    "SELECT note, order_id FROM t_notes WHERE user_id IN (4, 5) ORDER BY note, order_id",  # merged on the text
    "SELECT MAX(note), MIN(note), COUNT(*) FROM t_notes WHERE user_id IN (1, 2, 3, 4)",  # aggregated
    "SELECT note, COUNT(*) FROM t_notes WHERE user_id IN (0, 6) GROUP BY note ORDER BY note",  # grouped on the text
]
#: (the client's character set, a SET it runs first)
SESSIONS = [("latin1", None), ("latin1", "SET NAMES latin1"), ("latin1", "SET character_set_results = utf8mb4"),
            ("latin1", "SET character_set_results = NULL"), ("utf8mb4", None)]  # fmt: skip


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[int, str]]:
    """The proxy's port over the sharded ``t_notes``, and the database of the same rows in one table."""
    with proxy_and_reference(Path(tempfile.mkdtemp(prefix="ddm_charsets_")), "t_notes", DDL, INSERT, ROWS) as both:
        yield both


#: VARCHAR, VAR_STRING, STRING, BLOB (MariaDB's text results announce their numbers ``binary``, the proxy's
#: UTF-8, a difference of its own that no client reads: only text columns are compared).
_TEXT_TYPES = (15, 253, 254, 252)


def _charset_of(collation: int) -> str:
    """A collation's character set, one name for the UTF-8 ones (MariaDB and the proxy name different ones)."""
    name = Collation(collation).charset.name
    return "utf8" if name.startswith("utf8") else name


def _text(conn: Any) -> Read:
    def read(sql: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        with conn.cursor() as cur:
            cur.execute(sql)
            rows = list(cur.fetchall())
            # name, type code, and a text column's character set as its definition announces it
            return [(d[0], d[1], _charset_of(f.charsetnr) if d[1] in _TEXT_TYPES else None)
                    for d, f in zip(cur.description, cur._result.fields)], rows  # fmt: skip

    return read


def _compare(proxied: Read, direct: Read, what: str) -> None:
    for _ in range(3):  # a shape's first run (on a worker), the next (the session's hot path), the front's
        for query in QUERIES:
            want_description, want = direct(query)
            got_description, got = proxied(query)
            assert got_description == want_description, (what, query)
            assert want and typed_rows(got) == typed_rows(want), (what, query, got, want)


@pytest.mark.parametrize("autocommit", [True, False], ids=["autocommit", "in a transaction"])
@pytest.mark.parametrize(("charset", "setup"), SESSIONS)
def test_pymysql_reads_text_in_its_results_character_set(served: tuple[int, str], charset: str, setup: str | None,
                                                          autocommit: bool) -> None:  # fmt: skip
    """In autocommit and in a transaction (its reads on the connections it pinned: the front's while results are
    UTF-8, the session's decoded path once they are not)."""
    port, database = served
    ours = pymysql.connect(host="127.0.0.1", port=port, user=USER, password=PASSWORD, database="logic_db",
                           autocommit=autocommit, charset=charset)  # fmt: skip
    theirs = pymysql.connect(host="127.0.0.1", user="root", password="", database=database, autocommit=autocommit,
                             charset=charset)  # fmt: skip
    try:
        if setup is not None:
            for conn in (ours, theirs):
                with conn.cursor() as cur:
                    cur.execute(setup)
        _compare(_text(ours), _text(theirs), f"{charset}, {setup}")
        for conn in (ours, theirs):
            conn.commit()
    finally:
        ours.close()
        theirs.close()


@pytest.mark.parametrize("charset", ["latin1", "utf8mb4"])
def test_mysql_connector_prepared_reads_text_in_its_character_set(served: tuple[int, str], charset: str) -> None:
    connector = pytest.importorskip("mysql.connector")
    port, database = served
    # its pure reader: the C extension's prepared rows decode text as UTF-8 whatever the connection's set
    common = {"autocommit": True, "ssl_disabled": True, "use_pure": True, "charset": charset,
              "collation": "utf8mb4_general_ci" if charset == "utf8mb4" else "latin1_swedish_ci"}  # fmt: skip
    ours = connector.connect(host="127.0.0.1", port=port, user=USER, password=PASSWORD, database="logic_db", **common)
    theirs = connector.connect(host="127.0.0.1", port=3306, user="root", password="", database=database, **common)
    try:
        _compare(prepared_reader(ours), prepared_reader(theirs), charset)
    finally:
        ours.close()
        theirs.close()


def test_the_mariadb_client_in_latin1_prints_the_same_bytes(served: tuple[int, str]) -> None:
    cli = shutil.which("mariadb") or shutil.which("mysql")
    if cli is None:
        pytest.skip("no mariadb command-line client")
    port, database = served
    queries = ";\n".join(q for q in QUERIES if "'né'" not in q) + ";\n"  # its literal is the only non-ASCII text

    def output(port: int, user: str, password: str, database: str) -> bytes:
        done = subprocess.run(
            [cli, "--protocol=TCP", "-h", "127.0.0.1", "-P", str(port), "-u", user, f"--password={password}",
             "--default-character-set=latin1", "--batch", "--skip-ssl", database],
            input=queries.encode(), capture_output=True, timeout=60)  # fmt: skip
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        return done.stdout

    for _ in range(2):
        want = output(3306, "root", "", database)
        got = output(port, USER, PASSWORD, "logic_db")
        assert got == want
        assert "né".encode("latin1") in got and b"x?y" in got  # a latin1 byte, and a character latin1 lacks


@pytest.mark.parametrize("statement", ["SET character_set_results = klingon", "SET NAMES 'klingon'",
                                       "SET character_set_client = 'klingon'", "SET CHARACTER SET klingon"])  # fmt: skip
def test_an_unknown_character_set_is_refused_as_mariadb_refuses_it(served: tuple[int, str], statement: str) -> None:
    port, database = served
    for conn in (pymysql.connect(host="127.0.0.1", port=port, user=USER, password=PASSWORD, database="logic_db"),
                 pymysql.connect(host="127.0.0.1", user="root", password="", database=database)):  # fmt: skip
        with conn.cursor() as cur:
            with pytest.raises(pymysql.err.OperationalError) as refused:
                cur.execute(statement)
            assert refused.value.args == (1115, "Unknown character set: 'klingon'"), statement
            cur.execute("SELECT note FROM t_notes WHERE user_id = 2 AND order_id = 9")  # the session goes on
            assert cur.fetchall() == (("né",),)
        conn.close()


def test_a_latin1_clients_text_is_stored_as_mariadb_stores_it(served: tuple[int, str]) -> None:
    """A latin1 client's ``’ € “ …`` (bytes 0x92 0x80 0x93 0x85: MariaDB's latin1 is Windows-1252) written
    through the proxy is the text MariaDB stores from the same client, not the C1 controls ISO 8859-1 reads
    there; a literal and a parameter, read back in UTF-8 from both."""
    port, database = served
    text = "’€“… é"
    ours = pymysql.connect(host="127.0.0.1", port=port, user=USER, password=PASSWORD, database="logic_db",
                           autocommit=True, charset="latin1")  # fmt: skip
    theirs = pymysql.connect(host="127.0.0.1", user="root", password="", database=database, autocommit=True,
                             charset="latin1")  # fmt: skip
    try:
        for conn in (ours, theirs):
            with conn.cursor() as cur:
                cur.execute(f"INSERT INTO t_notes (order_id, user_id, note) VALUES (101, 2, '{text}')")
                cur.execute("INSERT INTO t_notes (order_id, user_id, note) VALUES (102, 2, %s)", (text,))
        for port_, user, password, db in ((port, USER, PASSWORD, "logic_db"), (3306, "root", "", database)):
            utf8 = pymysql.connect(host="127.0.0.1", port=port_, user=user, password=password, database=db,
                                   charset="utf8mb4")  # fmt: skip
            with utf8.cursor() as cur:
                cur.execute("SELECT note FROM t_notes WHERE user_id = 2 AND order_id IN (101, 102) ORDER BY order_id")
                assert cur.fetchall() == ((text,), (text,)), port_
            utf8.close()
        with ours.cursor() as cur:  # and read back by the latin1 client as it wrote it
            cur.execute("SELECT note FROM t_notes WHERE user_id = 2 AND order_id = 102")
            assert cur.fetchall() == ((text,),)
    finally:
        for conn in (ours, theirs):
            with conn.cursor() as cur:
                cur.execute("DELETE FROM t_notes WHERE user_id = 2 AND order_id IN (101, 102)")
            conn.close()
