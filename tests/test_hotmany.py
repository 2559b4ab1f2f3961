"""The ``hotmany`` unit (both twins): ``AnswerEnd``, where an answer of rows ends as the relay reads it; and a
multi-unit read on a transaction's pins reading the later parts' answers ahead while it waits for an earlier one.

Random answers — text rows, NULLs, a row of 16 MiB - 1 bytes that goes on in the next packet (whose first byte
may look like a closing packet), no rows, both EOF forms, the closing flags — fed whole, byte by byte and in
random chunks, with the next answer's bytes behind them: the end and the closing flags must be the relay's
(``ResultRelay``, which frames the same answer), and what the relay does not pass on (an error or OK packet,
a packet out of sequence, more result sets, LOCAL INFILE, an error among the rows) must stop the finder.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
from types import SimpleNamespace
from typing import Any, Iterator

from ddm_core._fast import relay_py
from ddm_core._fast.relay_py import _encode_lenenc
from test_ordered import DEF, _frame
from test_pin_watches import _turns, loop  # noqa: F401  # the loop fixture: uvloop and asyncio's

MAX = 0xFFFFFF


def _answer(rng: random.Random, eof: bool, status: int, long_row: bool = False) -> tuple[bytes, int]:
    """A result set's bytes (sequence ids from 1) and its row count."""
    width = rng.randint(1, 3)
    packets = [bytes((width,))] + [DEF] * width + ([b"\xfe\x00\x00\x02\x00"] if eof else [])
    rows = rng.randint(0, 5)
    for _ in range(rows):
        values = [None if rng.random() < 0.2 else bytes(rng.randrange(256) for _ in range(rng.randint(0, 9)))
                  for _ in range(width)]  # fmt: skip
        packets.append(b"".join(b"\xfb" if v is None else _encode_lenenc(len(v)) + v for v in values))
    if long_row:  # 16 MiB - 1 bytes: the row goes on in the next packet, which begins like an EOF
        packets += [b"\xfc" + bytes(MAX - 1), b"\xfe\x00\x00"]
        rows += 1
    flags = status.to_bytes(2, "little")
    packets.append(b"\xfe\x00\x00" + flags if eof else b"\xfe\x00\x00" + flags + b"\x00\x00")
    return b"".join(_frame(p, i + 1) for i, p in enumerate(packets)), rows


def _chunks(rng: random.Random, data: bytes) -> list[bytes]:
    cuts = sorted(rng.sample(range(1, len(data)), min(len(data) - 1, rng.randint(0, 6))))
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)])]


def _fed(finder: Any, chunks: list[bytes]) -> int:
    state = relay_py.FIRST
    for chunk in chunks:
        state = finder.feed(chunk)
        if state not in (relay_py.FIRST, relay_py.ROWS):
            break
    return int(state)


def test_both_twins_end_an_answer_where_the_relay_does(impl: Any) -> None:
    rng = random.Random(11)
    for trial in range(1500):
        eof, status = trial % 2 == 0, rng.choice([0x0002, 0x0003, 0x0022, 0x4002])
        answer, _ = _answer(rng, eof, status)
        behind, _ = _answer(rng, eof, 0x0002)  # the next answer on that connection
        chunks = [answer + behind] if trial % 3 == 0 else _chunks(rng, answer + behind)
        finder = impl.hotmany.AnswerEnd(eof)
        assert _fed(finder, chunks) == relay_py.DONE, trial
        relay = relay_py.ResultRelay(1, True, eof, True)
        state = relay.feed(answer)
        while state == relay_py.HEADER:
            state = relay.header([], 0)
        assert state == relay_py.DONE and not relay.rest()
        assert (finder.end, finder.status) == (len(answer), relay.status), trial
        assert bytes(finder.buf[finder.end :]) == (answer + behind)[len(answer) : len(finder.buf)]


def test_a_row_of_16_mib_goes_on_in_the_next_packet(impl: Any) -> None:
    rng = random.Random(3)
    for eof in (True, False):
        answer, _ = _answer(rng, eof, 0x0002, long_row=True)
        finder = impl.hotmany.AnswerEnd(eof)
        assert _fed(finder, _chunks(rng, answer)) == relay_py.DONE
        assert finder.end == len(answer)


def test_what_the_relay_does_not_pass_on_stops_it(impl: Any) -> None:
    rng = random.Random(5)
    good, _ = _answer(rng, True, 0x0002)
    error = _frame(b"\xff\x7a\x04#42S02no such table", 1)
    ok = _frame(b"\x00\x00\x00\x02\x00\x00\x00", 1)
    infile = _frame(b"\xfbfile.csv", 1)
    out_of_sequence = _frame(good[4 : 4 + good[0]], 2) + good[4 + good[0] :]
    more = _answer(rng, True, 0x000A)[0]  # SERVER_MORE_RESULTS_EXISTS
    packets = [bytes((1,)), DEF, b"\xfe\x00\x00\x02\x00", b"\x011", b"\xff\x7a\x04#HY000cut"]
    error_after_rows = b"".join(_frame(p, i + 1) for i, p in enumerate(packets))
    for bad in (error, ok, infile, out_of_sequence, more, error_after_rows):
        assert _fed(impl.hotmany.AnswerEnd(True), _chunks(rng, bad)) == -1, bad[:12]
    assert _fed(impl.hotmany.AnswerEnd(False), [ok]) == -1


