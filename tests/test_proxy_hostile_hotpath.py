"""``ddm proxy``'s hot path against a hostile client: raw sockets, after the statement shape was warmed.

A COM_QUERY or COM_STMT_EXECUTE whose text shape ran before (literal values are parameters:
``WHERE user_id = 1`` and ``= 2`` are one shape) and that routes to one data source unit in
autocommit is sent from the event loop, its answer passed on without a worker thread
(docs/proxy.md#how-it-is-built). Every test here runs its statement shapes two or three times
first, successfully, back to back, and only then attacks (test_proxy_hostile.py covers logins,
handshakes, caps and a fuzz of fresh connections):

1. sequence ids out of order: a warmed statement sent with sequence id 1, 5 or 255; a 16 MiB
   chain whose second packet is out of order, or is a whole command with sequence id 0;
2. packets cut short: the client goes away mid-header or mid-payload, or stays silent there;
3. malformed COM_STMT_EXECUTE payloads for a warmed prepared statement;
4. commands pipelined in one write, and clients gone before their answer (each on a proxy of its
   own, so that a connection it leaks fails that test alone);
5. a client that never reads a 50 MB result;
6. unknown command bytes and statement ids.

Each attack checks that the statement it carried did not run (a row's amount read straight from
MariaDB), that other clients are served (a fresh login reads the right row within
``SERVED_WITHIN`` seconds), and ends with :func:`nothing_left`: no statement of the proxy's still
running on MariaDB, the MariaDB sessions on the test databases and the proxy's file descriptors
back at their baseline, and every pool still able to lend all its connections at once (a
connection a path leaked would leave a transaction waiting ``pool.acquireTimeoutMs`` and failing).
The last test stops the proxy: nothing borrowed at close, and statements did run on the event loop.
"""

from __future__ import annotations

import contextlib
import re
import socket
import struct
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from services import mariadb_rows, require_module

require_module("mysql_mimic", "ddm proxy")

from ddm_core import Executor, load_config  # noqa: E402
from raw_mysql import (  # noqa: E402
    COM_PING,
    COM_QUERY,
    COM_STMT_CLOSE,
    COM_STMT_EXECUTE,
    COM_STMT_FETCH,
    COM_STMT_RESET,
    COM_STMT_SEND_LONG_DATA,
    MAX_PAYLOAD,
    QUERY_ATTRIBUTES,
    VAR_STRING,
    Closed,
    RawClient,
    ServerError,
    decoded,
    error_code,
    execute_payload,
    frame,
    longlong,
    var_string,
)
from test_proxy_hostile import (  # noqa: E402, F401 - databases: the module's fixture
    KEY,
    NOTE,
    _proxy_settings,
    amount,
    assert_served,
    databases,
    logged_in,
)
from test_proxy_support import PASSWORD, USER, ProxyProcess, proxy_config, write_config  # noqa: E402

#: The user whose rows are the large result, and their count: about 1 KB a row, 50 MB in all — more
#: than the kernel's socket buffers between MariaDB, the proxy and a client hold, so a client that
#: does not read makes the proxy either wait or hold the rest itself.
BIG, BIG_ROWS = 20261205, 50_000
BIG_SELECT = f"SELECT order_id, REPEAT(note, 25) AS pad FROM t_order WHERE user_id = {BIG}"
POOL_SIZE = 4  # proxy_config's pool.maxSize
SELECT_NOTE = f"SELECT note FROM t_order WHERE user_id = {KEY}"
SELECT_AMOUNT = f"SELECT amount FROM t_order WHERE user_id = {KEY}"
#: Prepared: the row's note and amount (both strings: raw_mysql reads binary rows of strings).
SELECT_ROW = "SELECT note, CAST(amount AS CHAR) FROM t_order WHERE user_id = ?"
#: Prepared: run with (KEY, NOTE) it changes nothing (the warm-up); with (KEY, anything else) it adds 1.
BUMP = "UPDATE t_order SET amount = amount + 1 WHERE user_id = ? AND note <> ?"
#: What a session answers a command with before closing: at most an error (1835 malformed packet,
#: mysql-mimic's; 1156 packets out of order, MySQL's).
OUT_OF_ORDER = {1835, 1156}


def bump(by: int) -> str:
    """A text UPDATE of the row; every ``by`` is one shape (``amount + ?``): ``bump(0)`` warms it, changing nothing."""
    return f"UPDATE t_order SET amount = amount + {by} WHERE user_id = {KEY}"


