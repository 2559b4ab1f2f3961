"""MariaDB GTID positions: parse ``@@gtid_slave_pos`` / ``@@last_gtid`` text and compare.

A position is ``domain-server-sequence`` per replication domain, comma
separated (``0-1-42,1-3-7``). Sequence numbers grow within a domain whatever
server wrote them, so a replica has applied a write once, in every domain of
the write, its sequence is at least the write's.
"""

from __future__ import annotations

from typing import Mapping

__all__ = ["Position", "parse_position", "reached", "merged", "format_position"]

#: Domain id → highest sequence number.
Position = Mapping[int, int]


def parse_position(text: str | bytes | None) -> dict[int, int] | None:
    """``"0-1-42,1-3-7"`` → ``{0: 42, 1: 7}``; ``None`` for empty or unreadable text."""
    if text is None:
        return None
    if isinstance(text, bytes):
        text = text.decode("ascii", "replace")
    out: dict[int, int] = {}
    for part in text.replace("\n", "").split(","):
        part = part.strip()
        if not part:
            continue
        pieces = part.split("-")
        if len(pieces) != 3 or not all(p.isdigit() for p in pieces):
            return None
        domain, seq = int(pieces[0]), int(pieces[2])
        out[domain] = max(seq, out.get(domain, 0))
    return out or None


def reached(applied: Position | None, wanted: Position) -> bool:
    """Has a server at ``applied`` applied everything up to ``wanted``?"""
    if applied is None:
        return False
    return all(applied.get(domain, -1) >= seq for domain, seq in wanted.items())


def merged(a: Position | None, b: Position) -> dict[int, int]:
    """The later of two positions, domain by domain."""
    out = dict(a or {})
    for domain, seq in b.items():
        if seq > out.get(domain, -1):
            out[domain] = seq
    return out


def format_position(position: Position | None) -> str | None:
    """``{0: 42}`` → ``"0-42"`` (domain and sequence: for status output, not for servers)."""
    if not position:
        return None
    return ",".join(f"{d}-{s}" for d, s in sorted(position.items()))
