"""Instance records as Redis keys that expire: ``<prefix>:instance:<id>``, next to the configuration's keys.

Each key is a hash (``record``: the JSON record, ``ttl_ms``: the deadline it
was given) with a Redis expiry; a refresh writes both again in one
transaction. Redis's own clock expires it, and the heartbeat's age is read
from it too (``ttl_ms`` minus the key's remaining ``PTTL``).
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar

from ddm_core.metadata.instances.record import InstanceRecord, client_call
from ddm_core.metadata.sources.redis import RedisSource

__all__ = ["RedisInstances"]

_T = TypeVar("_T")


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, (bytes, bytearray)) else str(value)


class RedisInstances:
    """The registry under ``<source prefix>:instance:`` on the Redis of ``source``."""

    def __init__(self, source: RedisSource) -> None:
        self.source = source
        self.client = source.client
        self.key_prefix = f"{source.prefix}:instance:"

    @property
    def where(self) -> str:
        return f"Redis instance keys {self.key_prefix}* of {self.source.name!r}"

    def _call(self, what: str, work: Callable[[], _T]) -> _T:
        return client_call(self.where, self.source.name, what, work)

    def keep(self, record: InstanceRecord, ttl: float) -> None:
        key, ttl_ms = self.key_prefix + record.instance_id, max(1, int(ttl * 1000))

        def write() -> None:
            with self.client.pipeline(transaction=True) as pipe:
                pipe.hset(key, mapping={"record": record.encode(), "ttl_ms": ttl_ms})
                pipe.pexpire(key, ttl_ms)
                pipe.execute()

        self._call("register this instance", write)

    def remove(self, record: InstanceRecord) -> None:
        self._call("remove this instance", lambda: self.client.delete(self.key_prefix + record.instance_id))

    def live(self) -> list[InstanceRecord]:
        def read() -> list[InstanceRecord]:
            keys = list(self.client.scan_iter(match=self.key_prefix + "*", count=500))
            with self.client.pipeline(transaction=False) as pipe:
                for key in keys:
                    pipe.hgetall(key)
                    pipe.pttl(key)
                answers = pipe.execute()
            found = []
            for fields, left in zip(answers[::2], answers[1::2]):
                fields = {_text(k): v for k, v in (fields or {}).items()}
                if "record" not in fields or int(left) < 0:  # expired between SCAN and HGETALL
                    continue
                age = (int(_text(fields.get("ttl_ms", b"0"))) - int(left)) / 1000
                found.append(InstanceRecord.decode(fields["record"], age))
            return sorted(found, key=lambda r: r.started_at)

        records: list[InstanceRecord] = self._call("read the instances", read)
        return records

    def newest_version(self) -> int | None:
        newest = self.source.latest()
        return None if newest is None else newest[0]

    def close(self) -> None:
        """Nothing to release: the client belongs to the configuration source."""