@dataclass(frozen=True)
class Setup:
    proxy: ProxyProcess
    databases: list[str]
    keys: list[int]  # a user id routed to each data source
    sessions: int  # MariaDB sessions on the test databases with every pool full
    fds: int  # the proxy's file descriptors then

    @property
    def port(self) -> int:
        return self.proxy.port

    @property
    def pid(self) -> int:
        assert self.proxy.proc is not None
        return self.proxy.proc.pid


#: linkIdleMs: the hot path's own connections close soon after a test, so "back at baseline" is reached fast
SETTINGS = {"connectTimeoutMs": 1500, "maxConnectErrors": 1_000_000, "failedLoginsBeforeDelay": 0,
            "maxAllowedPacket": 20 * 1024 * 1024, "batchRows": 500, "linkIdleMs": 100}  # fmt: skip


@pytest.fixture(scope="module")
def keys(databases: list[str]) -> list[int]:
    """A user id routed to each data source (KEY's own first); BIG's rows written."""
    with Executor(load_config(proxy_config(databases))) as ex:
        route = ex.router.route
        by_source: dict[str, int] = {}
        for user in range(KEY, KEY + 64):
            by_source.setdefault(route("SELECT 1 FROM t_order WHERE user_id = %s", [user]).units[0].data_source, user)
        unit = route("SELECT 1 FROM t_order WHERE user_id = %s", [BIG]).units[0]
    assert len(by_source) == len(databases), by_source
    # Straight into the physical table: the router's parse of a 50 000-row INSERT would take seconds.
    mariadb_rows(databases[int(unit.data_source.removeprefix("ds_"))],
                 f"INSERT INTO {unit.tables[0][1]} (order_id, user_id, amount, note) "
                 f"SELECT 1000000 + seq, {BIG}, seq, REPEAT('r', 40) FROM seq_1_to_{BIG_ROWS}")  # fmt: skip
    return list(by_source.values())


@contextlib.contextmanager
def serving(databases: list[str], keys: list[int], folder: Path) -> Iterator[Setup]:
    """A proxy with every pool full, and the baseline measured then."""
    others = _steady(databases, None)[0]  # another proxy's, running next to this one
    proxy = ProxyProcess(write_config(proxy_config(databases, **_proxy_settings(**SETTINGS)), folder / "proxy.yaml"))
    try:
        proxy.start()
        pools_lend_everything(proxy.port, keys)  # every pool full: the baseline a later count is held to
        assert proxy.proc is not None
        sessions, fds = _steady(databases, proxy.proc.pid)
        assert sessions - others == POOL_SIZE * len(databases), f"{sessions - others} MariaDB sessions, pools full"
        yield Setup(proxy, databases, keys, sessions, fds)
    finally:
        proxy.stop()


