"""The ``hotmany`` unit's ``AnswerEnd`` (both twins): where an answer of rows ends, as the relay reads it.

Random answers — text rows, NULLs, a row of 16 MiB - 1 bytes that goes on in the next packet (whose first byte
may look like a closing packet), no rows, both EOF forms, the closing flags — fed whole, byte by byte and in
random chunks, with the next answer's bytes behind them: the end and the closing flags must be the relay's
(``ResultRelay``, which frames the same answer), and what the relay does not pass on (an error or OK packet,
a packet out of sequence, more result sets, LOCAL INFILE, an error among the rows) must stop the finder.
"""

from __future__ import annotations

import random
from typing import Any

from ddm_core._fast import relay_py
from ddm_core._fast.relay_py import _encode_lenenc
from test_ordered import DEF, _frame

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
