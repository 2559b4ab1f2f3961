"""The ``relay`` unit (both twins): a data source's answer re-framed for a client, byte for byte.

Generated answers (column definitions, rows, rows of 16 MB and more, an error mid-rows, OK and error
answers, malformed ones) are cut at random points and fed to each twin; both must give the same
bytes and states, and the output must be the client's stream: the header payloads handed in, the
rows' payloads untouched, sequence ids counted from the client's command, closing packets in the
form the client negotiated. A real server's answers are relayed too and read back by PyMySQL's rules.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddm_core._fast import load
from ddm_core.execute.mysql_connect import open_mysql
from raw_mysql import lenenc_bytes, text_row

TWINS = [load("python").relay]
try:
    TWINS.append(load("cython").relay)
except ImportError:  # not built: the pure twin alone (the compiled pass requires it)
    pass

R = TWINS[0]
MAX = 0xFFFFFF
STATUS = 0x0002  # SERVER_STATUS_AUTOCOMMIT
HEADER = [b"\x02", b"client-def-1", b"client-def-2"]


def _frame(payloads: list[bytes], seq: int = 1) -> bytes:
    out = bytearray()
    for p in payloads:
        out += len(p).to_bytes(3, "little") + bytes([seq & 0xFF]) + p
        seq += 1
    return bytes(out)


def _packets(stream: bytes) -> list[tuple[int, bytes]]:
    out, at = [], 0
    while at < len(stream):
        length = int.from_bytes(stream[at : at + 3], "little")
        out.append((stream[at + 3], stream[at + 4 : at + 4 + length]))
        at += 4 + length
    assert at == len(stream)
    return out


def _row(values: list[bytes | None]) -> bytes:
    return b"".join(b"\xfb" if v is None else lenenc_bytes(len(v)) + v for v in values)


def _answer(rows: list[bytes], backend_eof: bool, end: bytes | None = None) -> list[bytes]:
    """A backend's result: 2 definitions, rows, and its closing packet (or ``end``)."""
    head = [b"\x02", b"backend-def-a", b"backend-def-b"] + ([b"\xfe\x00\x00\x22\x00"] if backend_eof else [])
    if end is None:
        end = b"\xfe\x00\x00\x22\x00" if backend_eof else b"\xfe\x00\x00\x22\x00\x00\x00"
    return head + rows + [end]


def _run(twin: Any, stream: bytes, cuts: list[int], *, seq: int, client_eof: bool, backend_eof: bool,
         count_rows: bool = True) -> tuple[bytes, Any]:  # fmt: skip
    relay = twin.ResultRelay(seq, client_eof, backend_eof, count_rows)
    out = bytearray()
    points = sorted({0, len(stream), *(c % (len(stream) + 1) for c in cuts)})
    for a, b in zip(points, points[1:]):
        state = relay.feed(stream[a:b])
        if state == twin.HEADER:
            assert [bytes(c) for c in relay.columns] == [b"backend-def-a", b"backend-def-b"]
            state = relay.header(list(HEADER), STATUS)
        out += relay.take()
        if state not in (twin.FIRST, twin.ROWS):
            break
    return bytes(out), relay


