"""Configuration sources: where a :class:`~ddm_core.metadata.reload.ConfigHolder` fetches versions from.

A source is any object with :meth:`ConfigSource.fetch` and
:meth:`ConfigSource.changed`; the holder validates what it fetches, numbers the
versions, refuses one that moves data and keeps the local snapshot, so a source
only reads (and, for the shared ones, publishes) text. One module per source:

* :mod:`~ddm_core.metadata.sources.file` — a file, taken once it is stable (the default for a path);
* :mod:`~ddm_core.metadata.sources.static` — content held in memory (tests, programmatic configuration);
* :mod:`~ddm_core.metadata.sources.table` — numbered versions in a database table (``ddm_config``),
  over one kept connection (:mod:`~ddm_core.metadata.sources.kept_connection`);
* :mod:`~ddm_core.metadata.sources.redis` — numbered versions on Redis, with a notice per version;
* :mod:`~ddm_core.metadata.sources.etcd` — numbered versions on etcd and an active-version pointer,
  followed by a watch (its client: :mod:`~ddm_core.metadata.sources.etcd_client`).

A new source implements the protocol below and raises
:class:`~ddm_core.errors.SourceUnavailableError` when it cannot reach its backend
(the holder then keeps serving, or starts from its snapshot).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Protocol, runtime_checkable

__all__ = ["Fetched", "ConfigSource"]


@dataclass(frozen=True, slots=True)
class Fetched:
    """What a source returned.

    Attributes:
        content: YAML/JSON text, or an already parsed mapping.
        revision: A cheap change token (file mtime + size, a config-center
            version); compared by :meth:`ConfigSource.changed`.
        origin: Names the source in messages (path, URL).
        base_dir: Directory relative SQLite paths resolve against.
    """

    content: str | Mapping[str, Any]
    revision: str
    origin: str
    base_dir: Path | None = None


@runtime_checkable
class ConfigSource(Protocol):
    """Where configuration text comes from."""

    def fetch(self) -> Fetched:
        """The current content.

        Raises:
            SourceUnavailableError: the source cannot be reached or read.
        """
        ...

    def changed(self, revision: str | None) -> bool:
        """Cheaply: may the content differ from ``revision``? (``True`` when unsure.)"""
        ...
