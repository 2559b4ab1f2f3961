"""Pure-Python twin of ``ordered.pyx``: a multi-unit read's text answers merged in order without decoding.

A read of several units whose merge is an ``ORDER BY`` (with a ``DISTINCT`` over exactly the sorted
columns, an ``OFFSET`` / ``LIMIT``, or neither) gets each unit's whole answer, sorted by its data source.
:func:`merge_ordered` puts their rows in the merge's order by comparing a *raw key* made from each row's
bytes — never a Python value — and returns one answer, as a data source would have sent it, that the
relay frames for the client (docs/proxy.md#ordered-reads-merged-undecoded): the first answer's column
count and definitions, the rows, the first answer's closing packet, sequence ids counted anew. Columns
after the ``visible`` ones (sort keys the router added to the select list) are dropped from the header and
from every row.

A key is one ``bytes`` per row, compared as bytes; each sorted column adds its part:

* NULL: ``00`` (MySQL sorts NULL first ascending, last descending);
* a value: ``01``, then by the column's ``KEY_*`` kind:

  * :data:`KEY_BYTES` — the bytes (binary strings, dates and times of one column's fixed width);
  * :data:`KEY_ASCII`, :data:`KEY_ASCII_FOLD` — a ``NO PAD`` collation's order for ASCII text: code point
    order, with ``FOLD`` the letters as upper case (``general_ci``, ``latin1_swedish_ci``: MySQL weighs an
    ASCII letter as its upper case, every other ASCII character as itself);
  * :data:`KEY_PAD`, :data:`KEY_PAD_FOLD` — the same for a ``PAD SPACE`` collation (trailing spaces
    ignored): text of the space and above only (a character below the space sorts before a padded string's
    end, which the bytes cannot say), its trailing spaces dropped;

  each followed by ``00 00``, a ``00`` inside written ``00 FF`` (a shorter string sorts first);
  :data:`KEY_SIGNED` / :data:`KEY_UNSIGNED` — an integer's text as 8 big-endian bytes (signed: offset by 2⁶³);
* descending: the column's part with every byte inverted.

Rows with equal keys keep the answers' order (the order the units were given in, then each answer's own):
the heap merge of the decoded path breaks ties the same way. A value the kind cannot key (text outside
ASCII, a control character under PAD SPACE, an integer's text that is not one) makes :func:`merge_ordered`
return ``None``: the read is decoded and merged as before, nothing having reached the client. So does an
answer it cannot read (an error or OK packet, a row of 16 MiB or more, column counts that differ).
"""

from __future__ import annotations

from ddm_core._fast.relay_py import _encode_lenenc, _lenenc

__all__ = [
    "merge_ordered", "text_rows", "KEY_BYTES", "KEY_ASCII", "KEY_ASCII_FOLD", "KEY_PAD", "KEY_PAD_FOLD", "KEY_SIGNED",
    "KEY_UNSIGNED",
]  # fmt: skip

KEY_BYTES = 0
KEY_ASCII = 1
KEY_ASCII_FOLD = 2
KEY_PAD = 3
KEY_PAD_FOLD = 4
KEY_SIGNED = 5
KEY_UNSIGNED = 6

_MAX_PAYLOAD = 0xFFFFFF
_NULL = 0xFB
_INVERT = bytes(range(255, -1, -1))
_SIGNED_OFFSET = 1 << 63
_U64 = 1 << 64


class _Unreadable(Exception):
    """An answer or a value :func:`merge_ordered` does not merge (the read is decoded instead)."""


def _packets(answer: bytes) -> list[tuple[int, int]]:
    """Each packet's (payload start, payload end) in ``answer``."""
    spans = []
    at, size = 0, len(answer)
    while at < size:
        if size - at < 4:
            raise _Unreadable
        length = answer[at] | answer[at + 1] << 8 | answer[at + 2] << 16
        if length == _MAX_PAYLOAD or at + 4 + length > size:
            raise _Unreadable  # a row of 16 MiB or more spans packets: decoded
        spans.append((at + 4, at + 4 + length))
        at += 4 + length
    return spans


