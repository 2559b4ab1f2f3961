"""Pure-Python twin of ``relay.pyx``: a data source's answer to one command, re-framed for a client.

The proxy relays the result of a statement that went to one data source
(docs/proxy.md#relayed-results): the backend's packets go to the client as they
arrive, the rows' bytes untouched, never decoded into values. :class:`ResultRelay`
is sans-IO — bytes from the data source in (:meth:`ResultRelay.feed`), bytes
for the client out (:meth:`ResultRelay.take`) — and rewrites what must be the
proxy's:

* every packet's sequence id, counted from the client's command;
* the column definitions: at :data:`HEADER` the caller reads the backend's
  (:attr:`ResultRelay.columns`) and hands the client's in
  (:meth:`ResultRelay.header`), so relayed and decoded results announce the same;
* the EOF / OK packets after the definitions and after the rows: built with the
  session's status flags and no warnings, in the form the *client* negotiated
  (``CLIENT_DEPRECATE_EOF`` or not), whatever the backend connection speaks.

States after a call (:attr:`ResultRelay.state`):

* :data:`FIRST`, :data:`ROWS` — more bytes are needed;
* :data:`OK` — the answer was an OK packet (``first`` holds it; nothing was framed);
* :data:`ERROR` — an error packet (``first`` holds it); it may come after rows
  already framed: the caller frames its own error packet at :attr:`ResultRelay.seq`;
* :data:`HEADER` — the column definitions are in: call :meth:`ResultRelay.header`;
* :data:`DONE` — the closing packet is framed; :attr:`ResultRelay.status` has the backend's flags;
* :data:`UNEXPECTED` — what the relay does not pass on (``LOCAL INFILE``, more result sets,
  a packet out of sequence, a malformed closing packet): the connection is in doubt;
* :data:`MISMATCH` — a later answer of a concatenation (:meth:`ResultRelay.concatenate`) has another
  number of columns than the first.

Concatenated answers (a multi-unit read whose rows need no merge, docs/proxy.md#multi-unit-reads-on-the-loop):
the answers to several commands are fed one after another, each starting at sequence id 1; the client gets
the first one's column definitions, every one's rows, and one closing packet after the last. The caller
feeds the answer :attr:`ResultRelay.unit` is reading (bytes past an answer's end are the next one's: the
same connection answers its commands in order).

Converted rows (:meth:`ResultRelay.convert`, a prepared statement's client reading a multi-unit read that
the data sources answered as text): each text row goes on as one binary-protocol row — 0x00, the NULL
bitmap (offset 2), each non-NULL value by its column's ``AS_*`` kind — with exactly the bytes the proxy's
decoded path writes for the value PyMySQL reads from that text (proxy/row_writer.py):

* :data:`AS_STRING` — the text itself, length-encoded (strings and byte strings, BIT, GEOMETRY, JSON);
* :data:`AS_DECIMAL` — ``Decimal(text)`` in plain notation, length-encoded: ``12.50`` for a ZEROFILL ``00012.50``;
* :data:`AS_INT8` ... :data:`AS_UINT64` — ``int(text)`` little-endian in 1, 2, 4 or 8 bytes, signed or not;
* :data:`AS_FLOAT`, :data:`AS_DOUBLE` — ``float(text)`` as IEEE 754 single (the double rounded) or double;
* :data:`AS_DATETIME` — ``YYYY-MM-DD[ hh:mm:ss[.ffffff]]``: a length byte, then 11 bytes with
  microseconds, 7 with a time of day, 4 with a date, none for a zero date (MariaDB's binary form; the
  decoded path cannot write a zero or invalid date at all: PyMySQL reads it as a ``str``);
* :data:`AS_TIME` — ``[-]h:mm:ss[.ffffff]``: 12 bytes with microseconds, else 8, none for zero: the sign,
  then the magnitude's days, hours, minutes, seconds;
* :data:`AS_NULL` — a column of NULLs only.

A value that is not its kind's text (or an integer out of its kind's range, a FLOAT beyond a single's)
ends the answer at :data:`UNEXPECTED`, nothing of its row framed: the decoded path fails on it too.
"""

from __future__ import annotations

import struct
from decimal import Decimal
from typing import Any, Callable

