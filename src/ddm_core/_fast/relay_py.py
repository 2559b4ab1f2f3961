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
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = [
    "ResultRelay", "ok_fields", "FIRST", "OK", "ERROR", "HEADER", "ROWS", "DONE", "UNEXPECTED", "MISMATCH",
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

    @property
    def state(self) -> int:
        """The state (module docstring); reading the definitions counts as :data:`FIRST`."""
        return FIRST if self._state >= _COLUMNS else self._state

    def concatenate(self, units: int) -> None:
        """Before the first byte: the answer is ``units`` answers, relayed as one (module docstring)."""
        if self._state != FIRST or self.unit or self._in:
            raise ValueError("concatenate() after the answer began")
        self._left = max(0, units - 1)

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
            if self._continued:
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
