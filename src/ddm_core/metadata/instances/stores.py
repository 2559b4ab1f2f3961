"""Which instance store goes with a configuration source: the registry lives where the versions do.

The table source's instances are rows next to its ``ddm_config`` table, the
Redis source's are keys under its prefix, the etcd source's are keys under its
prefix held by a lease. A source of another kind offers its store with an
``instance_store()`` method. A file or in-memory source has no shared place, so
its instances are not registered (and a fence over them keeps its fixed delay).
"""

from __future__ import annotations

from typing import Any

from ddm_core.metadata.instances.record import InstanceStore
from ddm_core.metadata.sources.etcd import EtcdSource
from ddm_core.metadata.sources.redis import RedisSource
from ddm_core.metadata.sources.table import TableSource

__all__ = ["store_for"]


def store_for(source: Any) -> InstanceStore | None:
    """The instance store of a configuration source (``None``: the source has no shared place)."""
    offered = getattr(source, "instance_store", None)
    if callable(offered):
        store: InstanceStore = offered()
        return store
    if isinstance(source, TableSource):
        from ddm_core.metadata.instances.table import TableInstances

        return TableInstances(source)
    if isinstance(source, RedisSource):
        from ddm_core.metadata.instances.redis import RedisInstances

        return RedisInstances(source)
    if isinstance(source, EtcdSource):
        from ddm_core.metadata.instances.etcd import EtcdInstances

        def newest() -> int | None:
            pointer = source.pointer()
            return None if pointer is None else pointer.version

        return EtcdInstances(source.client, source.prefix, newest_version=newest)
    return None
