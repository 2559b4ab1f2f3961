"""Binlog positions of the servers behind data sources (recorded by the backfill, read by catch-up).

Data sources on one server share its binlog, so positions are kept per
``host:port`` of each data source's primary.
"""

from __future__ import annotations

from typing import Any, Sequence

from ddm_core.errors import MigrationError
from ddm_core.metadata.model import Endpoint, ShardingConfig
from ddm_core.migrate.connections import Connections

__all__ = ["server_of", "binlog_positions"]


def server_of(endpoint: Endpoint) -> str:
    """``host:port`` of a data source's primary."""
    return f"{endpoint.host or '127.0.0.1'}:{endpoint.port or 3306}"


def binlog_positions(config: ShardingConfig, conns: Connections, data_sources: Sequence[str]) -> dict[str, Any]:
    """``server -> [file, position]`` now, from ``SHOW MASTER STATUS`` (``None``: the server has no binlog)."""
    out: dict[str, Any] = {}
    for ds in data_sources:
        server = server_of(config.data_sources[ds].primary)
        if server not in out:
            try:
                rows = conns.query(ds, "SHOW MASTER STATUS")
            except MigrationError:  # no privilege to look: as good as no binlog for catch-up
                rows = []
            out[server] = [str(rows[0][0]), int(rows[0][1])] if rows else None
    return out