__all__ = [
    "ResultRelay", "ok_fields", "FIRST", "OK", "ERROR", "HEADER", "ROWS", "DONE", "UNEXPECTED", "MISMATCH",
    "AS_STRING", "AS_DECIMAL", "AS_INT8", "AS_UINT8", "AS_INT16", "AS_UINT16", "AS_INT32", "AS_UINT32", "AS_INT64",
    "AS_UINT64", "AS_FLOAT", "AS_DOUBLE", "AS_DATETIME", "AS_TIME", "AS_NULL", "datetime_field",
]  # fmt: skip

FIRST = 0
OK = 1
ERROR = 2
HEADER = 3
ROWS = 4
DONE = 5
UNEXPECTED = 6
MISMATCH = 7
_COLUMNS = 8  # reading definitions (internal)
_COLUMNS_EOF = 9  # the backend's EOF after them (internal)

_MAX_PAYLOAD = 0xFFFFFF
_MORE_RESULTS = 0x0008  # SERVER_MORE_RESULTS_EXISTS
_WIDTHS = {0xFC: 2, 0xFD: 3, 0xFE: 8}

# How a text row's value is written as a binary row's (module docstring)
AS_STRING = 0
AS_DECIMAL = 1
AS_INT8, AS_UINT8, AS_INT16, AS_UINT16, AS_INT32, AS_UINT32, AS_INT64, AS_UINT64 = range(2, 10)
AS_FLOAT = 10
AS_DOUBLE = 11
AS_DATETIME = 12
AS_TIME = 13
AS_NULL = 14

_PACKS = {kind: struct.Struct("<" + code).pack for kind, code in zip(range(AS_INT8, AS_DOUBLE + 1), "bBhHiIqQfd")}
_FLOAT_TEXT = frozenset(b"0123456789+-.eE")  # what MariaDB writes; float() would take more ("inf", "1_0")
_NUMBER_TEXT = 96  # the longest DECIMAL / FLOAT / DOUBLE text converted (MariaDB's are at most 67 characters)
_DIGITS = frozenset(b"0123456789")


class _NotConverted(Exception):
    """A value that is not its column's text (the row is not framed)."""


def _integer(text: bytes, kind: int) -> bytes:
    digits = text[1:] if text[:1] == b"-" else text
    if not digits or not digits.isdigit():
        raise _NotConverted
    try:
        return _PACKS[kind](int(text))
    except struct.error:
        raise _NotConverted from None


def _float(text: bytes, kind: int) -> bytes:
    if not text or len(text) > _NUMBER_TEXT or not _FLOAT_TEXT.issuperset(text):
        raise _NotConverted
    try:
        return _PACKS[kind](float(text))
    except (ValueError, OverflowError):
        raise _NotConverted from None


def _decimal(text: bytes) -> bytes:
    body = text[1:] if text[:1] == b"-" else text
    whole, _, fraction = body.partition(b".")
    if len(text) > _NUMBER_TEXT or not _DIGITS.issuperset(whole + fraction) or not whole + fraction:
        raise _NotConverted
    return _string(format(Decimal(text.decode()), "f").encode())


def _number(text: bytes, at: int, width: int) -> int:
    part = text[at : at + width]
    if len(part) != width or not _DIGITS.issuperset(part):
        raise _NotConverted
    return int(part)


def _micro(text: bytes, at: int) -> int:
    """A fraction of a second ``.d{1,6}`` from ``at`` to the end, in microseconds (0: none)."""
    if at == len(text):
        return 0
    digits = text[at + 1 :]
    if text[at : at + 1] != b"." or not 1 <= len(digits) <= 6 or not _DIGITS.issuperset(digits):
        raise _NotConverted
    return int(digits.ljust(6, b"0"))


def _datetime(text: bytes) -> bytes:
    year, month, day = _number(text, 0, 4), _number(text, 5, 2), _number(text, 8, 2)
    hour = minute = second = micro = 0
    if text[4:5] != b"-" or text[7:8] != b"-":
        raise _NotConverted
    if len(text) > 10:
        if text[10:11] != b" " or text[13:14] != b":" or text[16:17] != b":":
            raise _NotConverted
        hour, minute, second = _number(text, 11, 2), _number(text, 14, 2), _number(text, 17, 2)
        micro = _micro(text, 19)
    if micro:
        return struct.pack("<BHBBBBBI", 11, year, month, day, hour, minute, second, micro)
    if hour or minute or second:
        return struct.pack("<BHBBBBB", 7, year, month, day, hour, minute, second)
    if year or month or day:
        return struct.pack("<BHBB", 4, year, month, day)
    return b"\x00"


