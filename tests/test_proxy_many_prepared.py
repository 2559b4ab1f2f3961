"""A prepared statement's multi-unit read relayed undecoded: the decoded path's bytes, every column type.

The units of a multi-unit read go to the data sources as text (COM_QUERY); a client that prepared the
statement reads binary rows. Two in-process proxies over one table of every MariaDB column type sharded
across 2 data sources x 2 tables (the edge rows of tests/test_proxy_relay_bytes.py: extremes of signed and
unsigned integers of every width, DECIMAL(65,30), FLOAT / DOUBLE, DATE / DATETIME(6) / TIMESTAMP(3) / TIME
with negative and over-24-hour times, YEAR, BIT, CHAR / VARCHAR / TEXT / BLOB with 0x00 / 0xFF bytes and
values of more than 250 and 65535 bytes, ENUM / SET, JSON, INET6, UUID, GEOMETRY, NULL everywhere):
``relay: true`` converts the text rows to binary ones in the relay (``ResultRelay.convert``), ``relay:
false`` reads them into Python values and writes them again. A raw-socket client executes the same
statement on each — with the parameters' types, without (new-params-bound 0), with them again; with and
without ``CLIENT_DEPRECATE_EOF`` — and every packet (header and all) must be equal; the relaying proxy's
stop-line counts say it relayed them.

Zero dates, which PyMySQL reads as a ``str`` (``0000-00-00``), are written by both in MariaDB's own binary form
(a zero-length date), the values MariaDB's binary protocol gives for the same rows.
"""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from ddm_core import Router, load_config
from services import fresh_mariadb_databases, mariadb_connect, require_module
from test_proxy_many_loop import Served, _served, _table
from test_proxy_relay_bytes import COLUMNS, EDGE_ROWS, FILLER, Answer, Wire, _binary_rows, _differs, _table_ddl
from test_proxy_support import PASSWORD, USER, proxy_config

require_module("mysql_mimic", "ddm proxy")

RUNS = 3  # the first run of a statement shape goes through a worker; the loop relays from the second
ZERO_KEY = EDGE_ROWS["zero"][0]
ZERO_DATES = ("c_date", "c_datetime", "c_datetime6", "c_timestamp3")
ALL = ", ".join(c.name for c in COLUMNS)
NOT_DATES = ", ".join(c.name for c in COLUMNS if c.name not in ZERO_DATES)
#: name -> (statement, parameters): multi-unit reads (a range of the shard key: every table)
STATEMENTS = {
    "every_column": (f"SELECT id, {ALL} FROM t_types WHERE id BETWEEN ? AND ? AND id <> ?", [1, 200, ZERO_KEY]),
    "the_zero_row": (f"SELECT id, {NOT_DATES} FROM t_types WHERE id BETWEEN ? AND ?", [1, 200]),
    "star": ("SELECT * FROM t_types WHERE id BETWEEN ? AND ? AND id <> ?", [1, 200, ZERO_KEY]),
    "no_rows": (f"SELECT id, {ALL} FROM t_types WHERE id BETWEEN ? AND ?", [500, 600]),
}
ZERO_DATES_SQL = f"SELECT id, {', '.join(ZERO_DATES)} FROM t_types WHERE id BETWEEN ? AND ?"


class Setup:
    """The relaying and decoding proxies, where each key's row is (database, physical table), and the tables
    of ``t_alter`` (an INT UNSIGNED column)."""

    def __init__(self, served: dict[str, Served], located: dict[int, tuple[str, str]],
                 altered: list[tuple[str, str]]) -> None:  # fmt: skip
        self.served = served
        self.located = located
        self.altered = altered