def _split(answer: bytes, backend_eof: bool) -> tuple[int, int, list[tuple[int, int]], tuple[int, int]]:
    """An answer's column count, where its header packets end (bytes), its rows' and its closing packet's spans."""
    spans = _packets(answer)
    if not spans:
        raise _Unreadable
    start, end = spans[0]
    count, after = _lenenc(answer, start)
    head = answer[start] if end > start else -1
    if head in (0x00, 0xFF, _NULL) or count <= 0 or after != end:
        raise _Unreadable  # an OK, an error, LOCAL INFILE: not a result set
    rows_from = 1 + count + (1 if backend_eof else 0)
    if len(spans) < rows_from + 1:
        raise _Unreadable
    if backend_eof:
        eof = spans[rows_from - 1]
        if not _closing(answer, eof):
            raise _Unreadable
    closing = spans[-1]
    if not _closing(answer, closing):
        raise _Unreadable
    rows = spans[rows_from:-1]
    for row in rows:
        if _closing(answer, row) or (row[1] > row[0] and answer[row[0]] == 0xFF):
            raise _Unreadable  # a closing or error packet among the rows
    header_end = spans[rows_from - 1][1]
    return count, header_end, rows, closing


def _closing(answer: bytes, span: tuple[int, int]) -> bool:
    start, end = span
    return end > start and answer[start] == 0xFE and end - start < 9


def _fields(answer: bytes, start: int, end: int, wanted: int) -> list[bytes | None]:
    """The first ``wanted`` values of a text row (``None``: NULL)."""
    return [None if raw[0] == _NULL else raw[_lenenc(raw, 0)[1] :] for raw in _raw_fields(answer, start, end, wanted)]


def _part(value: bytes, kind: int) -> bytes:
    """A non-NULL value's part of a key (module docstring)."""
    if kind == KEY_SIGNED or kind == KEY_UNSIGNED:
        digits = value[1:] if value[:1] == b"-" else value
        if not digits or not digits.isdigit() or len(digits) > 20:
            raise _Unreadable
        number = int(value) + (_SIGNED_OFFSET if kind == KEY_SIGNED else 0)
        if not 0 <= number < _U64:
            raise _Unreadable
        return b"\x01" + number.to_bytes(8, "big")
    if kind != KEY_BYTES:
        if not value.isascii():
            raise _Unreadable
        if kind == KEY_PAD or kind == KEY_PAD_FOLD:
            if value and min(value) < 0x20:
                raise _Unreadable
            value = value.rstrip(b" ")
        if kind == KEY_ASCII_FOLD or kind == KEY_PAD_FOLD:
            value = value.upper()
    return b"\x01" + value.replace(b"\x00", b"\x00\xff") + b"\x00\x00"


def _key(values: list[bytes | None], keys: list[tuple[int, int, bool]]) -> bytes:
    parts = []
    for column, kind, descending in keys:
        value = values[column]
        part = b"\x00" if value is None else _part(value, kind)
        parts.append(part.translate(_INVERT) if descending else part)
    return b"".join(parts)


def _frame(payload: bytes, seq: int) -> bytes:
    return len(payload).to_bytes(3, "little") + bytes((seq & 0xFF,)) + payload


def _cut(row: bytes, visible: int) -> bytes:
    """A text row's first ``visible`` values (the sort columns the router added after them dropped)."""
    return row if visible < 0 else row[: sum(map(len, _raw_fields(row, 0, len(row), visible)))]


def _raw_fields(answer: bytes, start: int, end: int, wanted: int) -> list[bytes]:
    """The first ``wanted`` fields of a text row as written (length prefix included)."""
    fields = []
    at = start
    for _ in range(wanted):
        if at >= end:
            raise _Unreadable
        begin = at
        if answer[at] == _NULL:
            at += 1
        else:
            size, at = _lenenc(answer, at)
            if size < 0 or at + size > end:
                raise _Unreadable
            at += size
        fields.append(answer[begin:at])
    return fields