rows_strategy = st.lists(
    st.lists(st.one_of(st.none(), st.binary(max_size=40)), min_size=2, max_size=2).map(_row), max_size=30
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(rows=rows_strategy, cuts=st.lists(st.integers(0, 10_000), max_size=6), seq=st.integers(1, 255),
       client_eof=st.booleans(), backend_eof=st.booleans(), count_rows=st.booleans())  # fmt: skip
def test_a_result_is_reframed_alike_by_both_twins(rows: list[bytes], cuts: list[int], seq: int, client_eof: bool,
                                                  backend_eof: bool, count_rows: bool) -> None:  # fmt: skip
    stream = _frame(_answer(rows, backend_eof))
    outs = [_run(t, stream, cuts, seq=seq, client_eof=client_eof, backend_eof=backend_eof, count_rows=count_rows)
            for t in TWINS]  # fmt: skip
    out, relay = outs[0]
    assert all(o == out and r.state == R.DONE and r.rows == len(rows) and r.status == 0x22 for o, r in outs)
    packets = _packets(out)
    assert [s for s, _ in packets] == [(seq + i) & 0xFF for i in range(len(packets))]  # counted from the command
    payloads = [p for _, p in packets]
    eof = b"\xfe\x00\x00" + STATUS.to_bytes(2, "little")
    middle = [eof] if client_eof else []
    affected = len(rows) if count_rows else 0
    end = eof if client_eof else b"\xfe" + lenenc_bytes(affected) + b"\x00" + STATUS.to_bytes(2, "little") + b"\x00\x00"
    assert payloads == HEADER + middle + rows + [end]


class _Sink:
    """What pump writes to: an asyncio transport's write / is_closing, the bytes kept."""

    def __init__(self, closing: bool = False) -> None:
        self.out = bytearray()
        self.writes = 0
        self.closing = closing

    def write(self, data: bytes) -> None:
        assert data, "an empty write"
        self.out += data
        self.writes += 1

    def is_closing(self) -> bool:
        return self.closing


@settings(max_examples=100, deadline=None, derandomize=True)
@given(rows=rows_strategy, cuts=st.lists(st.integers(0, 10_000), max_size=6), client_eof=st.booleans(),
       backend_eof=st.booleans())  # fmt: skip
def test_pump_writes_what_feed_header_and_take_frame(rows: list[bytes], cuts: list[int], client_eof: bool,
                                                     backend_eof: bool) -> None:  # fmt: skip
    stream = _frame(_answer(rows, backend_eof))
    expected, _ = _run(TWINS[0], stream, cuts, seq=3, client_eof=client_eof, backend_eof=backend_eof)
    points = sorted({0, len(stream), *(c % (len(stream) + 1) for c in cuts)})
    for twin in TWINS:
        relay, sink, closed = twin.ResultRelay(3, client_eof, backend_eof, True), _Sink(), _Sink(closing=True)
        asked: list[list[bytes]] = []

        def header_for(columns: list[bytes]) -> tuple[list[bytes], int]:
            asked.append([bytes(c) for c in columns])
            return list(HEADER), STATUS

        states = [relay.pump(stream[a:b], sink, header_for) for a, b in zip(points, points[1:])]
        assert bytes(sink.out) == expected and states[-1] == twin.DONE and relay.rows == len(rows)
        assert asked == [[b"backend-def-a", b"backend-def-b"]]  # once, at the header
        assert all(s in (twin.FIRST, twin.ROWS) for s in states[:-1])
        # A closing client is written nothing; the answer is still read to its end
        other = twin.ResultRelay(3, client_eof, backend_eof, True)
        assert other.pump(stream, closed, header_for) == twin.DONE and closed.writes == 0


def test_rows_of_16_mb_and_more_pass_packet_by_packet() -> None:
    big = _row([b"x" * (MAX + 10), b"y"])  # one row: a full packet, then the rest
    pieces = [big[:MAX], big[MAX:]]
    small = _row([b"a", None])
    stream = _frame([b"\x02", b"backend-def-a", b"backend-def-b", b"\xfe\x00\x00\x02\x00", *pieces, small,
                     b"\xfe\x00\x00\x02\x00"])  # fmt: skip
    for twin in TWINS:
        out, relay = _run(twin, stream, [5, MAX // 2, MAX + 40], seq=1, client_eof=True, backend_eof=True)
        assert relay.state == twin.DONE and relay.rows == 2
        payloads = [p for _, p in _packets(out)]
        assert payloads[4:7] == [pieces[0], pieces[1], small]


@pytest.mark.parametrize("backend_eof", [True, False])
def test_ok_error_and_an_error_mid_rows(backend_eof: bool) -> None:
    ok = b"\x00\x01\x07\x02\x00\x01\x00"  # 1 affected, insert id 7, status 2, 1 warning
    error = b"\xff\x26\x04#23000Duplicate entry"
    for twin in TWINS:
        out, relay = _run(twin, _frame([ok]), [], seq=1, client_eof=True, backend_eof=backend_eof)
        assert (relay.state, out, bytes(relay.first)) == (twin.OK, b"", ok)
        assert twin.ok_fields(ok) == (1, 7, 2, 1) and twin.ok_fields(b"\x00\xfc") == (-1, -1, -1, -1)
        out, relay = _run(twin, _frame([error]), [3], seq=1, client_eof=True, backend_eof=backend_eof)
        assert (relay.state, out, bytes(relay.first)) == (twin.ERROR, b"", error)
        stream = _frame(_answer([_row([b"1", b"2"])], backend_eof, end=error))
        out, relay = _run(twin, stream, [7], seq=1, client_eof=False, backend_eof=backend_eof)
        assert relay.state == twin.ERROR and bytes(relay.first) == error and relay.rows == 1
        assert relay.seq == 1 + len(_packets(out))  # where the client's error packet goes


@pytest.mark.parametrize("case", ["local infile", "out of sequence", "more results", "no eof", "empty"])
def test_what_cannot_be_relayed_is_unexpected(case: str) -> None:
    more = b"\xfe\x00\x00\x0a\x00"  # SERVER_MORE_RESULTS_EXISTS
    streams = {
        "local infile": _frame([b"\xfbfile.csv"]),
        "out of sequence": _frame([b"\x02"], seq=2),
        "more results": _frame(_answer([], True, end=more)),
        "no eof": _frame([b"\x01", b"def", b"not an eof"]),
        "empty": _frame([b""]),
    }
    for twin in TWINS:
        _, relay = _run(twin, streams[case], [], seq=1, client_eof=True, backend_eof=True)
        assert relay.state == twin.UNEXPECTED


def test_header_is_called_once_at_header() -> None:
    for twin in TWINS:
        relay = twin.ResultRelay(1, True, True, True)
        with pytest.raises(ValueError, match="not HEADER"):
            relay.header([b"\x01"], 0)


@pytest.mark.parametrize("sql", [
    "SELECT 1 AS a, 'x' AS b, NULL AS c, CAST(2.5 AS DECIMAL(4,2)) AS d, DATE '2026-12-05' AS e",
    "SELECT seq, REPEAT('z', seq) FROM seq_1_to_300",
    "SELECT 1 FROM DUAL WHERE 1 = 0",
    "SELECT no_such_column",
])  # fmt: skip
def test_a_real_servers_answer_relays_to_its_rows(sql: str) -> None:
    """MariaDB's own answer, relayed: the rows' payloads are the server's, the error its error."""
    conn = open_mysql(host="127.0.0.1", port=3306, user="root", password="", database=None, connect_timeout=5,
                      socket_timeout=10)  # fmt: skip
    try:
        with conn.cursor() as cur:
            try:
                cur.execute(sql)
                expected: Any = [tuple(None if v is None else str(v) for v in row) for row in cur.fetchall()]
            except Exception as exc:  # noqa: BLE001  # PyMySQL's error for the same answer
                expected = exc.args[0]
        for twin in TWINS:
            conn._execute_command(0x03, sql.encode())
            relay = twin.ResultRelay(1, True, True, True)
            out = bytearray()
            state = twin.FIRST
            while state in (twin.FIRST, twin.ROWS):
                state = relay.feed(conn._sock.recv(65536))
                if state == twin.HEADER:
                    state = relay.header([lenenc_bytes(len(relay.columns))] + list(relay.columns), STATUS)
                out += relay.take()
            if isinstance(expected, int):
                assert state == twin.ERROR and int.from_bytes(relay.first[1:3], "little") == expected
                continue
            assert state == twin.DONE and relay.rows == len(expected)
            payloads = [p for _, p in _packets(bytes(out))]
            count = payloads[0][0]
            assert [text_row(p, count) for p in payloads[count + 2 : -1]] == expected
    finally:
        conn.close()


def _concatenated(twin: Any, streams: list[bytes], cuts: list[int], *, client_eof: bool, backend_eof: bool,
                  shared: bool) -> tuple[bytes, Any]:  # fmt: skip
    """Relay ``streams`` as one answer: fed answer by answer (each its own connection's bytes), or ``shared``:
    all of them in one byte stream, as one connection answering its pipelined commands."""
    relay = twin.ResultRelay(1, client_eof, backend_eof, True)
    relay.concatenate(len(streams))
    out = bytearray()
    pieces = [b"".join(streams)] if shared else streams
    for n, stream in enumerate(pieces):
        points = sorted({0, len(stream), *(c % (len(stream) + 1) for c in cuts)})
        for a, b in zip(points, points[1:]):
            state = relay.feed(stream[a:b])
            if state == twin.HEADER:
                state = relay.header(list(HEADER), STATUS)
            out += relay.take()
        if relay.state not in (twin.FIRST, twin.ROWS):
            break
        assert shared or relay.unit == n + 1  # an answer's end moves to the next
    return bytes(out), relay


@settings(max_examples=200, deadline=None, derandomize=True)
@given(answers=st.lists(rows_strategy, min_size=1, max_size=4), cuts=st.lists(st.integers(0, 10_000), max_size=6),
       client_eof=st.booleans(), backend_eof=st.booleans(), shared=st.booleans())  # fmt: skip
def test_concatenated_answers_relay_as_one(answers: list[list[bytes]], cuts: list[int], client_eof: bool,
                                           backend_eof: bool, shared: bool) -> None:  # fmt: skip
    """Several answers relayed as one: the first one's header, every row in turn, one closing packet, and
    the same bytes as one answer holding all the rows."""
    streams = [_frame(_answer(rows, backend_eof)) for rows in answers]
    everything = [row for rows in answers for row in rows]
    single, _ = _run(TWINS[0], _frame(_answer(everything, backend_eof)), [], seq=1, client_eof=client_eof,
                     backend_eof=backend_eof)  # fmt: skip
    for twin in TWINS:
        out, relay = _concatenated(twin, streams, cuts, client_eof=client_eof, backend_eof=backend_eof, shared=shared)
        assert out == single and relay.state == twin.DONE and relay.rows == len(everything)
        assert relay.statuses == ([0x22] * len(answers) if len(answers) > 1 else [])
        assert [bytes(c) for c in relay.columns] == [b"backend-def-a", b"backend-def-b"]  # the first answer's


@pytest.mark.parametrize("backend_eof", [True, False])
def test_a_concatenations_later_answer_may_fail_or_differ(backend_eof: bool) -> None:
    error = b"\xff\x7a\x04#42S02Table 'ds_1.t_1' doesn't exist"
    first = _frame(_answer([_row([b"1", b"2"])], backend_eof))
    other = _frame([b"\x01", b"backend-def-x"] + ([b"\xfe\x00\x00\x22\x00"] if backend_eof else []) + [b"\xfe\x00\x00\x22\x00\x00\x00"])
    for twin in TWINS:
        out, relay = _concatenated(twin, [first, _frame([error]), first], [], client_eof=True, backend_eof=backend_eof,
                                   shared=False)  # fmt: skip
        assert relay.state == twin.ERROR and bytes(relay.first) == error and relay.unit == 1 and relay.rows == 1
        assert relay.seq == 1 + len(_packets(out))  # the client's error packet follows the rows relayed
        _, relay = _concatenated(twin, [first, other], [], client_eof=True, backend_eof=backend_eof, shared=False)
        assert relay.state == twin.MISMATCH and relay.unit == 1
        # The bytes past an answer that failed are the next one's on that connection
        _, relay = _concatenated(twin, [_frame([error]), first], [], client_eof=True, backend_eof=backend_eof,
                                 shared=True)  # fmt: skip
        assert relay.state == twin.ERROR and relay.rest() == first and relay.rest() == b""
        late = twin.ResultRelay(1, True, backend_eof, True)
        late.feed(b"\x01")
        with pytest.raises(ValueError, match="after the answer began"):
            late.concatenate(2)