def datetime_field(text: bytes) -> bytes | None:
    """A date's text (``YYYY-MM-DD[ hh:mm:ss[.f]]``, a zero or invalid one too) as its binary-protocol field, as
    :data:`AS_DATETIME` converts it (MariaDB's form: ``b"\\x00"`` for a zero date); ``None``: not a date's text."""
    try:
        return _datetime(text)
    except _NotConverted:
        return None


def _time(text: bytes) -> bytes:
    negative = text[:1] == b"-"
    hours_end = text.find(b":")
    hours = text[1 if negative else 0 : hours_end]
    if hours_end < 0 or not 1 <= len(hours) <= 3 or not _DIGITS.issuperset(hours):
        raise _NotConverted
    if text[hours_end + 3 : hours_end + 4] != b":":
        raise _NotConverted
    total = int(hours) * 3600 + _number(text, hours_end + 1, 2) * 60 + _number(text, hours_end + 4, 2)
    micro = _micro(text, hours_end + 6)
    if not total and not micro:
        return b"\x00"
    days, rest = divmod(total, 86400)
    if micro:
        return struct.pack("<BBIBBBI", 12, negative, days, rest // 3600, rest % 3600 // 60, rest % 60, micro)
    return struct.pack("<BBIBBB", 8, negative, days, rest // 3600, rest % 3600 // 60, rest % 60)


def _string(value: bytes) -> bytes:
    return _encode_lenenc(len(value)) + value


def _value(text: bytes, kind: int) -> bytes:
    """One non-NULL value's binary field (module docstring)."""
    if kind == AS_STRING:
        return _string(text)
    if kind == AS_DECIMAL:
        return _decimal(text)
    if kind <= AS_UINT64:
        return _integer(text, kind)
    if kind <= AS_DOUBLE:
        return _float(text, kind)
    if kind == AS_DATETIME:
        return _datetime(text)
    if kind == AS_TIME:
        return _time(text)
    raise _NotConverted  # AS_NULL: a column of NULLs only


def _binary_row(row: bytes, kinds: bytes) -> bytes:
    """The text row ``row`` as a binary row's payload (module docstring)."""
    nulls = bytearray(1 + (len(kinds) + 9) // 8)
    values = []
    at = 0
    for i, kind in enumerate(kinds):
        if at < len(row) and row[at] == 0xFB:
            nulls[1 + (i + 2) // 8] |= 1 << ((i + 2) % 8)
            at += 1
            continue
        size, at = _lenenc(row, at)
        if size < 0 or size > len(row) - at:
            raise _NotConverted
        values.append(_value(row[at : at + size], kind))
        at += size
    if at != len(row):
        raise _NotConverted
    return bytes(nulls) + b"".join(values)


def _lenenc(data: bytes | bytearray, at: int) -> tuple[int, int]:
    """A length-encoded integer at ``at``: (value, offset after it); (-1, at) if it runs past the end."""
    if at >= len(data):
        return -1, at
    first = data[at]
    if first < 0xFB:
        return first, at + 1
    width = _WIDTHS.get(first)
    if width is None or at + 1 + width > len(data):
        return -1, at
    return int.from_bytes(data[at + 1 : at + 1 + width], "little"), at + 1 + width


def _encode_lenenc(value: int) -> bytes:
    if value < 0xFB:
        return bytes((value,))
    if value < 1 << 16:
        return b"\xfc" + value.to_bytes(2, "little")
    if value < 1 << 24:
        return b"\xfd" + value.to_bytes(3, "little")
    return b"\xfe" + value.to_bytes(8, "little")


def ok_fields(payload: bytes) -> tuple[int, int, int, int]:
    """An OK packet's (affected rows, last insert id, status flags, warnings); (-1, -1, -1, -1) if malformed."""
    affected, at = _lenenc(payload, 1)
    insert_id, at = _lenenc(payload, at)
    if affected < 0 or insert_id < 0 or at + 4 > len(payload):
        return -1, -1, -1, -1
    return affected, insert_id, payload[at] | payload[at + 1] << 8, payload[at + 2] | payload[at + 3] << 8


class ResultRelay:
    """One command's answer from a data source, re-framed for the client (module docstring).

    Args:
        seq: The sequence id of the client's first answer packet (its command's + 1).
        client_eof: The client expects EOF packets (it did not negotiate ``CLIENT_DEPRECATE_EOF``).
        backend_eof: The data source sends them (its connection did not negotiate it either).
        count_rows: The closing OK packet (``client_eof`` false) reports the rows as affected, as the
            proxy's own text results do; else 0, as its binary ones do.
    """

    def __init__(self, seq: int, client_eof: bool, backend_eof: bool, count_rows: bool) -> None:
        self.seq = seq & 0xFF
        self._state = FIRST
        self.columns: list[bytes] = []
        self.first = b""
        self.rows = 0
        self.status = 0
        self._client_eof = client_eof
        self._backend_eof = backend_eof
        self._count_rows = count_rows
        self._client_status = 0
        self._backend_seq = 1
        self._count = 0
        self._defs = 0  # definitions of the current answer read so far
        self.unit = 0  # the answer being read (a concatenation's: 0, 1, ...)
        self._left = 0  # answers of the concatenation after the current one
        self.statuses: list[int] = []  # a concatenation's: each answer's closing status flags
        self._continued = False  # inside a row of 16 MB or more: its next packet passes as it is
        self._in = bytearray()
        self._out = bytearray()
        self._kinds: bytes | None = None  # convert()'s: each column's AS_* (None: rows pass as they are)
        self._long = bytearray()  # a converted row of 16 MiB or more: its packets so far

    @property
    def state(self) -> int:
        """The state (module docstring); reading the definitions counts as :data:`FIRST`."""
        return FIRST if self._state >= _COLUMNS else self._state

    def concatenate(self, units: int) -> None:
        """Before the first byte: the answer is ``units`` answers, relayed as one (module docstring)."""
        if self._state != FIRST or self.unit or self._in:
            raise ValueError("concatenate() after the answer began")
        self._left = max(0, units - 1)

    def convert(self, kinds: bytes) -> None:
        """At :data:`HEADER`: the rows are text-protocol rows sent on as binary-protocol ones, each column's
        value as ``kinds`` says (one ``AS_*`` a column; module docstring)."""
        if self._state != HEADER:
            raise ValueError(f"convert() at state {self._state}, not HEADER")
        if len(kinds) != self._count or any(k > AS_NULL for k in kinds):
            raise ValueError(f"convert() takes one kind of 0..{AS_NULL} for each of the {self._count} columns")
        self._kinds = kinds

    def rest(self) -> bytes:
        """The bytes fed but not read (past an answer that ended: the next answer's on that connection); forgotten."""
        rest = bytes(self._in)
        self._in.clear()
        return rest

    def take(self) -> bytes:
        """The client's bytes framed so far (and forget them)."""
        out = bytes(self._out)
        self._out.clear()
        return out

    def feed(self, data: bytes) -> int:
        """Take bytes the data source sent; the state after them."""
        if data:
            self._in += data
        if self._state in (FIRST, _COLUMNS, _COLUMNS_EOF, ROWS):
            self._run()
        return self.state

    def header(self, payloads: list[bytes], status: int) -> int:
        """At :data:`HEADER`: frame the client's column count and definitions (``payloads``), the EOF after
        them if the client reads one, and go on with the rows already received. ``status``: the session's
        flags, for this EOF and the closing packet."""
        if self._state != HEADER:
            raise ValueError(f"header() at state {self._state}, not HEADER")
        self._client_status = status
        for payload in payloads:
            self._frame(payload)
        if self._client_eof:
            self._frame(b"\xfe\x00\x00" + status.to_bytes(2, "little"))
        self._state = ROWS
        self._run()
        return self.state

    def pump(self, data: bytes, client: Any, header_for: Callable[[list[bytes]], tuple[list[bytes], int]]) -> int:
        """:meth:`feed` ``data``; at :data:`HEADER` :meth:`header` with what ``header_for(columns)`` returns (the
        client's payloads and status); then what is framed goes to ``client.write`` (an asyncio transport's),
        unless ``client.is_closing()``. The state after them: one call for each chunk of the answer."""
        state = self.feed(data)
        if state == HEADER:
            payloads, status = header_for(self.columns)
            state = self.header(payloads, status)
        if self._out:
            out = self.take()
            if not client.is_closing():
                client.write(out)
        return state

    # -- internals -----------------------------------------------------------------------------------

    def _frame(self, payload: bytes) -> None:
        out = self._out
        length = len(payload)
        out += length.to_bytes(3, "little")
        out.append(self.seq)
        out += payload
        self.seq = (self.seq + 1) & 0xFF

    def _run(self) -> None:
        data = self._in
        at = 0
        while len(data) - at >= 4:
            length = data[at] | data[at + 1] << 8 | data[at + 2] << 16
            if len(data) - at - 4 < length:
                break
            if data[at + 3] != self._backend_seq:
                self._state = UNEXPECTED
                break
            self._backend_seq = (self._backend_seq + 1) & 0xFF
            payload = bytes(data[at + 4 : at + 4 + length])
            at += 4 + length
            self._packet(payload, length)
            if self._state not in (FIRST, _COLUMNS, _COLUMNS_EOF, ROWS):
                break
        del data[:at]

    def _packet(self, payload: bytes, length: int) -> None:
        state = self._state
        if state == ROWS:
            if self._kinds is not None:
                self._text_row(payload, length, self._kinds)
            elif self._continued:
                self._frame(payload)
                self._continued = length == _MAX_PAYLOAD
            elif length and payload[0] == 0xFF:
                self.first = payload
                self._state = ERROR
            elif length and payload[0] == 0xFE and length < 9:
                self._close(payload)
            else:
                self._frame(payload)
                self.rows += 1
                self._continued = length == _MAX_PAYLOAD
            return
        if state == FIRST:
            head = payload[0] if length else -1
            if head == 0x00:
                self.first, self._state = payload, OK
            elif head == 0xFF:
                self.first, self._state = payload, ERROR
            elif head == 0xFB or head < 0:  # LOCAL INFILE, or an empty packet
                self._state = UNEXPECTED
            else:
                count, end = _lenenc(payload, 0)
                if count <= 0 or end != length:
                    self._state = UNEXPECTED
                elif self.unit and count != self._count:
                    self._state = MISMATCH
                else:
                    self._count, self._defs, self._state = count, 0, _COLUMNS
            return
        if state == _COLUMNS:
            if not self.unit:  # a later answer's definitions are not passed on: the first one's were
                self.columns.append(payload)
            self._defs += 1
            if self._defs == self._count:
                self._state = _COLUMNS_EOF if self._backend_eof else self._after_columns()
            return
        # _COLUMNS_EOF
        self._state = self._after_columns() if length and payload[0] == 0xFE and length < 9 else UNEXPECTED

    def _text_row(self, payload: bytes, length: int, kinds: bytes) -> None:
        """A packet at ROWS of an answer whose rows are converted (``_packet``'s, for them)."""
        if self._continued:  # the next packet of a long row: the row is converted once it is whole
            self._long += payload
            if length == _MAX_PAYLOAD:
                return
            self._continued = False
            payload = bytes(self._long)
            self._long = bytearray()
        elif length and payload[0] == 0xFF:
            self.first, self._state = payload, ERROR
            return
        elif length and payload[0] == 0xFE and length < 9:
            self._close(payload)
            return
        else:
            self.rows += 1
            if length == _MAX_PAYLOAD:
                self._long, self._continued = bytearray(payload), True
                return
        try:
            converted = _binary_row(payload, kinds)
        except _NotConverted:
            self._state = UNEXPECTED  # not the text of its column's type: nothing of it was framed
            return
        for at in range(0, len(converted) + 1, _MAX_PAYLOAD):  # pieces of 16 MiB - 1, the last one shorter
            self._frame(converted[at : at + _MAX_PAYLOAD])
            if len(converted) - at < _MAX_PAYLOAD:
                break

    def _after_columns(self) -> int:
        return ROWS if self.unit else HEADER

    def _close(self, payload: bytes) -> None:
        """The backend's closing EOF (or OK, 0xFE): the client's closing packet framed."""
        if self._backend_eof:
            if len(payload) < 5:
                self._state = UNEXPECTED
                return
            status = payload[3] | payload[4] << 8
        else:
            status = ok_fields(payload)[2]
        if status < 0 or status & _MORE_RESULTS:
            self._state = UNEXPECTED
            return
        self.status = status
        if self._left or self.unit:
            self.statuses.append(status)
        if self._left:  # the next answer follows: its rows go on under the same header
            self._left -= 1
            self.unit += 1
            self._backend_seq = 1
            self._state = FIRST
            return
        flags = self._client_status.to_bytes(2, "little")
        if self._client_eof:
            self._frame(b"\xfe\x00\x00" + flags)
        else:
            affected = self.rows if self._count_rows else 0
            self._frame(b"\xfe" + _encode_lenenc(affected) + b"\x00" + flags + b"\x00\x00")
        self._state = DONE
