"""The ``ordered`` unit: text answers merged in order by raw keys, both twins, against the decoded merge's order.

Random answers (1-3 units, each sorted as its data source would sort it) of two columns of every key kind,
with NULLs, ties under case folding, trailing spaces, control characters, 0x00 bytes, non-ASCII text and
integer texts at the ends of their ranges; random ORDER BY directions, DISTINCT, OFFSET and LIMIT. The
compiled and the pure twin must return the same bytes, and where they merge (not ``None``) the rows must be
the decoded merge's: values compared by the collation keys the merge uses (merge/collation.py) or as
integers, NULL first ascending, ties in the units' order, DISTINCT keeping a run's first row. A value a kind
cannot key must make them decline. The answer's framing (sequence ids, header, closing packet) is checked
packet by packet.
"""

from __future__ import annotations

import random
from functools import cmp_to_key
from typing import Any, Callable

import pytest

from ddm_core._fast import ordered_py
from ddm_core._fast.relay_py import _encode_lenenc, _lenenc
from ddm_core.merge.collation import collation_for
from test_relay import _packets

K = ordered_py
#: The collation each string kind reproduces, for the reference keys (None: bytes order)
COLLATION = {K.KEY_PAD_FOLD: 45, K.KEY_PAD: 46, K.KEY_ASCII_FOLD: 1069, K.KEY_ASCII: 1070}
ALPHABET = [b"a", b"A", b"b", b"B", b" ", b"z", b"_", b"~", b"0", b"\t", b"\x00", b"\xc3\xa9"]
DEF = b"\x03def\x00\x00\x00\x01c\x00\x0c\x2d\x00\x78\x00\x00\x00\xfe\x00\x00\x00\x00\x00"


def _frame(payload: bytes, seq: int) -> bytes:
    return len(payload).to_bytes(3, "little") + bytes((seq & 0xFF,)) + payload


def _answer(rows: list[tuple[bytes | None, ...]], width: int, eof: bool) -> bytes:
    packets = [bytes((width,))] + [DEF] * width + ([b"\xfe\x00\x00\x02\x00"] if eof else [])
    packets += [b"".join(b"\xfb" if v is None else _encode_lenenc(len(v)) + v for v in row) for row in rows]
    packets.append(b"\xfe\x00\x00\x22\x00" if eof else b"\xfe\x00\x00\x22\x00\x00\x00")
    return b"".join(_frame(p, i + 1) for i, p in enumerate(packets))


def _values(payload: bytes, width: int) -> tuple[bytes | None, ...]:
    values: list[bytes | None] = []
    at = 0
    for _ in range(width):
        if payload[at] == 0xFB:
            values.append(None)
            at += 1
            continue
        size, at = _lenenc(payload, at)
        values.append(payload[at : at + size])
        at += size
    return tuple(values)


def _reference_key(kind: int) -> Callable[[bytes], Any] | None:
    """The decoded merge's key for a value of ``kind``; raises ValueError where the kind must decline."""
    if kind in (K.KEY_SIGNED, K.KEY_UNSIGNED):
        def number(value: bytes) -> int:
            n = int(value)  # ValueError: not an integer's text
            low, high = (-(1 << 63), 1 << 63) if kind == K.KEY_SIGNED else (0, 1 << 64)
            if not (low <= n < high) or value.strip() != value or value[:1] == b"+":
                raise ValueError(value)
            return n
        return number
    if kind == K.KEY_BYTES:
        return lambda value: value

    collation = collation_for(COLLATION[kind], "c")

    def text(value: bytes) -> Any:
        if not value.isascii():
            raise ValueError(value)
        if kind in (K.KEY_PAD, K.KEY_PAD_FOLD) and value and min(value) < 0x20:
            raise ValueError(value)
        string = value.decode()
        return string if collation.key is None else collation.key(string)
    return text