@pytest.fixture(scope="module")
def setup(databases: list[str], keys: list[int], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    """The proxy the tests share."""
    with serving(databases, keys, tmp_path_factory.mktemp("hotpath")) as started:
        yield started


@pytest.fixture
def own_setup(setup: Setup, tmp_path: Path) -> Iterator[Setup]:
    """A proxy of its own, next to the shared one (whose sessions its baseline counts too)."""
    with serving(setup.databases, setup.keys, tmp_path) as started:
        yield started


# -- the checks every test ends with -----------------------------------------------------------------


def _sessions(databases: list[str]) -> tuple[int, int]:
    """MariaDB sessions on the test databases (but this one): all, and those running a statement."""
    marks = ", ".join(f"'{db}'" for db in databases)
    sql = ("SELECT COUNT(*), COALESCE(SUM(command <> 'Sleep'), 0) FROM information_schema.processlist "
           f"WHERE db IN ({marks}) AND id <> CONNECTION_ID()")
    total, busy = mariadb_rows(databases[0], sql)[0]
    return int(total), int(busy)


def _fds(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/fd").iterdir()))


def _status_mb(pid: int, field: str) -> float:
    """A memory figure of /proc/<pid>/status (``VmRSS``, ``VmHWM``) in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def _steady(databases: list[str], pid: int | None) -> tuple[int, int]:
    """Sessions and the descriptors of process ``pid`` (0 for none) once closed clients are gone: the same three
    reads in a row (10 s at most)."""
    seen: list[tuple[int, int]] = []
    deadline = time.monotonic() + 10
    while len(seen) < 3 or len(set(seen[-3:])) > 1:
        assert time.monotonic() < deadline, f"sessions / descriptors never settled: {seen[-6:]}"
        seen.append((_sessions(databases)[0], 0 if pid is None else _fds(pid)))
        time.sleep(0.1)
    return seen[-1]


def pools_lend_everything(port: int, keys: list[int]) -> None:
    """Each data source's pool lends all its connections at once: ``POOL_SIZE`` clients each hold one in a
    transaction (one a path leaked: the last waits ``pool.acquireTimeoutMs`` and gets an error)."""
    for key in keys:
        clients = [logged_in(port) for _ in range(POOL_SIZE)]
        try:
            for i, client in enumerate(clients):
                client.query("BEGIN")
                try:
                    client.query(f"SELECT note FROM t_order WHERE user_id = {key}")
                except ServerError as exc:
                    raise AssertionError(f"transaction {i + 1} of {POOL_SIZE} got no backend connection (one still "
                                         f"borrowed: leaked?): {exc}") from exc  # fmt: skip
        finally:
            for client in clients:
                client.close()


def _settled(setup: Setup) -> None:
    """No statement of the proxy's running on MariaDB, sessions and descriptors at most the baseline (10 s at most:
    the closes reach the proxy, and its statements end, a moment later)."""
    deadline = time.monotonic() + 10
    while True:
        now = (*_sessions(setup.databases), _fds(setup.pid))
        if now[1] == 0 and now[0] <= setup.sessions and now[2] <= setup.fds:
            return
        assert time.monotonic() < deadline, (
            f"MariaDB sessions {now[0]} ({now[1]} running a statement), proxy descriptors {now[2]}; "
            f"baseline {setup.sessions} sessions, {setup.fds} descriptors"
        )
        time.sleep(0.1)


def nothing_left(setup: Setup) -> None:
    """Nothing running, sessions and descriptors back at the baseline, every pool whole, a fresh client served."""
    _settled(setup)
    pools_lend_everything(setup.port, setup.keys)
    _settled(setup)
    assert_served(setup.port)


def ended(client: RawClient, wait: float = 5.0) -> list[bytes]:
    """The packets the proxy sent before it closed the connection (within ``wait`` seconds, else fail)."""
    client.sock.settimeout(wait)
    got: list[bytes] = []
    try:
        while True:
            got.append(client.packet())
    except (Closed, ConnectionResetError, BrokenPipeError):
        return got
    except (socket.timeout, TimeoutError):
        raise AssertionError(f"the connection stayed open; it got {got}") from None


def still_open(client: RawClient, wait: float) -> bool:
    """Nothing came, and the connection was not closed, within ``wait`` seconds."""
    client.sock.settimeout(wait)
    try:
        return not client.sock.recv(1)  # b"": closed
    except (socket.timeout, TimeoutError):
        return True
    except (ConnectionResetError, BrokenPipeError):
        return False


def warmed(port: int, *statements: str, runs: int = 3, timeout: float = 5.0) -> RawClient:
    """A logged-in client that ran each of ``statements`` ``runs`` times, successfully and back to back."""
    client = logged_in(port, timeout=timeout)
    for _ in range(runs):
        for sql in statements:
            client.query(sql)
    return client


def execute(client: RawClient, stmt_id: int, params: list[tuple[int, bytes]], **options: Any) -> Any:
    """COM_STMT_EXECUTE: the rows of its binary result (as text), or the affected rows of its OK."""
    client.command(COM_STMT_EXECUTE, execute_payload(stmt_id, params, **options))
    return decoded([payload for _, payload in client.response()], binary=True)


def sequence_ids_run_on(answer: list[tuple[int, bytes]]) -> bool:
    """An answer's packets are numbered 1, 2, 3, ... (the command was 0)."""
    return [seq for seq, _ in answer] == [i % 256 for i in range(1, len(answer) + 1)]


# -- 1. sequence ids out of order ----------------------------------------------------------------------


@pytest.mark.parametrize("seq", [1, 5, 255])
def test_a_warmed_statement_with_a_wrong_sequence_id_is_not_run(setup: Setup, seq: int) -> None:
    before = amount(setup.databases)
    with warmed(setup.port, bump(0)) as client:
        client.send(bytes([COM_QUERY]) + bump(1).encode(), seq=seq)
        got = ended(client)
        assert len(got) <= 1 and all(error_code(p) in OUT_OF_ORDER for p in got), got
        assert_served(setup.port)
    assert amount(setup.databases) == before, f"an UPDATE sent with sequence id {seq} ran"
    nothing_left(setup)


@pytest.mark.parametrize("second", [5, 0], ids=["seq-5", "seq-0-a-command-of-its-own"])
def test_a_chain_whose_second_packet_is_out_of_order_is_not_run(setup: Setup, second: int) -> None:
    """The first packet of a 16 MiB chain is whole (sequence id 0), the second is numbered ``second``
    instead of 1 and holds a complete warmed UPDATE: a reader that took a 0 for a new command would run it.
    (The chain itself could not run: it is longer than MariaDB's own max_allowed_packet of 16 MiB.)"""
    before = amount(setup.databases)
    with warmed(setup.port, bump(0), timeout=60) as client:
        head = bytes([COM_QUERY]) + f"{bump(1)} AND note <> '".encode()
        client.sock.sendall(frame(head + b"x" * (MAX_PAYLOAD - len(head))))  # 16 MiB - 1: a chain goes on
        client.sock.sendall(frame(bytes([COM_QUERY]) + bump(1).encode(), second))
        got = ended(client, wait=30)
        assert len(got) <= 1 and all(error_code(p) in OUT_OF_ORDER for p in got), [p[:40] for p in got]
    assert amount(setup.databases) == before, "a packet of a chain ran as a statement"
    nothing_left(setup)


# -- 2. packets cut short ------------------------------------------------------------------------------


def _cut(sql: str, where: str) -> bytes:
    """A COM_QUERY packet whose header announces 10 bytes more than follow (``payload``), or half its header."""
    payload = bytes([COM_QUERY]) + sql.encode()
    whole = (len(payload) + 10).to_bytes(3, "little") + b"\x00" + payload
    return whole[:2] if where == "header" else whole


@pytest.mark.parametrize("how", ["half-close", "close", "reset"])
@pytest.mark.parametrize("where", ["header", "payload"])
def test_a_command_cut_short_by_the_client_going_away_is_not_run(setup: Setup, where: str, how: str) -> None:
    before = amount(setup.databases)
    with warmed(setup.port, bump(0)) as client:
        client.sock.sendall(_cut(bump(1), where))
        if how == "half-close":  # the proxy reads the end mid-packet and must close its side
            client.sock.shutdown(socket.SHUT_WR)
            got = ended(client)
            assert all(error_code(p) is not None for p in got), got
        elif how == "reset":
            client.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    assert_served(setup.port)
    assert amount(setup.databases) == before, "a command cut short ran"
    nothing_left(setup)


def test_clients_silent_mid_packet_block_no_one_and_hold_no_backend_session(
    setup: Setup, capsys: pytest.CaptureFixture[str]
) -> None:
    """Logged in, warmed, then half a header and a payload short of its announced length, and silence.

    ``proxy.connectTimeoutMs`` ends at the login; ``proxy.netReadTimeoutMs`` (30 s by default here) drops
    them later (tests/test_proxy_net_read_timeout.py): how long these stay open within the first
    seconds is printed, not asserted. What must hold meanwhile: others are served, no statement ran or runs.
    """
    before = amount(setup.databases)
    stuck = [warmed(setup.port, bump(0)) for _ in range(2)]
    try:
        for client, where in zip(stuck, ["header", "payload"]):
            client.sock.sendall(_cut(bump(1), where))
        for _ in range(3):
            assert_served(setup.port)
        assert _sessions(setup.databases)[1] == 0, "a statement runs on MariaDB for a client stuck mid-packet"
        wait = 2 * 1.5  # twice proxy.connectTimeoutMs
        time.sleep(wait)
        open_after = [still_open(client, 0.05) for client in stuck]
        with capsys.disabled():
            print(f"\nclients stuck mid-header / mid-payload after login: still open after {wait:.0f} s: {open_after}")
    finally:
        for client in stuck:
            client.close()
    assert amount(setup.databases) == before, "a command cut short ran"
    nothing_left(setup)


# -- 3. malformed COM_STMT_EXECUTE after the statement was warmed ---------------------------------------

def _header(stmt_id: int) -> bytes:
    return struct.pack("<IBI", stmt_id, 0, 1)  # no cursor, one iteration


#: name -> the malformed payload, built from the id of the warmed BUMP statement and of a second prepare of
#: BUMP never executed. Each would add 1 to the row if run.
MALFORMED: dict[str, Callable[[int, int], bytes]] = {
    "payload-too-short": lambda stmt, _: _header(stmt)[:2],
    "unknown-statement-id": lambda stmt, _: execute_payload(stmt + 1000, [longlong(KEY), var_string(b"x")]),
    "null-bitmap-cut-short": lambda stmt, _: _header(stmt),
    "types-cut-short": lambda stmt, _: _header(stmt) + b"\x00\x01\x08",
    "string-length-past-the-end": lambda stmt, _: execute_payload(stmt, [longlong(KEY), (VAR_STRING, b"\x64abc")]),  # fmt: skip
    "unbound-first-execute": lambda _, fresh: execute_payload(fresh, [longlong(KEY), var_string(b"x")], types=False),  # fmt: skip
    "one-value-for-two-parameters": lambda stmt, _: execute_payload(stmt, [longlong(KEY)]),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_execute_of_a_warmed_statement_is_refused_and_the_session_goes_on(setup: Setup, case: str) -> None:
    malformed = MALFORMED[case]
    before = amount(setup.databases)
    with RawClient(setup.port) as client:
        assert client.login(USER, PASSWORD)[:1] == b"\x00"
        select, update, fresh = client.prepare(SELECT_ROW), client.prepare(BUMP), client.prepare(BUMP)
        for types in (True, False, False):  # the types with the first execute only, as libmariadb sends them
            assert execute(client, select, [longlong(KEY)], types=types) == [(NOTE, str(before))]
            assert execute(client, update, [longlong(KEY), var_string(NOTE.encode())], types=types) == 0
        client.command(COM_STMT_EXECUTE, malformed(update, fresh))
        answer = client.response()
        assert error_code(answer[0][1]) is not None, f"answered {answer[0][1][:40]!r}"
        assert amount(setup.databases) == before, "the malformed execute ran"
        assert_served(setup.port)
        # the session goes on: the next executes, without types, as a client sends them after the first
        assert execute(client, update, [longlong(KEY), var_string(b"x")], types=False) == 1
        assert execute(client, select, [longlong(KEY)], types=False) == [(NOTE, str(before + 1))]
    nothing_left(setup)



def _offered(greeting: bytes) -> int:
    """The capability flags a server's greeting offers (both halves)."""
    at = greeting.index(b"\x00", 1) + 1 + 4 + 8 + 1  # version, connection id, nonce, filler
    low = int.from_bytes(greeting[at : at + 2], "little")
    high = int.from_bytes(greeting[at + 5 : at + 7], "little")  # past charset and status
    return low | high << 16


def test_query_attributes_are_not_offered_and_a_client_asking_for_them_is_served_without(setup: Setup) -> None:
    """MariaDB behind the proxy has no query attributes: the proxy offers none, so a client that would send them
    (a parameter count in every execute) sends plain executes, which the hot path takes."""
    with RawClient(setup.port) as client:
        assert not _offered(client.packet()) & QUERY_ATTRIBUTES
    before = amount(setup.databases)
    with RawClient(setup.port) as client:
        assert client.login(USER, PASSWORD, capabilities=QUERY_ATTRIBUTES)[:1] == b"\x00"
        select, update = client.prepare(SELECT_ROW), client.prepare(BUMP)
        for types in (True, False, False):
            assert execute(client, select, [longlong(KEY)], types=types) == [(NOTE, str(before))]
        assert execute(client, update, [longlong(KEY), var_string(b"x")], types=True) == 1
        assert execute(client, select, [longlong(KEY)], types=False) == [(NOTE, str(before + 1))]
    nothing_left(setup)

# -- 4. pipelining, and clients gone before their answer ----------------------------------------------------


def test_warmed_commands_written_at_once_are_answered_in_order(setup: Setup) -> None:
    before = amount(setup.databases)
    with warmed(setup.port, SELECT_NOTE, bump(0), SELECT_AMOUNT) as client:
        statements = [SELECT_NOTE, bump(1), SELECT_AMOUNT]
        client.sock.sendall(b"".join(frame(bytes([COM_QUERY]) + sql.encode()) for sql in statements))
        answers = [client.response() for _ in statements]
        client.command(COM_PING)
        assert client.packet()[:1] == b"\x00", "a packet beyond the three answers"
    for sql, answer in zip(statements, answers):
        assert sequence_ids_run_on(answer), f"{sql}: sequence ids {[seq for seq, _ in answer]}"
    got = [decoded([payload for _, payload in answer]) for answer in answers]
    assert got == [[(NOTE,)], 1, [(str(before + 1),)]], "answers out of order (the SELECT after the UPDATE sees it)"
    nothing_left(setup)


def test_an_execute_a_close_and_a_query_written_at_once_are_answered_in_order(setup: Setup) -> None:
    before = amount(setup.databases)
    with warmed(setup.port, SELECT_NOTE) as client:
        select = client.prepare(SELECT_ROW)
        for types in (True, False, False):
            assert execute(client, select, [longlong(KEY)], types=types) == [(NOTE, str(before))]
        client.sock.sendall(frame(bytes([COM_STMT_EXECUTE]) + execute_payload(select, [longlong(KEY)], types=False))
                            + frame(bytes([COM_STMT_CLOSE]) + struct.pack("<I", select))  # answered with nothing
                            + frame(bytes([COM_QUERY]) + SELECT_NOTE.encode()))  # fmt: skip
        answers = [client.response() for _ in range(2)]
        assert all(sequence_ids_run_on(answer) for answer in answers), [[s for s, _ in a] for a in answers]
        assert decoded([p for _, p in answers[0]], binary=True) == [(NOTE, str(before))]
        assert decoded([p for _, p in answers[1]]) == [(NOTE,)]
        client.command(COM_STMT_EXECUTE, execute_payload(select, [longlong(KEY)], types=False))
        assert error_code(client.packet()) is not None, "an execute of the closed statement was answered"
        assert client.query(SELECT_NOTE) == [(NOTE,)]
    nothing_left(setup)


SLEEPY = f"SELECT SLEEP({{}}), note FROM t_order WHERE user_id = {KEY}"


@pytest.mark.parametrize(
    ("warm", "sent", "how"),
    [
        pytest.param([SELECT_NOTE], [SELECT_NOTE], "close", id="point-select"),
        pytest.param([SELECT_NOTE], [SELECT_NOTE], "reset", id="point-select-reset"),
        pytest.param([SLEEPY.format(0)], [SLEEPY.format(1)], "close", id="sleeping-select"),
        pytest.param([SLEEPY.format(0)], [SLEEPY.format(1)], "reset", id="sleeping-select-reset"),
        pytest.param([SELECT_NOTE, SELECT_AMOUNT, SLEEPY.format(0)], [SELECT_NOTE, SELECT_AMOUNT, SLEEPY.format(1)],
                     "close", id="three-pipelined"),
    ],
)  # fmt: skip
def test_a_client_gone_before_its_answer_leaves_nothing_behind(
    own_setup: Setup, warm: list[str], sent: list[str], how: str
) -> None:
    """The client closes (or resets: SO_LINGER 0) right after sending; one whose last statement sleeps leaves
    once MariaDB runs it, so its answer surely comes after the client left. On a proxy of its own: a leaked
    connection fails this test, and leaves the shared proxy's pools whole for the others."""
    setup = own_setup
    with warmed(setup.port, *warm) as client:
        client.sock.sendall(b"".join(frame(bytes([COM_QUERY]) + sql.encode()) for sql in sent))
        deadline = time.monotonic() + 10
        while sent[-1].startswith("SELECT SLEEP") and _sessions(setup.databases)[1] == 0:
            assert time.monotonic() < deadline, "the sleeping statement never ran on MariaDB"
            time.sleep(0.02)
        if how == "reset":
            client.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    assert_served(setup.port)
    nothing_left(setup)


# -- 5. a client that never reads ------------------------------------------------------------------------


def test_a_client_that_never_reads_a_large_result_holds_back_no_one(
    setup: Setup, capsys: pytest.CaptureFixture[str]
) -> None:
    """Backpressure, not unbounded buffering: while the client sits, others are served and the proxy's
    RSS stays within 200 MB of what it was before the large statement was first run."""
    rss_before = _status_mb(setup.pid, "VmRSS")
    with warmed(setup.port, BIG_SELECT, runs=2, timeout=60) as reader, warmed(setup.port, SELECT_NOTE) as other:
        warm_peak = _status_mb(setup.pid, "VmHWM")
        slow = logged_in(setup.port)
        try:
            slow.command(COM_QUERY, BIG_SELECT.encode())
            rss, busy = [], []
            for _ in range(6):
                assert other.query(SELECT_NOTE) == [(NOTE,)]  # the warmed point select, on the same data source
                assert_served(setup.port)
                rss.append(_status_mb(setup.pid, "VmRSS"))
                busy.append(_sessions(setup.databases)[1])
                time.sleep(0.25)
            assert max(rss) - rss_before < 200, f"the proxy's RSS went from {rss_before:.0f} MB to {max(rss):.0f} MB"
            rows = reader.query(BIG_SELECT)  # another reader of the same result meanwhile
            assert isinstance(rows, list) and len(rows) == BIG_ROWS
        finally:
            slow.close()
    with capsys.disabled():
        print(f"\nslow reader of {BIG_ROWS} rows (~50 MB): proxy RSS {rss_before:.0f} MB before the warm-ups, peak "
              f"{warm_peak:.0f} MB after them, {min(rss):.0f}-{max(rss):.0f} MB while the client sat; MariaDB "
              f"statements running meanwhile: {busy}")
    nothing_left(setup)


# -- 6. unknown commands and statement ids ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "body"),
    [
        (0x60, lambda _: b"xyz"),
        (0xFF, lambda _: b""),
        (0x20, lambda _: b"\x00" * 9),
        (COM_STMT_FETCH, lambda _: struct.pack("<II", 99_999, 10)),
        (COM_STMT_FETCH, lambda stmt: struct.pack("<II", stmt, 10)),  # a statement executed without a cursor
        (COM_STMT_FETCH, lambda _: b"\x01"),
        (COM_STMT_RESET, lambda _: struct.pack("<I", 99_999)),
        (COM_STMT_EXECUTE, lambda _: execute_payload(99_999, [longlong(KEY)], types=False)),
    ],
    ids=["0x60", "0xff", "0x20", "fetch-unknown-id", "fetch-without-cursor", "fetch-short", "reset-unknown-id",
         "execute-unknown-id"],
)
def test_an_unknown_command_or_statement_id_after_warm_up_is_answered(
    setup: Setup, command: int, body: Callable[[int], bytes]
) -> None:
    with warmed(setup.port, SELECT_NOTE) as client:
        select = client.prepare(SELECT_ROW)
        for types in (True, False, False):
            execute(client, select, [longlong(KEY)], types=types)
        client.command(command, body(select))
        try:
            answer = client.response()
        except Closed:  # closed is an answer too
            answer = []
        else:
            assert [error_code(p) is not None for _, p in answer] == [True], f"answered {answer}"
            assert client.query(SELECT_NOTE) == [(NOTE,)]  # the session goes on, on its warmed statements
            assert execute(client, select, [longlong(KEY)], types=False)[0][0] == NOTE
        assert_served(setup.port)
    nothing_left(setup)


@pytest.mark.parametrize("body", [struct.pack("<IH", 99_999, 0) + b"abc", b"\x01"], ids=["unknown-id", "short"])
def test_send_long_data_for_an_unknown_statement_is_answered_with_nothing(setup: Setup, body: bytes) -> None:
    with warmed(setup.port, SELECT_NOTE) as client:
        client.command(COM_STMT_SEND_LONG_DATA, body)
        client.command(COM_PING)
        assert client.packet()[:1] == b"\x00", "the answer to COM_PING is not its OK"
        assert client.query(SELECT_NOTE) == [(NOTE,)]
    nothing_left(setup)


# -- the end: nothing borrowed, and the hot path was taken --------------------------------------------------


def test_the_proxy_stops_with_nothing_borrowed_having_run_statements_on_the_event_loop(
    setup: Setup, capsys: pytest.CaptureFixture[str]
) -> None:
    assert setup.proxy.terminate() == 0
    borrowed = re.search(r"(\d+) backend connection\(s\) were still borrowed at close", setup.proxy.stderr)
    on_loop = re.search(r"(\d+) statement\(s\) ran on the event loop", setup.proxy.stderr)
    assert borrowed is not None and on_loop is not None, setup.proxy.stderr[-2000:]
    assert borrowed.group(1) == "0", borrowed.group(0)
    assert int(on_loop.group(1)) > 0, "no statement of this module took the event-loop path"
    with capsys.disabled():
        print(f"\n{on_loop.group(0)}")