@pytest.fixture(scope="module")
def setup() -> Iterator[Setup]:
    # A connection idle past the pools' ping pause is not lent from the loop (``EndpointPool.lend_idle`` never
    # pings): the worker path runs that read instead, by design. The tests count what took the loop, and a busy
    # host can stall a client past the pause between two runs: proxy_config makes the pause (aliveBypassWindowMs) long.
    with fresh_mariadb_databases(2) as databases:
        base = proxy_config(databases)
        base["tables"] += [_table("t_types"), _table("t_alter"), _table("t_gap")]
        base["runtime"] = {"allowFullRoute": True, "allowDmlFullRoute": False, "fullRouteThreshold": 64}
        router = Router(load_config(base))
        names = {f"ds_{i}": db for i, db in enumerate(databases)}
        tables = [(names[u.data_source], physical) for u in router.route("SELECT id FROM t_types", None).units
                  for _, physical in u.tables]  # fmt: skip
        altered = [(names[u.data_source], physical) for u in router.route("SELECT id FROM t_alter", None).units
                   for _, physical in u.tables]  # fmt: skip
        gapped = [(names[u.data_source], physical) for u in router.route("SELECT id FROM t_gap", None).units
                  for _, physical in u.tables]  # fmt: skip
        located = {}
        for key in [*(key for key, _ in EDGE_ROWS.values()), *FILLER]:
            (unit,) = router.route("SELECT id FROM t_types WHERE id = %s", (key,)).units
            located[key] = names[unit.data_source], unit.tables[0][1]
        conn = mariadb_connect()
        try:
            with conn.cursor() as cur:  # the tables (types the router does not parse: INET6, UUID) and rows
                for database, table in tables:
                    cur.execute(_table_ddl(f"`{database}`.{table}"))
                for database, table in altered:
                    cur.execute(f"CREATE TABLE `{database}`.{table} (id BIGINT NOT NULL PRIMARY KEY, n INT UNSIGNED)")
                for database, table in gapped[:-1]:  # the last unit's table is missing: it fails, the others answer
                    cur.execute(f"CREATE TABLE `{database}`.{table} (id BIGINT NOT NULL PRIMARY KEY)")
                    cur.execute(f"INSERT INTO `{database}`.{table} (id) VALUES (1), (2), (3), (4), (5)")
                for key in range(1, 41):
                    (unit,) = router.route("SELECT id FROM t_alter WHERE id = %s", (key,)).units
                    cur.execute(f"INSERT INTO `{names[unit.data_source]}`.{unit.tables[0][1]} (id, n) VALUES (%s, %s)",
                                (key, key * 1000))  # fmt: skip
                for key, values in EDGE_ROWS.values():
                    database, table = located[key]
                    cur.execute(f"INSERT INTO `{database}`.{table} ({', '.join(['id', *values])}) "
                                f"VALUES ({', '.join([str(key), *values.values()])})")  # fmt: skip
                for key in FILLER:
                    database, table = located[key]
                    cur.execute(f"INSERT INTO `{database}`.{table} (id, c_int, c_varchar, c_double, c_datetime6, "
                                "c_decimal_wide) VALUES (%s, %s, %s, %s, %s, %s)",
                                (key, key * 7, f"row {key}", key / 8, f"2026-01-01 00:00:{key % 60:02d}.{key:06d}",
                                 f"0.{key:07d}"))  # fmt: skip
            conn.commit()
        finally:
            conn.close()
        assert len(tables) == 4 and {located[k] for k in FILLER} == set(tables), "rows on every table"
        served: dict[str, Served] = {}
        try:
            for name in ("relay", "decoded"):
                served[name] = _served(base, name, batch_rows=1000)
            yield Setup(served, located, altered)
        finally:
            for one in served.values():
                one.close()


def _runs(setup: Setup, name: str, sql: str, params: list[int], eof: bool
          ) -> tuple[list[Answer], tuple[int, int, int]]:  # fmt: skip
    """``sql`` executed :data:`RUNS` times on a fresh client of proxy ``name`` (types sent, not sent, sent),
    and how many of the runs after the first (a new shape's goes through a worker) went from the loop, were
    relayed there, and were answered from reader callbacks (proxy/hot_many.py)."""
    served = setup.served[name]
    wire = Wire(served.port, USER, PASSWORD, "logic_db", deprecate_eof=not eof)
    try:
        answers = [wire.execute(sql, params, with_types=True)]
        wire.query("SELECT 1")  # answered once the statement before it is settled (its counts too)
        before = (*served.many, served.taken)
        answers += [wire.execute(sql, params, with_types=run != 1) for run in range(1, RUNS)]
        wire.query("SELECT 1")  # answered once the statement before it is settled (its counts too)
        return answers, (served.many[0] - before[0], served.many[1] - before[1], served.taken - before[2])
    finally:
        wire.close()


@pytest.mark.parametrize("eof", [True, False], ids=["eof", "deprecate-eof"])
@pytest.mark.parametrize("statement", list(STATEMENTS))
def test_relayed_binary_rows_are_the_decoded_paths_bytes(setup: Setup, statement: str, eof: bool) -> None:
    sql, params = STATEMENTS[statement]
    decoded, moved_decoded = _runs(setup, "decoded", sql, params, eof)
    relayed, moved_relayed = _runs(setup, "relay", sql, params, eof)
    for run, (want, got) in enumerate(zip(decoded, relayed), start=1):
        assert want.end[:1] != b"\xff", f"run {run}: the decoded path failed: {want.end!r}"
        problem = _differs(f"{statement}, run {run}", want.frames, got.frames)
        if problem is not None:
            pytest.fail(problem, pytrace=False)
    rows = len(relayed[-1].rows)
    assert rows == (0 if statement == "no_rows" else len(EDGE_ROWS) + len(FILLER) - (statement != "the_zero_row"))
    assert moved_relayed == (RUNS - 1, RUNS - 1, RUNS - 1), "the prepared reads were not relayed from the loop"
    assert moved_decoded == (RUNS - 1, 0, 0)
    for one in setup.served.values():
        one.at_rest()