def merge_ordered(answers: list[bytes], backend_eof: bool, keys: list[tuple[int, int, bool]], distinct: bool,
                  offset: int, limit: int, visible: int = -1) -> bytes | None:  # fmt: skip
    """The rows of ``answers`` (whole text-protocol answers, in the units' order) in ``keys``' order, as one
    answer; ``None``: one cannot be merged so (module docstring).

    Args:
        backend_eof: The answers have an EOF packet after their column definitions (no ``CLIENT_DEPRECATE_EOF``).
        keys: ``(column, KEY_* kind, descending)`` per sorted column, in the ORDER BY's order.
        distinct: Keep only the first row of each run of rows with equal keys (the keys cover every column).
        offset: Rows to skip after that; ``limit``: rows to keep after them (-1: all).
        visible: The leading columns the answer keeps (-1: all); the others were sort keys only.
    """
    if not answers or not keys:
        return None
    wanted = max(column for column, _, _ in keys) + 1
    keyed: list[bytes] = []
    rows: list[bytes] = []
    try:
        count, header_end, _, closing = _split(answers[0], backend_eof)
        if wanted > count or visible > count or visible == 0:
            return None
        for answer in answers:
            width, _, spans, _ = _split(answer, backend_eof)
            if width != count:
                return None
            for start, end in spans:
                keyed.append(_key(_fields(answer, start, end, wanted), keys))
                rows.append(_cut(answer[start:end], visible if visible != count else -1))
    except _Unreadable:
        return None
    order = sorted(range(len(keyed)), key=keyed.__getitem__)
    if distinct:
        order = [i for n, i in enumerate(order) if n == 0 or keyed[i] != keyed[order[n - 1]]]
    order = order[offset:] if limit < 0 else order[offset : offset + limit]
    first = answers[0]
    if visible < 0 or visible == count:
        out = [first[:header_end]]
    else:  # the header of the visible columns alone
        spans = _packets(first)
        header = [_encode_lenenc(visible)] + [first[a:b] for a, b in spans[1 : 1 + visible]]
        header += [first[a:b] for a, b in spans[1 + count : 2 + count]] if backend_eof else []
        out = [_frame(payload, seq) for seq, payload in enumerate(header, 1)]
    seq = 2 + (count if visible < 0 else visible) + backend_eof  # after the column count, the definitions, their EOF
    for i in order:
        out.append(_frame(rows[i], seq))
        seq += 1
    out.append(_frame(first[closing[0] : closing[1]], seq))
    return b"".join(out)


def text_rows(answers: list[bytes], backend_eof: bool) -> tuple[list[bytes], int, list[list[bytes | None]], bytes] | None:
    """The text rows of ``answers`` (whole text-protocol answers, in the units' order), for a merge that reads their
    values (an aggregates' fold: proxy/folded_many.py): the first answer's column definitions (payloads), where its
    header packets end (bytes: the column count, the definitions, the EOF after them), every answer's rows in order
    — each its values, ``None`` for NULL — and the first answer's closing payload. ``None``: an answer that is not
    a result set of text rows (an error or OK packet, a row of 16 MiB or more, a row with fewer values than
    columns), or column counts that differ."""
    if not answers:
        return None
    rows: list[list[bytes | None]] = []
    try:
        count, header_end, _, closing = _split(answers[0], backend_eof)
        first = answers[0]
        spans = _packets(first)
        definitions = [first[start:end] for start, end in spans[1 : 1 + count]]
        for answer in answers:
            width, _, spans_of_rows, _ = _split(answer, backend_eof)
            if width != count:
                return None
            rows += [_fields(answer, start, end, count) for start, end in spans_of_rows]
    except _Unreadable:
        return None
    return definitions, header_end, rows, first[closing[0] : closing[1]]
