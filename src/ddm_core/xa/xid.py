"""XA transaction ids: ``ddm-`` global ids, one branch per data source, and reading ``XA RECOVER``.

An xid is ``gtrid, bqual, formatID`` (each of gtrid and bqual at most 64 bytes).
ddm-core's are recognisable on any server, so recovery touches only its own:

* ``formatID`` is :data:`FORMAT_ID` (``0x44444D``, "DDM"; fits the 4 bytes a
  server with binary logging allows);
* ``gtrid`` is ``ddm-<log namespace>-<ms since the epoch, hex>-<16 random hex
  digits>``. The namespace (8 hex digits) names the transaction log that owns
  the transaction, so two applications whose data sources share a server never
  recover each other's branches; the time is the coordinator's clock when it
  started, so recovery can age a branch whose log row is missing;
* ``bqual`` is the data source's name (its SHA-1 when the name is longer than
  64 bytes), so one global transaction has one branch per data source.

Xids are always sent as hex literals (``X'...'``): no quoting, no character-set
conversion of the bytes (docs/xa.md#xids).
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass
from typing import Any, Iterable

__all__ = ["FORMAT_ID", "PREFIX", "Xid", "namespace_of", "new_gtrid", "gtrid_started_ms", "ours"]

#: The formatID of every ddm-core xid ("DDM").
FORMAT_ID = 0x44444D

#: Every ddm-core global transaction id starts with this.
PREFIX = "ddm-"

_MAX_PART = 64


def namespace_of(log_location: str) -> str:
    """The 8-hex-digit namespace of a transaction log (its ``host:port/database/table``)."""
    return hashlib.sha1(log_location.encode("utf-8")).hexdigest()[:8]  # noqa: S324 - a name, not a secret


def new_gtrid(namespace: str, now_ms: int | None = None) -> str:
    """A new global transaction id ``ddm-<namespace>-<ms hex>-<random hex>`` (at most 44 ASCII bytes)."""
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    return f"{PREFIX}{namespace}-{ms:x}-{os.urandom(8).hex()}"


def gtrid_started_ms(gtrid: str) -> int | None:
    """The start time (epoch ms) written into a ddm-core gtrid; ``None`` if it is not one."""
    parts = gtrid[len(PREFIX):].split("-") if gtrid.startswith(PREFIX) else []
    if len(parts) != 3:
        return None
    try:
        return int(parts[1], 16)
    except ValueError:
        return None


def _bqual_of(data_source: str) -> bytes:
    raw = data_source.encode("utf-8")
    return raw if len(raw) <= _MAX_PART else hashlib.sha1(raw).hexdigest().encode("ascii")  # noqa: S324 - a name, not a secret


@dataclass(frozen=True, slots=True)
class Xid:
    """One branch of a global transaction.

    Attributes:
        gtrid: The global transaction id (ASCII).
        bqual: The branch qualifier (the data source's name, as bytes).
        format_id: :data:`FORMAT_ID` for ddm-core's xids.
    """

    gtrid: str
    bqual: bytes
    format_id: int = FORMAT_ID

    @classmethod
    def branch(cls, gtrid: str, data_source: str) -> Xid:
        """The branch of ``gtrid`` on ``data_source``."""
        return cls(gtrid, _bqual_of(data_source))

    def sql(self) -> str:
        """The xid as XA statements take it: ``X'..',X'..',formatID``."""
        return f"X'{self.gtrid.encode('ascii').hex()}',X'{self.bqual.hex()}',{self.format_id}"

    def __str__(self) -> str:
        return f"{self.gtrid}/{self.bqual.decode('utf-8', 'replace')}"


def ours(rows: Iterable[Any], namespace: str) -> list[Xid]:
    """The xids of ``namespace`` among ``XA RECOVER`` rows ``(formatID, gtrid_length, bqual_length, data)``.

    ``data`` is gtrid followed by bqual (bytes, or text on some drivers);
    anything with another formatID, prefix or namespace belongs to someone else.
    """
    prefix = f"{PREFIX}{namespace}-"
    found = []
    for format_id, gtrid_length, bqual_length, data in rows:
        if int(format_id) != FORMAT_ID:
            continue
        raw = data if isinstance(data, (bytes, bytearray)) else str(data).encode("utf-8")
        glen, blen = int(gtrid_length), int(bqual_length)
        gtrid_raw, bqual = bytes(raw[:glen]), bytes(raw[glen : glen + blen])
        try:
            gtrid = gtrid_raw.decode("ascii")
        except UnicodeDecodeError:
            continue
        if gtrid.startswith(prefix):
            found.append(Xid(gtrid, bqual))
    return found
