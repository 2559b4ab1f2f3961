"""Configuration content held in memory as a source (tests, programmatic configuration)."""

from __future__ import annotations

import threading
from typing import Any, Mapping

from ddm_core.errors import SourceUnavailableError
from ddm_core.metadata.sources import Fetched

__all__ = ["StaticSource"]


class StaticSource:
    """In-memory content (tests, programmatic configuration); :meth:`set` replaces it.

    Args:
        content: YAML text or a mapping.
        name: Names it in messages.
    """

    def __init__(self, content: str | Mapping[str, Any], name: str = "<static>") -> None:
        self.name = name
        self._lock = threading.Lock()
        self._content = content
        self._revision = 0
        self.available = True

    def set(self, content: str | Mapping[str, Any]) -> None:
        with self._lock:
            self._content = content
            self._revision += 1

    def fetch(self) -> Fetched:
        with self._lock:
            if not self.available:
                raise SourceUnavailableError(
                    f"configuration source {self.name} is unavailable", source=self.name
                )
            return Fetched(self._content, str(self._revision), self.name)

    def changed(self, revision: str | None) -> bool:
        return revision != str(self._revision)
