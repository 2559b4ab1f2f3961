"""GTID positions: where a server's binlog stands in terms every server of its replication topology shares.

A ``file:pos`` position means something on one server only: a promoted replica
writes other files at other offsets. A GTID position names the last transaction
applied instead, and a replica that logs what it replicates (``log_slave_updates``)
has the same GTIDs in its binlog, so a reader can resume there after a fail-over.

Two notations, told apart by their text:

* **MariaDB** — ``@@gtid_binlog_pos``: the last GTID of each replication domain,
  ``domain-server-seq`` joined by commas (``0-1-42,1-3-7``). Sequence numbers grow
  per domain across fail-overs, so a transaction ``d-s-n`` comes after a position
  whose domain ``d`` has a lower ``n``.
* **MySQL** — ``@@gtid_executed``: sets of transaction numbers per source
  UUID (``3e11fa47-...:1-27:30``). A transaction comes after a set that does not
  contain it.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Sequence

__all__ = ["server_gtid", "gtid_at", "advance", "is_after", "merge", "is_mariadb"]

_MARIADB = re.compile(r"^\d+-\d+-\d+(,\d+-\d+-\d+)*$")


def is_mariadb(position: str) -> bool:
    """Is ``position`` (or one GTID) in MariaDB's ``domain-server-seq`` notation?"""
    return bool(_MARIADB.match(position.replace(" ", "").replace("\n", "")))


Query = Callable[[str, Any], Sequence[Sequence[Any]]]


def server_gtid(query: Query) -> tuple[str, int]:
    """``(GTID position now, @@server_id)`` of the server ``query(sql, params)`` runs on (``""``: no GTIDs).

    MariaDB answers ``@@gtid_binlog_pos``, MySQL (which has no such variable)
    ``@@global.gtid_executed``. Read before ``SHOW MASTER STATUS``, the GTID
    position may lag the file position, never lead it: resuming there reads a
    few transactions again, which the idempotent applies allow.
    """
    try:
        rows = query("SELECT @@gtid_binlog_pos, @@server_id", None)
    except Exception:  # MySQL: unknown system variable (drivers share no error base)
        rows = query("SELECT @@global.gtid_executed, @@server_id", None)
    gtid, server_id = rows[0]
    return _clean(str(gtid or "")), int(server_id)


def gtid_at(query: Query, file: str, pos: int) -> str | None:
    """The GTID position at ``file:pos`` exactly (MariaDB's ``BINLOG_GTID_POS``); ``None`` where there is none."""
    try:
        rows = query("SELECT BINLOG_GTID_POS(%s, %s)", (file, pos))
    except Exception:  # MySQL has no such function
        return None
    found = rows[0][0] if rows else None
    return None if found is None else _clean(str(found))


def _clean(position: str) -> str:
    return position.replace(" ", "").replace("\n", "")


def _mariadb_domains(position: str) -> dict[int, tuple[int, int]]:
    out: dict[int, tuple[int, int]] = {}
    for part in filter(None, _clean(position).split(",")):
        domain, server, seq = (int(x) for x in part.split("-"))
        out[domain] = (server, seq)
    return out


def _mysql_sets(position: str) -> dict[str, list[tuple[int, int]]]:
    out: dict[str, list[tuple[int, int]]] = {}
    for part in filter(None, _clean(position).split(",")):
        uuid, *ranges = part.split(":")
        spans = out.setdefault(uuid.lower(), [])
        for r in ranges:
            low, _, high = r.partition("-")
            spans.append((int(low), int(high or low)))
    return out


def _render_mysql(sets: dict[str, list[tuple[int, int]]]) -> str:
    parts = []
    for uuid in sorted(sets):
        merged: list[tuple[int, int]] = []
        for low, high in sorted(sets[uuid]):
            if merged and low <= merged[-1][1] + 1:
                merged[-1] = (merged[-1][0], max(high, merged[-1][1]))
            else:
                merged.append((low, high))
        parts.append(uuid + "".join(f":{a}" if a == b else f":{a}-{b}" for a, b in merged))
    return ",".join(parts)


def advance(position: str, gtid: str) -> str:
    """``position`` after the transaction ``gtid`` was applied."""
    if not gtid:
        return position
    if is_mariadb(gtid):
        domains = _mariadb_domains(position) if position else {}
        domain, server, seq = (int(x) for x in gtid.split("-"))
        domains[domain] = (server, seq)
        return ",".join(f"{d}-{s}-{n}" for d, (s, n) in sorted(domains.items()))
    sets = _mysql_sets(position) if position else {}
    uuid, _, number = gtid.rpartition(":")
    sets.setdefault(uuid.lower(), []).append((int(number), int(number)))
    return _render_mysql(sets)


def merge(positions: Sequence[str]) -> str:
    """One position covering every one of ``positions`` (per domain the highest; MySQL: the union)."""
    out = ""
    for position in filter(None, positions):
        if is_mariadb(position):
            for domain, (server, seq) in _mariadb_domains(position).items():
                mine = _mariadb_domains(out).get(domain) if out else None
                if mine is None or mine[1] < seq:
                    out = advance(out, f"{domain}-{server}-{seq}")
        else:
            sets = _mysql_sets(out) if out else {}
            for uuid, spans in _mysql_sets(position).items():
                sets.setdefault(uuid, []).extend(spans)
            out = _render_mysql(sets)
    return out


def is_after(gtid: str, position: str) -> bool:
    """Did transaction ``gtid`` commit after ``position`` (is it not yet part of it)?"""
    if is_mariadb(gtid):
        domain, _, seq = (int(x) for x in gtid.split("-"))
        found = _mariadb_domains(position).get(domain) if position else None
        return found is None or seq > found[1]
    uuid, _, number = gtid.rpartition(":")
    n = int(number)
    spans = _mysql_sets(position).get(uuid.lower(), []) if position else []
    return not any(low <= n <= high for low, high in spans)
