"""Ordered multi-unit reads merged from their answers' bytes (docs/proxy.md#ordered-reads-merged-undecoded).

Three in-process proxies over one table sharded across 2 data sources x 2 tables: relaying (the default,
which merges an ORDER BY read undecoded where it can), ``relay: false`` (every answer read into rows and
merged by the engine) and ``inlineStatements: false`` (the worker path). Each ORDER BY read — every key kind
(signed and unsigned integers, ``utf8mb4_general_ci``, ``_bin`` and ``general_nopad_ci`` text with ties under
case folding and trailing spaces, latin1 text, binary strings, dates), DESC, several keys, NULLs, DISTINCT,
OFFSET / LIMIT — must reach a raw-socket client as the same bytes from all three, in both EOF forms, text and
prepared (binary rows), and the relaying proxy must have merged it undecoded. Reads whose values or types it
cannot key (text beyond ASCII, a tab under PAD SPACE, DECIMAL, ENUM) give the same bytes, decoded; a unit
that fails answers the worker path's error.
"""

from __future__ import annotations

import random
from typing import Any, Iterator

import pytest

from ddm_core import load_config
from ddm_core.execute import Executor
from services import fresh_mariadb_databases, mariadb_connect, require_module
from test_proxy_many_loop import Served, _served, _table
from test_proxy_relay_bytes import Answer, Wire, _differs
from test_proxy_support import PASSWORD, USER, proxy_config

require_module("mysql_mimic", "ddm proxy")

DDL = ("CREATE TABLE t_sorted (id INTEGER NOT NULL, k BIGINT NULL, u INT UNSIGNED NULL, "
       "c VARCHAR(20) COLLATE utf8mb4_general_ci NULL, cb VARCHAR(20) COLLATE utf8mb4_bin NULL, "
       "np VARCHAR(20) COLLATE utf8mb4_general_nopad_ci NULL, l CHAR(12) CHARACTER SET latin1 NULL, "
       "b VARBINARY(8) NULL, dt DATETIME NULL, day DATE NULL, d DECIMAL(8,2) NULL, e ENUM('x','y','z') NULL, "
       "PRIMARY KEY (id))")  # fmt: skip
WORDS = ["apple", "Apple", "APPLE", "apple ", "b", "B", "", "a b", "A_B", "zeta", "Zeta", "~x", "0"]
ASCII_ROWS = range(1, 61)  # ids whose text is ASCII from the space up
OTHER_ROWS = range(61, 81)  # ids whose text has a character a raw key cannot compare


def _row(i: int, rnd: random.Random) -> tuple[Any, ...]:
    def maybe(value: Any) -> Any:
        return None if rnd.random() < 0.12 else value

    word = rnd.choice(WORDS) if i in ASCII_ROWS else rnd.choice(["épée", "Epee", "tab\there", "ß"])
    return (i, maybe(rnd.choice([-(1 << 63), (1 << 63) - 1, 0, rnd.randint(-5, 5)])),
            maybe(rnd.choice([0, 4294967295, rnd.randint(0, 5)])), maybe(word), maybe(rnd.choice(WORDS)),
            maybe(rnd.choice(WORDS)), maybe(rnd.choice(WORDS).rstrip()), maybe(rnd.choice([b"\x00", b"\x00\x01", b"a", b"A", b"\xff", b""])),
            maybe(f"2026-0{rnd.randint(1, 3)}-0{rnd.randint(1, 3)} 10:00:0{rnd.randint(0, 2)}"),
            maybe(rnd.choice(["1999-12-31", "2026-12-06", "1000-01-01"])), maybe(rnd.choice(["1.50", "-2.25", "10.00"])),
            maybe(rnd.choice("xyz")))  # fmt: skip


RANGE = "id BETWEEN 1 AND 60"
#: name -> (statement, merged undecoded by the relaying proxy)
STATEMENTS = {
    "general_ci": (f"SELECT c, id FROM t_sorted WHERE {RANGE} ORDER BY c, id", True),
    "general_ci_ties": (f"SELECT c FROM t_sorted WHERE {RANGE} ORDER BY c", True),
    "desc_and_int": (f"SELECT c, k FROM t_sorted WHERE {RANGE} ORDER BY c DESC, k, id", True),
    "bin": (f"SELECT cb, id FROM t_sorted WHERE {RANGE} ORDER BY cb DESC, id DESC", True),
    "nopad": (f"SELECT np, id FROM t_sorted WHERE {RANGE} ORDER BY np, id", True),
    "latin1": (f"SELECT l, id FROM t_sorted WHERE {RANGE} ORDER BY l, id", True),
    "signed": (f"SELECT k, id FROM t_sorted WHERE {RANGE} ORDER BY k DESC, id", True),
    "unsigned": (f"SELECT u, k, id FROM t_sorted WHERE {RANGE} ORDER BY u, id", True),
    "binary": (f"SELECT b, id FROM t_sorted WHERE {RANGE} ORDER BY b, id DESC", True),
    "dates": (f"SELECT dt, day, id FROM t_sorted WHERE {RANGE} ORDER BY day DESC, dt, id", True),
    "distinct": (f"SELECT DISTINCT c FROM t_sorted WHERE {RANGE} ORDER BY c", True),
    "distinct_two": (f"SELECT DISTINCT k, cb FROM t_sorted WHERE {RANGE} ORDER BY cb, k DESC", True),
    "limit": (f"SELECT c, id FROM t_sorted WHERE {RANGE} ORDER BY c, id LIMIT 7", True),
    "offset_limit": (f"SELECT c, id FROM t_sorted WHERE {RANGE} ORDER BY c DESC, id LIMIT 5, 9", True),
    "not_ascii": ("SELECT c, id FROM t_sorted WHERE id BETWEEN 1 AND 80 ORDER BY c, id", False),
    "decimal": (f"SELECT d, id FROM t_sorted WHERE {RANGE} ORDER BY d, id", False),
    "enum": (f"SELECT e, id FROM t_sorted WHERE {RANGE} ORDER BY e, id", False),
    "no_rows": ("SELECT c, id FROM t_sorted WHERE id BETWEEN 500 AND 600 ORDER BY c, id", True),
    "key_not_selected": (f"SELECT k, cb FROM t_sorted WHERE {RANGE} ORDER BY u DESC, c, id", True),
    "star": (f"SELECT * FROM t_sorted WHERE {RANGE} AND d IS NOT NULL ORDER BY cb, id", True),
}
NAMES = ("relay", "decoded", "workers")


