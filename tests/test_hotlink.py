"""The ``hotlink`` unit (both twins): a hot statement's send, its answer relayed and its end, and the remembered headers.

``LinkProtocol`` runs as the protocol of a real socket pair's transport: what it sends is one framed
packet, and a data source's answer split at any byte reaches the client transport re-framed, ending
the command once. ``HotStatement`` is driven with recording stand-ins of the proxy's runtime (the
objects it is handed; no database is involved): its common end gives the link back, observes the
statement, counts it and lets the gate go on; anything else goes to ``failed`` / ``on_end``; the shared
deadlines see it come and go. ``HeaderMemo`` asks the connection's ``header_for`` once per definitions
until the session's variables change.
"""

from __future__ import annotations

import asyncio
import socket
import time
from types import SimpleNamespace
from typing import Any

import pytest

from ddm_core._fast import Implementation

OK_PACKET = b"\x00\x01\x02\x02\x00\x00\x00"  # affected 1, insert id 2, autocommit, no warnings


def _packet(payload: bytes, seq: int) -> bytes:
    return len(payload).to_bytes(3, "little") + bytes([seq]) + payload


def _column(name: bytes) -> bytes:
    lenenc = lambda b: bytes([len(b)]) + b  # noqa: E731
    return (lenenc(b"def") + lenenc(b"db") + lenenc(b"t_0") + lenenc(b"t_0") + lenenc(name) + lenenc(name)
            + b"\x0c\x21\x00\x0b\x00\x00\x00\x03\x00\x00\x00\x00\x00")  # fmt: skip


def _text_result() -> bytes:
    """A one-column, two-row text result as a data source without CLIENT_DEPRECATE_EOF sends it."""
    eof = b"\xfe\x00\x00\x02\x00"
    packets = [b"\x01", _column(b"id"), eof, b"\x011", b"\x012", eof]
    return b"".join(_packet(p, i + 1) for i, p in enumerate(packets))


def test_frame(impl: Implementation) -> None:
    frame = impl.hotlink.frame
    assert frame(b"\x0e") == b"\x01\x00\x00\x00\x0e"
    assert frame(b"x" * 70_000, 5) == (70_000).to_bytes(3, "little") + b"\x05" + b"x" * 70_000


