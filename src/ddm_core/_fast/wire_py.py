"""Pure-Python twin of ``wire.pyx``: the packets of a buffered MySQL text result.

A text-protocol result is a column count, one column-definition packet per
column, an EOF packet, one packet per row and a closing EOF packet
(docs/notes.md, "Reading results"). PyMySQL reads each packet through three
method calls and a packet object; these functions read them in one loop and
leave every unusual case to the caller, as an *outcome*:

* :data:`EOF` — the closing EOF packet arrived (``last`` is its payload);
* :data:`ERROR` — an error packet arrived (``last`` is its payload; the caller raises it);
* :data:`OUT_OF_SEQUENCE` — a packet had the wrong sequence number (``last`` is its 4-byte header);
* :data:`LOST` — the stream ended inside a packet;
* :data:`UNEXPECTED` — the packet after the column definitions was not an EOF packet.

``read(n)`` must return ``n`` bytes, or fewer only at the end of the stream
(a buffered socket reader's ``read``); ``seq`` is the sequence number the
next packet must carry, and the one after the last packet read is returned.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

__all__ = ["read_columns", "read_rows", "EOF", "ERROR", "OUT_OF_SEQUENCE", "LOST", "UNEXPECTED"]

EOF = 0
ERROR = 1
OUT_OF_SEQUENCE = 2
LOST = 3
UNEXPECTED = 4

#: A payload this long continues in the next packet (a value of 16 MB or more).
_MAX_PAYLOAD = 0xFFFFFF

#: Bytes of a length after its first byte (0xFC, 0xFD, 0xFE).
_WIDTHS = {0xFC: 2, 0xFD: 3, 0xFE: 8}

Read = Callable[[int], bytes]
Converters = Sequence[tuple[Any, Any]]


def _packet(read: Read, seq: int) -> tuple[bytes, int, int]:
    """One logical packet: (payload, next seq, -1) or (``last``, seq, outcome)."""
    parts: list[bytes] | None = None
    while True:
        header = read(4)
        if len(header) < 4:
            return b"", seq, LOST
        if header[3] != seq:
            return header, seq, OUT_OF_SEQUENCE
        seq = (seq + 1) & 0xFF
        length = header[0] | header[1] << 8 | header[2] << 16
        body = read(length)
        if len(body) < length:
            return b"", seq, LOST
        if length < _MAX_PAYLOAD and parts is None:
            return body, seq, -1
        if parts is None:
            parts = []
        parts.append(body)
        if length < _MAX_PAYLOAD:
            return b"".join(parts), seq, -1


def read_columns(read: Read, seq: int, count: int) -> tuple[tuple[bytes, ...], int, bytes, int]:
    """``count`` column-definition payloads, then the EOF packet: (payloads, seq, last, outcome)."""
    columns = []
    for _ in range(count):
        body, seq, outcome = _packet(read, seq)
        if outcome >= 0:
            return (), seq, body, outcome
        if body[:1] == b"\xff":
            return (), seq, body, ERROR
        columns.append(body)
    body, seq, outcome = _packet(read, seq)
    if outcome >= 0:
        return (), seq, body, outcome
    if body[:1] == b"\xff":
        return (), seq, body, ERROR
    if body[:1] != b"\xfe" or len(body) >= 9:
        return (), seq, body, UNEXPECTED
    return tuple(columns), seq, body, EOF


def read_rows(read: Read, seq: int, converters: Converters) -> tuple[list[tuple[Any, ...]], int, bytes, int]:
    """Row packets up to the closing EOF: (rows, seq, last, outcome).

    Each row is decoded as PyMySQL decodes it: per column ``(encoding,
    converter)``, NULL stays ``None``, the bytes are decoded when ``encoding``
    is set and then passed to ``converter`` when it is set; a row with fewer
    values than columns ends where its values end.
    """
    rows: list[tuple[Any, ...]] = []
    while True:
        body, seq, outcome = _packet(read, seq)
        if outcome >= 0:
            return rows, seq, body, outcome
        first = body[0] if body else -1
        if first == 0xFE and len(body) < 9:
            return rows, seq, body, EOF
        if first == 0xFF:
            return rows, seq, body, ERROR
        rows.append(_row(body, converters))


def _row(data: bytes, converters: Converters) -> tuple[Any, ...]:
    row: list[Any] = []
    size = len(data)
    pos = 0
    for encoding, converter in converters:
        if pos >= size:
            break
        c = data[pos]
        pos += 1
        if c < 0xFB:
            length = c
        elif c == 0xFB or c == 0xFF:  # NULL (0xFF, never sent in a row, reads as NULL in PyMySQL too)
            row.append(None)
            continue
        else:  # the length itself takes 2, 3 or 8 more bytes
            width = _WIDTHS[c]
            if pos + width > size:
                raise ValueError(f"a row value's length runs past the end of its {size}-byte packet")
            length = int.from_bytes(data[pos : pos + width], "little")
            pos += width
        if pos + length > size:
            raise ValueError(f"a row value of {length} bytes runs past the end of its {size}-byte packet")
        value: Any = data[pos : pos + length]
        pos += length
        if encoding is not None:
            value = value.decode(encoding)
        if converter is not None:
            value = converter(value)
        row.append(value)
    return tuple(row)