class _Driver:
    relay_eof = True

    @staticmethod
    def relay_socket(raw: socket.socket) -> socket.socket:
        return raw


@contextlib.contextmanager
def _pins(n: int) -> Iterator[tuple[Any, list[socket.socket]]]:
    """A sent read of ``n`` parts, each on a pin of its own (a socket pair: the data source's end is returned)."""
    pairs = [socket.socketpair() for _ in range(n)]
    parts = [SimpleNamespace(lane=i, fileno=pin.fileno(), pool=SimpleNamespace(driver=_Driver()),
                             borrowed=SimpleNamespace(raw=pin)) for i, (pin, _) in enumerate(pairs)]  # fmt: skip
    try:
        yield SimpleNamespace(parts=parts, answer_by=None), [server for _, server in pairs]
    finally:
        for pin, server in pairs:
            pin.close()
            server.close()


def _drained(sock: socket.socket) -> bool:
    try:
        sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except BlockingIOError:
        return True
    return False


def test_the_later_pins_answers_are_read_ahead_and_stay_watched(impl: Any, loop: asyncio.AbstractEventLoop) -> None:
    """The second pin's answer comes first: read as it comes (the pin's watch is not left woken with nobody
    reading it, which would give it up), then taken in its turn; both pins stay watched for the next read."""
    rng = random.Random(7)
    watches = impl.hotpin.PinWatches()
    deadlines = SimpleNamespace(running=set(), at=float("inf"))
    for _ in range(3):  # one registration per pin for every read
        with _pins(2) as (sent, servers):
            answers = [_answer(rng, True, 0x0002)[0] for _ in range(2)]
            taken: list[Any] = []
            reader = impl.hotmany.WholeAnswers(sent, loop, deadlines, lambda a, s: taken.append((a, s)),
                                               lambda carried: taken.append(carried))  # fmt: skip
            reader.watches = watches
            reader.start()
            servers[1].send(answers[1])
            _turns(loop)
            assert not taken and _drained(sent.parts[1].borrowed.raw)  # read ahead
            assert len(watches) == 2
            servers[0].send(answers[0])
            _turns(loop)
            assert taken == [(answers, [0x0002, 0x0002])]
            assert len(watches) == 2 and not deadlines.running
            watches.drop()


def test_a_read_handed_over_carries_what_was_read_ahead(impl: Any, loop: asyncio.AbstractEventLoop) -> None:
    """An error in an earlier pin's answer hands the read to the task's path with every byte read so far, the
    later pins' read ahead among them: as whole answers (from the start) and relayed (the header framed)."""
    rng = random.Random(9)
    error = _frame(b"\xff\x7a\x04#42S02no such table", 1)
    watches = impl.hotpin.PinWatches()
    deadlines = SimpleNamespace(running=set(), at=float("inf"))
    with _pins(2) as (sent, servers):
        later = _answer(rng, True, 0x0002)[0]
        over: list[Any] = []
        reader = impl.hotmany.WholeAnswers(sent, loop, deadlines, lambda a, s: over.append("taken"), over.append)
        reader.watches = watches
        reader.start()
        servers[1].send(later)
        _turns(loop)
        servers[0].send(error)
        _turns(loop)
        assert over == [{0: error, 1: later}]
        watches.drop()
    with _pins(3) as (sent, servers):
        first, last = _answer(rng, True, 0x0002)[0], _answer(rng, True, 0x0002)[0]
        relay = impl.relay.ResultRelay(1, True, True, True)
        framed: list[Any] = []
        reader = impl.hotmany.ConcatenatedAnswers(sent, loop, deadlines, relay, lambda columns: (columns, 2), None,
                                                  lambda out: framed.append("relayed"),
                                                  lambda state, out, ahead: framed.append((out, ahead)),
                                                  lambda carried: framed.append("fresh"))  # fmt: skip
        reader.watches = watches
        reader.start()
        servers[2].send(last)  # read ahead while the first pin is waited for
        _turns(loop)
        servers[0].send(first)
        _turns(loop)
        assert not framed
        servers[1].send(error)  # the second answer fails: the task's path relays on, the third's bytes first
        _turns(loop)
        assert len(framed) == 1 and framed[0][0] and framed[0][1] == {2: last}
        watches.drop()