class _Recorder:
    """The link's client transport and ``on_end``: what the client would read, and how the command ended."""

    def __init__(self) -> None:
        self.written = bytearray()
        self.ends: list[int] = []

    def write(self, data: bytes) -> None:
        self.written += data

    def is_closing(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return 0

    def on_end(self, link: Any, state: int) -> None:
        self.ends.append(state)


def _link_class(impl: Implementation) -> type:
    class Link(impl.hotlink.LinkProtocol):  # type: ignore[name-defined,misc]
        unasked_data: list[bytes]

        def unasked(self, data: bytes) -> None:
            self.unasked_data.append(data)

    return Link


async def _linked(impl: Implementation) -> tuple[Any, socket.socket]:
    ours, theirs = socket.socketpair()
    loop = asyncio.get_running_loop()
    link_class = _link_class(impl)

    def made() -> Any:
        link = link_class()
        link.loop, link.unasked_data = loop, []
        return link

    _, link = await loop.create_connection(made, sock=ours)
    theirs.setblocking(False)
    return link, theirs


@pytest.mark.parametrize("split", [None, 1, 5, 17])
def test_a_link_sends_one_packet_and_relays_the_answer_in_any_chunks(impl: Implementation, split: int | None) -> None:
    async def run() -> None:
        link, server = await _linked(impl)
        client = _Recorder()
        relay = impl.relay.ResultRelay(1, True, True, True)
        link.send(b"\x03SELECT 1", relay, client, lambda d: ([impl.hotlink.frame(b"")[4:] + b"\x01"] + d, 2),
                  client.on_end)  # fmt: skip
        await asyncio.sleep(0.05)
        assert server.recv(100) == b"\x09\x00\x00\x00\x03SELECT 1"
        assert link.answering
        answer = _text_result()
        chunks = [answer] if split is None else [answer[i : i + split] for i in range(0, len(answer), split)]
        for chunk in chunks:
            link.data_received(chunk)
        assert client.ends == [impl.relay.DONE] and not link.answering
        assert relay.rows == 2
        assert client.written.endswith(_packet(b"\x012", 5) + _packet(b"\xfe\x00\x00\x02\x00", 6))
        link.data_received(b"late")  # no command: the subclass hears of it
        assert link.unasked_data == [b"late"] and client.ends == [impl.relay.DONE]
        link.transport.close()
        server.close()

    asyncio.run(run())


def test_an_ok_answer_ends_the_command_with_ok(impl: Implementation) -> None:
    async def run() -> None:
        link, server = await _linked(impl)
        client = _Recorder()
        relay = impl.relay.ResultRelay(1, True, True, True)
        link.send(b"\x03DO 1", relay, client, lambda d: (d, 2), client.on_end)
        link.data_received(_packet(OK_PACKET, 1))
        assert client.ends == [impl.relay.OK] and relay.first == OK_PACKET
        link.end(impl.hotlink.LOST)  # nothing awaited any more: no second end
        assert client.ends == [impl.relay.OK]
        link.transport.close()
        server.close()

    asyncio.run(run())


# -- HeaderMemo --------------------------------------------------------------------------------------


class _Variables:
    def __init__(self) -> None:
        self.changes = 0


def test_the_header_is_asked_once_per_definitions_until_a_set(impl: Implementation) -> None:
    asked: list[tuple[bytes, ...]] = []

    def header_for(definitions: list[bytes]) -> tuple[list[bytes], int]:
        asked.append(tuple(definitions))
        return [b"count"] + [d.upper() for d in definitions], 2

    session = SimpleNamespace(variables=_Variables())
    conn = SimpleNamespace(status_flags=2)
    memo = impl.hotlink.HeaderMemo(header_for, session, conn, None)
    assert memo([b"a", b"b"]) == ([b"count", b"A", b"B"], 2)
    conn.status_flags = 3  # read every time, remembered or not
    assert memo([b"a", b"b"]) == ([b"count", b"A", b"B"], 3)
    assert memo([b"c"]) == ([b"count", b"C"], 2)
    assert memo([b"a", b"b"])[0] == [b"count", b"A", b"B"]
    assert asked == [(b"a", b"b"), (b"c",)]
    session.variables.changes += 1  # a SET (SET NAMES): every header is asked again
    memo([b"a", b"b"])
    session.variables = _Variables()  # a reset replaces the variables
    memo([b"a", b"b"])
    assert asked[2:] == [(b"a", b"b")] * 2
    session.variables = SimpleNamespace()  # variables that count nothing: asked every time
    memo([b"a", b"b"])
    memo([b"a", b"b"])
    assert len(asked) == 6
    session.variables = _Variables()
    for i in range(impl.hotlink.MEMO_LIMIT + 5):  # bounded: a client with more kinds starts again
        memo([bytes([i])])
    assert len(asked) == 6 + impl.hotlink.MEMO_LIMIT + 5
    # the definitions last answered are compared first; a list the caller changes afterwards is not theirs
    before = len(asked)
    same = [b"x", b"y"]
    assert memo(same)[0] == memo(same)[0] == memo([b"x", b"y"])[0] == [b"count", b"X", b"Y"]
    same[0] = b"z"
    assert memo(same)[0] == [b"count", b"Z", b"Y"] and memo([b"x", b"y"])[0] == [b"count", b"X", b"Y"]
    assert asked[before:] == [(b"x", b"y"), (b"z", b"y")]
    # the tables of one statement in turn (as a point select's, routed by its values): each asked once
    before = len(asked)
    tables = [[b"def t_%d" % i] for i in range(impl.hotlink.RECENT)]
    for _ in range(3):
        for definitions in tables:
            assert memo(list(definitions))[0] == [b"count", definitions[0].upper()]
    assert asked[before:] == [tuple(d) for d in tables]


# -- HotStatement ------------------------------------------------------------------------------------


class _Deadlines:
    def __init__(self) -> None:
        self.running: set[Any] = set()
        self.at = float("inf")
        self.armed: list[float] = []

    def arm(self, when: float, loop: Any) -> None:
        self.at = when
        self.armed.append(when)


class _Runtime:
    """The proxy runtime's parts a hot statement uses, recording what it is asked."""

    def __init__(self, timeout: float = 0.0) -> None:
        self.calls: list[Any] = []
        self.deadlines = _Deadlines()
        self.audit: Any = None
        self.inlined = self.relayed = 0
        #: the slow-SQL log's figures: no threshold (every statement quick), read again in an hour
        self.slow_sql = SimpleNamespace(threshold_s=float("inf"), refresh_at=time.monotonic() + 3600)
        engine = SimpleNamespace(timeout=timeout, cancel_grace=1.0, observed_rows=self._observed, observer=self,
                                 slow_sql=self.slow_sql, unit_sql=lambda driver, unit, style: unit.sql)  # fmt: skip
        self.executor = SimpleNamespace(engine=engine)
        self.backends = SimpleNamespace(give=lambda link: self.calls.append(("give", link)))
        self.commands = SimpleNamespace(exit_relayed=self._exit_relayed)

    def _exit_relayed(self, cid: int | None) -> None:
        self.inlined += 1
        self.relayed += 1
        self._exit(cid)

    def _observed(self, plan: Any, started: float, rows: int) -> None:
        self.calls.append(("observed", rows))

    def _exit(self, cid: int | None) -> None:
        self.calls.append(("exit", cid))


class _Link:
    def __init__(self, loop: Any) -> None:
        self.loop = loop
        self.read_bound: float | None = None
        self.prepared = {"SELECT ? FROM t_0": 7}
        self.sent: list[bytes] = []
        self.aborted = False
        self.raw = SimpleNamespace(escape=lambda v: repr(v), encoding="utf8")
        self.driver = SimpleNamespace(cancel=lambda endpoint, raw: self.sent.append(b"KILL"))
        self.endpoint = None

    def send(self, payload: bytes, relay: Any, client: Any, header_for: Any, on_end: Any) -> None:
        self.sent.append(payload)
        self.on_end = on_end

    def abort(self) -> None:
        self.aborted = True


def _statement_class(impl: Implementation) -> type:
    class Statement(impl.hotlink.HotStatement):  # type: ignore[name-defined,misc]
        def failed(self, link: Any, state: int) -> None:
            self.runtime.calls.append(("failed", state))

        def prepare_first(self, values: bytes) -> None:
            self.runtime.calls.append(("prepare", values))

    return Statement


def _statement(impl: Implementation, runtime: _Runtime, link: Any, ends: list[Any], done: list[int]) -> Any:
    plan = SimpleNamespace(units=[SimpleNamespace(sql="SELECT ? FROM t_0", params=(5,))])
    relay = impl.relay.ResultRelay(1, True, True, True)
    return _statement_class(impl)(runtime, link, plan, 0.0, relay, None, None, lambda rows, error: ends.append(rows),
                                  lambda: done.append(1), 42)  # fmt: skip


def test_an_execute_is_sent_with_the_link_statement_id_and_its_common_end_runs_in_place(impl: Implementation) -> None:
    async def run() -> None:
        runtime, ends, done = _Runtime(), [], []  # type: ignore[var-annotated]
        link = _Link(asyncio.get_running_loop())
        statement = _statement(impl, runtime, link, ends, done)
        statement.start("qmark", b"\x00\x01\x08\x00\x05\x00\x00\x00\x00\x00\x00\x00")
        assert link.sent == [b"\x17\x07\x00\x00\x00\x00\x01\x00\x00\x00\x00\x01\x08\x00\x05" + b"\x00" * 7]
        assert runtime.deadlines.running == set()  # no timeout, no read bound: nothing to watch
        statement.relay.rows = 0
        statement.ended(link, impl.relay.DONE)
        assert runtime.calls == [("give", link), ("observed", 0), ("exit", 42)]
        assert done == [1] and ends == [] and (runtime.inlined, runtime.relayed) == (1, 1)
        statement.ended(link, impl.relay.DONE)  # a late second end changes nothing
        assert len(runtime.calls) == 3

    asyncio.run(run())


def test_a_text_statement_is_formatted_escaped_and_ends_in_on_end_with_an_audit(impl: Implementation) -> None:
    async def run() -> None:
        runtime, ends, done = _Runtime(), [], []  # type: ignore[var-annotated]
        runtime.audit = object()  # an audit log: the session's own end writes its record
        link = _Link(asyncio.get_running_loop())
        statement = _statement(impl, runtime, link, ends, done)
        unit = statement.plan.units[0]
        unit.sql, unit.params = "SELECT %s FROM t_0 WHERE c = %s AND b = %s", (5, "x", True)
        statement.start("format", None)  # an int as its str(), anything else the driver's escape (here repr)
        assert link.sent == [b"\x03SELECT 5 FROM t_0 WHERE c = 'x' AND b = True"]
        statement.relay.rows = 3
        statement.ended(link, impl.relay.DONE)
        assert ends == [3] and done == [] and runtime.inlined == 0
        assert runtime.calls == [("give", link), ("observed", 3)]

    asyncio.run(run())


def test_not_prepared_failed_ok_answers_and_deadlines(impl: Implementation) -> None:
    async def run() -> None:
        loop = asyncio.get_running_loop()
        runtime, ends, done = _Runtime(timeout=2.0), [], []  # type: ignore[var-annotated]
        link = _Link(loop)
        link.prepared = {}
        statement = _statement(impl, runtime, link, ends, done)
        statement.start("qmark", b"values")
        assert runtime.calls == [("prepare", b"values")] and link.sent == []
        assert runtime.deadlines.running == {statement} and runtime.deadlines.armed == [statement.cancel_at]
        assert statement.abort_at == pytest.approx(statement.cancel_at + 1.0)
        statement.check(statement.cancel_at)  # the deadline: cancelled on the data source, not yet aborted
        assert statement.fired and link.sent == [b"KILL"] and not link.aborted
        statement.check(statement.abort_at + 0.0 if statement.abort_at is not None else 0.0)
        assert statement.bounded and link.aborted
        statement.ended(link, impl.relay.DONE)  # after a cancel even a complete answer fails
        assert runtime.calls[-1] == ("failed", impl.relay.DONE) and runtime.deadlines.running == set()

        ok = _statement(impl, runtime, _Link(loop), ends, done)
        ok.start("qmark", b"v")
        ok.ended(ok.link, impl.relay.OK)  # an OK answer (SELECT ... INTO): the session's end writes it
        assert ends == [-1] and runtime.calls[-1] == ("observed", 0)

        gone = _statement(impl, runtime, _Link(loop), ends, done)
        gone.start("qmark", b"v")
        gone.abandon()
        assert gone.done and gone.link.aborted and gone not in runtime.deadlines.running
        gone.ended(gone.link, impl.relay.DONE)  # abandoned: nothing more
        assert runtime.calls[-1] == ("observed", 0) and done == []

    asyncio.run(run())


def test_link_stack_takes_the_last_given_and_opens_one_when_none_is_idle(impl: Implementation) -> None:
    """``LinkStack``: ``take`` pops the endpoint's most recently given link (none idle: the subclass's ``_grow``);
    a configuration other than the stack's resets it first; ``give`` keeps a link of the stack's version, arms
    the sweep once, and aborts a closed link or one of another version."""
    calls: list[Any] = []

    class Stack(impl.hotlink.LinkStack):  # type: ignore[misc,name-defined]
        def _reset(self, config: Any) -> None:
            calls.append(("reset", config))
            self._idle.clear()
            self._config = config

        def _grow(self, key: tuple[str, str], pool: Any) -> None:
            calls.append(("grow", key))

        def _sweep(self) -> None:
            calls.append("sweep")

    class Loop:
        def time(self) -> float:
            return 12.5

        def call_later(self, delay: float, callback: Any) -> str:
            calls.append(("timer", delay))
            return "armed"

    class Link(impl.hotlink.LinkProtocol):  # type: ignore[misc,name-defined]
        def abort(self) -> None:
            self.aborted = True

    def link(config: Any, closed: bool = False) -> Any:
        made = Link()
        made.closed, made.config, made.loop, made.key, made.aborted = closed, config, Loop(), ("ds_0", "primary"), False
        return made

    pool = SimpleNamespace(endpoint=SimpleNamespace(name="primary"))
    stack = Stack()
    stack.idle_seconds = 3.0
    assert stack.take("ds_0", pool, "v1") is None
    assert calls == [("reset", "v1"), ("grow", ("ds_0", "primary"))]
    first, second = link("v1"), link("v1")
    stack.give(first)
    stack.give(second)
    assert calls[2:] == [("timer", 3.0)] and second.idle_since == 12.5 and stack._sweeper == "armed"
    assert stack.take("ds_0", pool, "v1") is second and stack.take("ds_0", pool, "v1") is first
    stale, closed = link("v0"), link("v1", closed=True)
    stack.give(stale)
    stack.give(closed)
    assert stale.aborted and closed.aborted and not stack._idle[("ds_0", "primary")]
    stack.give(first)
    assert stack.take("ds_0", pool, "v2") is None  # a new version: the idle links reset first
    assert calls[3:] == [("reset", "v2"), ("grow", ("ds_0", "primary"))]


@pytest.mark.parametrize(("observer", "threshold", "statement", "observed"), [
    (None, float("inf"), "select", False),  # quick, nobody listening: not observed (Engine.observed_rows's first test)
    (None, 0.0, "select", True),  # at or over the slow-SQL threshold: the log hears of it
    (None, float("inf"), "ddl", True),  # a DDL is always observed
    ("metrics", float("inf"), "select", True),  # an observer hears of every statement
])  # fmt: skip
def test_the_common_end_observes_what_engine_observed_rows_would(impl: Implementation, observer: Any, threshold: float,
                                                                  statement: str, observed: bool) -> None:  # fmt: skip
    async def run() -> None:
        runtime, ends, done = _Runtime(), [], []  # type: ignore[var-annotated]
        runtime.executor.engine.observer = observer
        runtime.slow_sql.threshold_s = threshold
        link = _Link(asyncio.get_running_loop())
        hot = _statement(impl, runtime, link, ends, done)
        hot.plan.statement = statement
        hot.start("qmark", b"\x00\x01\x08\x00\x05\x00\x00\x00\x00\x00\x00\x00")
        hot.relay.rows = 2
        hot.ended(link, impl.relay.DONE)
        assert (("observed", 2) in runtime.calls) == observed and done == [1]

    asyncio.run(run())
