"""A transaction's opening OKs read off a MySQL connection's socket to their last byte and no further.

The proxy sends a pin's opening (``BEGIN``) and the first statement on it back to back, then reads the
OKs and then the statement's answer (docs/proxy.md#transactions-on-the-loop). PyMySQL's reader is
buffered: reading the OKs through it could take the start of the answer behind them into its buffer,
where a relay reading the socket would never see it. So the OKs are read here, packet by packet, with
reads of exactly their lengths.
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING, Any, Callable

from ddm_core._fast import SELECTED

if TYPE_CHECKING:
    from ddm_core._fast.relay import ok_fields
else:
    ok_fields = SELECTED.relay.ok_fields  # the relay's own OK reader (affected, insert id, status, warnings)

__all__ = ["read_oks"]

_WAIT_ALL = getattr(socket, "MSG_WAITALL", 0)


def read_oks(raw: Any, count: int, error_of: Callable[[Any, bytes], BaseException]) -> None:
    """Read ``count`` OK packets off PyMySQL connection ``raw``'s socket; the last one's status flags are kept.

    Raises:
        Exception: ``error_of(raw, payload)`` for an error packet (the driver's error, to be mapped);
            ConnectionError: the connection failed, closed, or sent something other than an OK.
    """
    sock = raw._sock
    if sock is None:
        raise ConnectionError("the data source's connection is closed")
    for _ in range(count):
        head = _exactly(sock, 4)
        payload = _exactly(sock, int.from_bytes(head[:3], "little"))
        if payload[:1] == b"\xff":
            raise error_of(raw, payload)
        if payload[:1] != b"\x00":
            raise ConnectionError("the data source answered a transaction's opening with something other than OK")
        raw.server_status = ok_fields(payload)[2]


def _exactly(sock: Any, size: int) -> bytes:
    """``size`` bytes off ``sock`` (blocking, bounded by its receive timeout)."""
    data = b""
    while len(data) < size:
        try:
            more = sock.recv(size - len(data), _WAIT_ALL)
        except OSError as exc:  # the kernel's receive timeout included
            raise ConnectionError(f"reading the data source's OK failed: {exc}") from exc
        if not more:
            raise ConnectionError("the data source closed the connection before its OK")
        data += more
    return data