@pytest.fixture(scope="module")
def served() -> Iterator[dict[str, Served]]:
    rnd = random.Random(2806)
    with fresh_mariadb_databases(2) as databases:
        base = proxy_config(databases)
        base["tables"] += [_table("t_sorted"), _table("t_gap")]
        base["runtime"] = {"allowFullRoute": True, "allowDmlFullRoute": False, "fullRouteThreshold": 64}
        with Executor(load_config(base), load_schema=False) as ex:
            ex.execute(DDL).close()
            ex.execute("CREATE TABLE t_gap (id INTEGER NOT NULL PRIMARY KEY, c VARCHAR(8))").close()
            for i in [*ASCII_ROWS, *OTHER_ROWS]:
                ex.execute("INSERT INTO t_sorted (id, k, u, c, cb, np, l, b, dt, day, d, e) VALUES "
                           "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)", _row(i, rnd)).close()  # fmt: skip
                ex.execute("INSERT INTO t_gap (id, c) VALUES (%s, %s)", (i, f"g{i % 7}")).close()
        direct = mariadb_connect()
        with direct.cursor() as cur:  # one shard's table gone: its unit fails, the others answer
            cur.execute(f"DROP TABLE `{databases[1]}`.t_gap_1_0")
        direct.close()
        proxies: dict[str, Served] = {}
        try:
            for name in NAMES:
                proxies[name] = _served(base, name, batch_rows=1000)
            yield proxies
        finally:
            for one in proxies.values():
                one.close()


def _ordered(one: Served) -> int:
    return int(one.server.runtime.many_ordered)


def _runs(one: Served, sql: str, prepared: bool, eof: bool) -> tuple[list[Answer], int]:
    """``sql`` run 3 times on a fresh raw client (a shape's first run is routed on a worker), and how many of
    the later runs the proxy merged undecoded."""
    wire = Wire(one.port, USER, PASSWORD, "logic_db", deprecate_eof=not eof)
    run = (lambda: wire.execute(sql, [], with_types=True)) if prepared else (lambda: wire.query(sql))
    try:
        answers = [run()]
        wire.query("SELECT 1")  # answered once the statement before it is settled (its counts too)
        before = _ordered(one)
        answers += [run(), run()]
        wire.query("SELECT 1")
        return answers, _ordered(one) - before
    finally:
        wire.close()


@pytest.mark.parametrize("eof", [True, False], ids=["eof", "deprecate-eof"])
@pytest.mark.parametrize("prepared", [False, True], ids=["text", "prepared"])
@pytest.mark.parametrize("statement", list(STATEMENTS))
def test_an_ordered_read_is_the_decoded_merges_answer_byte_for_byte(served: dict[str, Served], statement: str,
                                                                     prepared: bool, eof: bool) -> None:  # fmt: skip
    sql, raw = STATEMENTS[statement]
    answers, merged = {}, {}
    for name in NAMES:
        answers[name], merged[name] = _runs(served[name], sql, prepared, eof)
    want = answers["decoded"][-1]
    assert want.end[:1] != b"\xff", f"the decoded merge failed: {want.end!r}"
    for name in NAMES:
        for run, got in enumerate(answers[name]):
            problem = _differs(f"{statement}, {name}, run {run}", want.frames, got.frames)
            if problem is not None:
                pytest.fail(problem, pytrace=False)
    if statement not in ("no_rows", "limit", "offset_limit", "distinct"):
        assert len(want.rows) > 10, "too few rows to say much"
    assert merged == {"relay": 2 if raw else 0, "decoded": 0, "workers": 0}
    for one in served.values():
        one.at_rest()


@pytest.mark.parametrize("prepared", [False, True], ids=["text", "prepared"])
def test_a_failed_unit_answers_the_worker_paths_error(served: dict[str, Served], prepared: bool) -> None:
    sql = "SELECT c, id FROM t_gap WHERE id BETWEEN 1 AND 60 ORDER BY c, id"
    ends = {}
    for name in NAMES:
        answers, merged = _runs(served[name], sql, prepared, eof=True)
        assert merged == 0
        ends[name] = [a.end for a in answers]
    assert ends["relay"][-1][:1] == b"\xff" and b"t_gap_1_0" in ends["relay"][-1], ends["relay"][-1]
    assert ends["relay"] == ends["decoded"] == ends["workers"]
    for one in served.values():
        one.at_rest()
