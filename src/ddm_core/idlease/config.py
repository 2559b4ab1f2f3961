"""``lease_config_worker_ids``: the worker ids a configuration's ``workerId: lease`` key generators need,
leased from the store the configuration comes from (docs/worker-leases.md#workerid-lease-in-a-configuration).

One lease per id family the configuration leases for (SNOWFLAKE: ids 0..1023; GENE: 0 .. 2**worker-bits
- 1), kept under the configuration's own prefix on etcd (``<prefix>/worker-leases/<family>/``), and
installed for the INSERT router (:mod:`ddm_core.route.insert.leased_workers`). Releasing uninstalls
them: an INSERT needing one is then refused rather than drawn from a worker id no longer held.
"""

from __future__ import annotations

from ddm_core.errors import ConfigError
from ddm_core.idlease.etcd import lease_worker_id_etcd
from ddm_core.idlease.lease import WorkerLease
from ddm_core.metadata.limits import KEY_GENERATOR_RANGES
from ddm_core.metadata.model import KeyGeneratorSpec, ShardingConfig
from ddm_core.metadata.sources import ConfigSource
from ddm_core.metadata.sources.etcd import EtcdSource
from ddm_core.route.insert.leased_workers import forget_leased_worker, use_leased_worker

__all__ = ["ConfigWorkerLeases", "lease_config_worker_ids", "leased_families"]


def leased_families(config: ShardingConfig) -> dict[str, int]:
    """``{family: max_workers}`` of the key generators of ``config`` that say ``workerId: lease``."""
    specs: list[KeyGeneratorSpec] = list(config.key_generators.values())
    specs += [t.key_generation.generator for t in config.tables.values() if t.key_generation is not None]
    families: dict[str, int] = {}
    for spec in specs:
        if not spec.leased:
            continue
        if spec.type == "GENE":
            bits = spec.props.get("worker-bits", KEY_GENERATOR_RANGES["worker-bits"].default)
            families["GENE"] = min(families.get("GENE", 1 << 20), 1 << int(bits or 0))
        else:
            families["SNOWFLAKE"] = 1024
    return families


class ConfigWorkerLeases:
    """The leases taken for one configuration; :meth:`release` frees them (and stops their ids)."""

    def __init__(self, leases: dict[str, WorkerLease]) -> None:
        self.leases = leases

    def release(self) -> None:
        for family, lease in self.leases.items():
            forget_leased_worker(family, lease)
            lease.release()

    def __enter__(self) -> "ConfigWorkerLeases":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def lease_config_worker_ids(source: ConfigSource, config: ShardingConfig, *, ttl: float = 30.0) -> ConfigWorkerLeases:
    """Lease a worker id for each id family ``config`` leases for, from ``source``'s store, and install them.

    Raises:
        ConfigError: the configuration leases worker ids and ``source`` keeps no leases (only an
            etcd source does; elsewhere use :func:`~ddm_core.idlease.lease_worker_id` and a fixed workerId).
        NoFreeWorkerIdError: every id of a family is held.
    """
    families = leased_families(config)
    if not families:
        return ConfigWorkerLeases({})
    if not isinstance(source, EtcdSource):
        raise ConfigError(f"key generators with workerId: lease need a configuration on etcd, which keeps the leases; "
                          f"{source!r} does not: configure a workerId per process, or lease one with "
                          "ddm_core.lease_worker_id and configure it", field="workerId")  # fmt: skip
    taken: dict[str, WorkerLease] = {}
    try:
        for family, max_workers in sorted(families.items()):
            taken[family] = lease_worker_id_etcd(source.client, namespace=family.lower(), max_workers=max_workers,
                                                 ttl=ttl, prefix=f"{source.prefix}/worker-leases")  # fmt: skip
    except BaseException:
        ConfigWorkerLeases(taken).release()
        raise
    for family, lease in taken.items():
        use_leased_worker(family, lease)
    return ConfigWorkerLeases(taken)
