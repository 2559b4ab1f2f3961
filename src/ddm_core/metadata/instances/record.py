"""One running instance as the registry stores it, and the store contract every backend meets.

An instance is an executor or a proxy following a configuration center. Its
record says who it is (id, role, host, pid, when it started) and which version
of the center it serves (``version``: the source's own number, the one a
migration publishes; ``digest``: SHA-256 of that version's text). A store keeps
each record under a deadline: the instance refreshes it, and a record whose
instance died disappears when the deadline passes (etcd lease, Redis expiry,
a table row's ``expires_at`` on the database's clock).
"""

from __future__ import annotations

import json
import os
import re
import socket
import time
import uuid
from dataclasses import asdict, dataclass, replace
from typing import Any, Callable, Protocol, TypeVar

from ddm_core.errors import ConfigError, SourceUnavailableError
from ddm_core.metadata.reload import ConfigVersion

__all__ = ["ROLES", "InstanceRecord", "InstanceStore", "source_version", "new_record", "client_call"]

#: What an instance is: an executor in an application, or a ``ddm proxy`` process.
ROLES = ("executor", "proxy")

# The number leads every numbered source's revision: "<version>:<checksum>" (table, Redis),
# "<version>@<etcd revision>" (etcd).
_T = TypeVar("_T")

_REVISION = re.compile(r"(\d+)[:@]")


def source_version(version: ConfigVersion) -> int | None:
    """The configuration center's number of ``version`` (``None``: not from a numbered source, e.g. a snapshot)."""
    found = _REVISION.match(version.revision)
    return int(found.group(1)) if found else None


@dataclass(frozen=True, slots=True)
class InstanceRecord:
    """One registered instance.

    Attributes:
        instance_id: Unique per process start (a UUID).
        role: ``executor`` or ``proxy``.
        host / pid: Where it runs.
        started_at: Wall time it started (seconds since the epoch).
        version: The center's number of the version it serves (``None``: unknown).
        digest: SHA-256 of that version's text.
        heartbeat_age_s: Seconds since its record was last refreshed, on the store's
            clock (filled in when read back; 0 when written).
    """

    instance_id: str
    role: str
    host: str
    pid: int
    started_at: float
    version: int | None
    digest: str
    heartbeat_age_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def encode(self) -> str:
        """The JSON text Redis and etcd keep (``heartbeat_age_s`` is the store's to say)."""
        data = self.to_json()
        data.pop("heartbeat_age_s")
        return json.dumps(data, sort_keys=True)

    @classmethod
    def decode(cls, text: str | bytes, heartbeat_age_s: float) -> InstanceRecord:
        """Read :meth:`encode`'s text back.

        Raises:
            ConfigError: the text is not an instance record (names the field).
        """
        try:
            data = json.loads(text)
            version = data["version"]
            return cls(str(data["instance_id"]), str(data["role"]), str(data["host"]), int(data["pid"]),
                       float(data["started_at"]), None if version is None else int(version), str(data["digest"]),
                       max(0.0, heartbeat_age_s))  # fmt: skip
        except (ValueError, TypeError, KeyError) as exc:
            raise ConfigError(f"an instance registry entry is not an instance record ({exc!r}): {text[:80]!r}") from exc

    @property
    def where(self) -> str:
        """``"proxy on app-3 pid 4120"``: how reports name it."""
        return f"{self.role} on {self.host} pid {self.pid}"

    def serving(self, version: ConfigVersion) -> InstanceRecord:
        """This record, now serving ``version``."""
        return replace(self, version=source_version(version), digest=version.digest)


def new_record(role: str, version: ConfigVersion) -> InstanceRecord:
    """The record of this process, serving ``version``.

    Raises:
        ConfigError: ``role`` is not one of :data:`ROLES`.
    """
    if role not in ROLES:
        raise ConfigError(f"instance role {role!r} must be one of {', '.join(ROLES)}", role=role)
    return InstanceRecord(uuid.uuid4().hex, role, socket.gethostname(), os.getpid(), time.time(),
                          source_version(version), version.digest)  # fmt: skip


class InstanceStore(Protocol):
    """Where records live; every method raises :class:`~ddm_core.errors.SourceUnavailableError`
    when the backend cannot be reached."""

    @property
    def where(self) -> str:
        """Names the store in messages."""
        ...

    def keep(self, record: InstanceRecord, ttl: float) -> None:
        """Store ``record`` (new or changed) and push its deadline to ``ttl`` seconds from now."""
        ...

    def remove(self, record: InstanceRecord) -> None:
        """Drop ``record`` now (a clean stop)."""
        ...

    def live(self) -> list[InstanceRecord]:
        """Every record whose deadline has not passed."""
        ...

    def newest_version(self) -> int | None:
        """The newest version the configuration center holds (``None``: none yet)."""
        ...

    def close(self) -> None:
        """Release the store's connection."""
        ...


def client_call(where: str, source: str, what: str, work: Callable[[], _T]) -> _T:
    """``work()`` on a store's client library; any failure is the store being unavailable (the
    libraries' errors have no base class the metadata layer can import)."""
    try:
        return work()
    except Exception as exc:
        raise SourceUnavailableError(f"{where}: cannot {what}: {exc}", source=source) from exc