def _reference(answers: list[list[tuple[bytes | None, ...]]], keys: list[tuple[int, int, bool]], distinct: bool,
               offset: int, limit: int) -> list[tuple[bytes | None, ...]]:  # fmt: skip
    """The decoded merge's rows: stable, NULL first ascending (last descending), each column by its key."""
    rows = [row for answer in answers for row in answer]
    makers = [(column, _reference_key(kind), descending) for column, kind, descending in keys]
    keyed = [[None if row[c] is None else make(row[c]) for c, make, _ in makers] for row in rows]  # type: ignore[misc]

    def compare(a: int, b: int) -> int:
        for n, (_, _, descending) in enumerate(makers):
            x, y = keyed[a][n], keyed[b][n]
            order = 0 if x == y else -1 if x is None else 1 if y is None else -1 if x < y else 1
            if order:
                return -order if descending else order
        return 0

    order = sorted(range(len(rows)), key=cmp_to_key(compare))
    if distinct:
        order = [i for n, i in enumerate(order) if n == 0 or compare(order[n - 1], i) != 0]
    order = order[offset:] if limit < 0 else order[offset : offset + limit]
    return [rows[i] for i in order]


def _value(rnd: random.Random, kind: int) -> bytes | None:
    if rnd.random() < 0.1:
        return None
    if kind == K.KEY_SIGNED:
        return str(rnd.choice([rnd.randint(-9, 9), -(1 << 63), (1 << 63) - 1, 1 << 63])).encode()
    if kind == K.KEY_UNSIGNED:
        return str(rnd.choice([rnd.randint(0, 9), (1 << 64) - 1, 1 << 64, -1])).encode()
    if rnd.random() < 0.5:  # short: ties and declines are likely
        return b"".join(rnd.choice(ALPHABET) for _ in range(rnd.randint(0, 4)))
    # long (the compiled unit reads eight bytes at a time): mostly keyable, now and then one byte that is not
    chars = [rnd.choice(ALPHABET[:9]) for _ in range(rnd.randint(7, 30))]
    if rnd.random() < 0.15:
        chars.insert(rnd.randint(0, len(chars)), rnd.choice(ALPHABET[9:]))
    return b"".join(chars)


def test_both_twins_merge_as_the_decoded_merge_orders(impl: Any) -> None:
    rnd = random.Random(2812)
    merged = declined = 0
    for trial in range(4000):
        kinds = [rnd.choice(range(7)) for _ in range(2)]
        if rnd.random() < 0.5:  # values each kind keys (else: declines on the way)
            kinds = [k if k in (K.KEY_BYTES, K.KEY_SIGNED, K.KEY_UNSIGNED) else K.KEY_BYTES for k in kinds]
        keys = [(c, kinds[c], rnd.random() < 0.5) for c in rnd.sample([0, 1], rnd.randint(1, 2))]
        distinct = rnd.random() < 0.3 and len(keys) == 2
        offset, limit, eof = rnd.randint(0, 2), rnd.choice([-1, 0, 1, 3, 50]), trial % 2 == 0
        visible = -1 if distinct else rnd.choice([-1, -1, 1, 2])  # 1: column 1 was a sort key only
        units = [[(_value(rnd, kinds[0]), _value(rnd, kinds[1])) for _ in range(rnd.randint(0, 6))]
                 for _ in range(rnd.randint(1, 3))]  # fmt: skip
        try:
            units = [_reference([unit], keys, False, 0, -1) for unit in units]  # each sorted by its data source
            expected: list[Any] | None = _reference(units, keys, distinct, offset, limit)
        except ValueError:
            expected = None  # a value its kind cannot key
        answers = [_answer(unit, 2, eof) for unit in units]
        out = ordered_py.merge_ordered(answers, eof, keys, distinct, offset, limit, visible)
        compiled = impl.ordered.merge_ordered(answers, eof, keys, distinct, offset, limit, visible)
        assert compiled == out, (trial, keys, units)
        if expected is None:
            assert out is None, (trial, keys, units)
            declined += 1
            continue
        assert out is not None, (trial, keys, units)
        merged += 1
        packets = _packets(out)
        assert [seq for seq, _ in packets] == list(range(1, len(packets) + 1))
        width = 2 if visible < 0 else visible
        header = 1 + width + eof  # count, the definitions, EOF
        assert [p for _, p in packets[:header]] == [bytes((width,)), *[DEF] * width, *[b"\xfe\x00\x00\x02\x00"] * eof]
        assert packets[-1][1] == _packets(answers[0])[-1][1]  # the first answer's closing packet
        assert [_values(p, width) for _, p in packets[header:-1]] == [row[:width] for row in expected], (trial, keys)
        assert all(len(p) == sum(1 if v is None else len(_encode_lenenc(len(v))) + len(v) for v in _values(p, width))
                   for _, p in packets[header:-1])  # nothing after the visible columns
    assert merged > 1000 and declined > 300, (merged, declined)