def test_zero_dates_are_relayed_as_mariadb_sends_them(setup: Setup) -> None:
    """Both paths send a zero date in MariaDB's binary form (module docstring), the relay from MariaDB's text, the
    decoded path from the ``str`` PyMySQL reads it as."""
    decoded, _ = _runs(setup, "decoded", ZERO_DATES_SQL, [1, 200], eof=True)
    relayed, moved = _runs(setup, "relay", ZERO_DATES_SQL, [1, 200], eof=True)
    assert moved == (RUNS - 1, RUNS - 1, RUNS - 1)
    want: list[Any] = []
    for database, table in sorted(set(setup.located.values())):
        direct = Wire(3306, "root", "", database)
        try:
            answer = direct.execute(ZERO_DATES_SQL.replace("t_types", table), [1, 200], with_types=True)
        finally:
            direct.close()
        want += _binary_rows(answer)
    for answer in [*decoded, *relayed]:  # the relay's first run went through a worker: decoded
        assert answer.end[:1] != b"\xff", answer.end
        assert sorted(_binary_rows(answer), key=lambda r: r[0]) == sorted(want, key=lambda r: r[0])
    zero = next(row for row in want if row[0] == ZERO_KEY)
    assert all(isinstance(v, str) and v.startswith("0000-00-00") for v in zero[1:]), zero  # zero dates indeed
    for one in setup.served.values():
        one.at_rest()


def test_a_column_announced_otherwise_than_answered_is_decoded(setup: Setup) -> None:
    """A statement prepared while ``n`` was INT UNSIGNED, executed after it became signed behind the proxy's
    back: the client was announced an unsigned column, which the row writer packs from the value; the relay
    does not convert such a column (proxy/binary_rows.py) and hands the read to the decoded path, with the
    bytes it had read: the same answer as the decoding proxy's, counted as not relayed."""
    sql = "SELECT id, n FROM t_alter WHERE id BETWEEN ? AND ?"
    wires = {name: Wire(one.port, USER, PASSWORD, "logic_db") for name, one in setup.served.items()}
    try:
        for wire in wires.values():
            wire.prepare(sql)  # announced: n INT UNSIGNED
        conn = mariadb_connect()
        try:
            with conn.cursor() as cur:
                for database, table in setup.altered:
                    cur.execute(f"ALTER TABLE `{database}`.{table} MODIFY n INT")
        finally:
            conn.close()
        answers, moved = {}, {}
        for name, wire in wires.items():
            served = setup.served[name]
            answers[name] = [wire.execute(sql, [1, 40], with_types=True)]  # the first: on a worker
            wire.query("SELECT 1")
            before = (*served.many, served.taken)
            answers[name] += [wire.execute(sql, [1, 40], with_types=False) for _ in range(RUNS - 1)]
            wire.query("SELECT 1")
            moved[name] = (served.many[0] - before[0], served.many[1] - before[1], served.taken - before[2])
    finally:
        for wire in wires.values():
            wire.close()
    for run, (want, got) in enumerate(zip(answers["decoded"], answers["relay"]), start=1):
        problem = _differs(f"run {run}", want.frames, got.frames)
        if problem is not None:
            pytest.fail(problem, pytrace=False)
    assert sorted(_binary_rows(answers["relay"][-1])) == [(i, i * 1000) for i in range(1, 41)]
    # from the loop, decoded there (the reader callbacks hand the read over once they read the header)
    assert moved == {"relay": (RUNS - 1, 0, 0), "decoded": (RUNS - 1, 0, 0)}
    for one in setup.served.values():
        one.at_rest()


@pytest.mark.parametrize("eof", [True, False], ids=["eof", "deprecate-eof"])
def test_a_unit_failing_after_rows_is_answered_with_the_error_alone(setup: Setup, eof: bool) -> None:
    """The last unit's table is missing: the relay holds the first units' rows back until every answer is
    read, so the client gets the error alone, as from the decoded path (mysql-connector's binary row reader
    takes an error packet after a row for another row and waits on for ever)."""
    sql = "SELECT id FROM t_gap WHERE id BETWEEN ? AND ?"
    decoded, _ = _runs(setup, "decoded", sql, [1, 40], eof)
    relayed, moved = _runs(setup, "relay", sql, [1, 40], eof)
    for run, (want, got) in enumerate(zip(decoded, relayed), start=1):
        assert got.end[:1] == b"\xff" and int.from_bytes(got.end[1:3], "little") == 1146 and not got.rows, run
        problem = _differs(f"run {run}", want.frames, got.frames)
        if problem is not None:
            pytest.fail(problem, pytrace=False)
    # from the loop; failed, so not counted as relayed (the reader callbacks hand it over at the error)
    assert moved == (RUNS - 1, 0, 0)
    for one in setup.served.values():
        one.at_rest()
