"""The proxy's slow-SQL audit log: one JSON object a line (docs/proxy.md#audit-log).

A statement at least ``proxy.slowSqlMs`` slow (0: off; every statement with
``proxy.auditAll``, see ``ProxySettings.audit_threshold_ms``) is written
with who ran it, from where, the logic SQL, the physical SQL of each unit,
the rows sent or affected and the milliseconds from routing to the last row.
SQL text is shortened (``_text.shorten_sql``); passwords never pass through
here (clients authenticate by scramble).
"""

from __future__ import annotations

import datetime as dt
import json
import threading
from pathlib import Path
from typing import Any, Sequence, TextIO

from ddm_core._text import shorten_sql

__all__ = ["AuditLog"]

_SQL_SHOWN = 2000  # characters of each statement kept in a record


class AuditLog:
    """Appends records to ``path`` (created if missing), thread-safe.

    Args:
        path: The JSON-lines file.
        threshold_ms: Statements at least this slow are recorded (``0``: every one, ``inf``: none).
    """

    def __init__(self, path: str | Path, threshold_ms: float) -> None:
        self.path = Path(path)
        self.threshold_ms = threshold_ms
        self._lock = threading.Lock()
        self._file: TextIO | None = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - kept open; close()

    def record(
        self, *, user: str | None, client: str, sql: str, units: Sequence[tuple[str, str]], rows: int, ms: float,
        error: str | None = None,
    ) -> bool:  # fmt: skip
        """Write one record when ``ms`` reaches the threshold; ``True`` when written."""
        if ms < self.threshold_ms:
            return False
        entry: dict[str, Any] = {
            "time": dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds"),
            "user": user,
            "client": client,
            "sql": shorten_sql(sql, _SQL_SHOWN),
            "physical": [{"data_source": ds, "sql": shorten_sql(text, _SQL_SHOWN)} for ds, text in units],
            "rows": rows,
            "ms": round(ms, 3),
        }
        if error is not None:
            entry["error"] = error
        line = json.dumps(entry, ensure_ascii=False, default=str)
        with self._lock:
            if self._file is None:
                return False
            self._file.write(line + "\n")
            self._file.flush()
        return True

    def configure(self, path: str | Path, threshold_ms: float) -> None:
        """A reload's ``auditLog`` / ``slowSqlMs``: another file is opened before the old one is closed.

        Raises:
            OSError: the new file cannot be opened (the old one stays in use).
        """
        path = Path(path)
        new_file = open(path, "a", encoding="utf-8") if path != self.path else None  # noqa: SIM115 - kept open
        with self._lock:
            self.threshold_ms = threshold_ms
            if new_file is not None:
                old, self._file, self.path = self._file, new_file, path
                if old is not None:
                    old.close()

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