@pytest.mark.parametrize("bad", [
    b"\x01\x00\x00\x01\x00",  # an OK packet, not a result set
    b"\x07\x00\x00\x01\xff\x15\x04#28000",  # an error
    _answer([(b"a",)], 1, True)[:-3],  # cut short
])  # fmt: skip
def test_what_is_not_a_whole_result_set_is_declined(impl: Any, bad: bytes) -> None:
    good = _answer([(b"b",)], 1, True)
    for answers in ([bad], [good, bad]):
        assert impl.ordered.merge_ordered(answers, True, [(0, K.KEY_BYTES, False)], False, 0, -1) is None


def test_answers_of_other_widths_and_keys_past_the_row_are_declined(impl: Any) -> None:
    merge = impl.ordered.merge_ordered
    one, two = _answer([(b"a",)], 1, True), _answer([(b"a", b"b")], 2, True)
    assert merge([one, two], True, [(0, K.KEY_BYTES, False)], False, 0, -1) is None
    assert merge([one], True, [(1, K.KEY_BYTES, False)], False, 0, -1) is None
    assert merge([one], True, [], False, 0, -1) is None
    assert merge([], True, [(0, K.KEY_BYTES, False)], False, 0, -1) is None


def test_both_twins_split_answers_into_rows_of_values(impl: Any) -> None:
    """``text_rows`` (an aggregates' fold reads the values): every answer's rows in order, NULLs as None, the first
    answer's definitions, header end and closing payload; an answer that is not a result set of text rows, or
    column counts that differ, give None — the same in both twins."""
    rnd = random.Random(7)
    for trial in range(2000):
        width, eof = rnd.randint(1, 3), trial % 2 == 0
        units = [[tuple(_value(rnd, K.KEY_BYTES) for _ in range(width)) for _ in range(rnd.randint(0, 4))]
                 for _ in range(rnd.randint(1, 3))]  # fmt: skip
        answers = [_answer(unit, width, eof) for unit in units]
        first = [payload for _, payload in _packets(answers[0])]
        header = 1 + width + (1 if eof else 0)
        want = ([DEF] * width, sum(4 + len(p) for p in first[:header]), [list(row) for unit in units for row in unit],
                first[-1])  # fmt: skip
        assert impl.ordered.text_rows(answers, eof) == ordered_py.text_rows(answers, eof) == want, trial
    good = _answer([(b"1", None)], 2, True)
    for bad in (_answer([(b"1", None)], 1, True),  # another column count
                good[:-3],  # cut
                _frame(b"\xff\x10\x04#HY000no", 1),  # an error
                _answer([(b"1",)], 2, True)):  # a row with fewer values than columns  # fmt: skip
        assert impl.ordered.text_rows([good, bad], True) is None
        assert ordered_py.text_rows([good, bad], True) is None
    assert impl.ordered.text_rows([], True) is None
