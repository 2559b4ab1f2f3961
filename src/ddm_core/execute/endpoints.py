"""Which pool a unit borrows from: the primary's, or (reads) the replica the splitter picks.

Reads go to a replica (weighted random, or as the data source's ``load_balancer`` says) unless the
plan writes, a hint forced the primary, or a transaction is open (its units run on pinned
connections and never ask). Data sources with replicas go through :mod:`ddm_core.readwrite`
(docs/readwrite.md); a data source without replicas costs one dictionary lookup per unit.
"""

from __future__ import annotations

from typing import Any, Callable, Generic, Protocol, TypeVar

from ddm_core.errors import ExecutionError
from ddm_core.metadata.migration import routing_data_sources
from ddm_core.metadata.model import DataSource, Endpoint, ShardingConfig
from ddm_core.readwrite import ReadWriteSplitter
from ddm_core.readwrite.gtid_check import GtidCheck

__all__ = ["Endpoints", "data_source_of"]


class _Pool(Protocol):
    """What pool choice sets on a pool (the thread runner's ``EndpointPool`` and the asyncio one)."""

    split: Any
    breaker: Any


P = TypeVar("P", bound=_Pool)
P_co = TypeVar("P_co", bound=_Pool, covariant=True)


class _Registry(Protocol[P_co]):
    def pool(self, ds: DataSource, endpoint: Endpoint) -> P_co: ...


class Endpoints(Generic[P]):
    """Pool choice per unit over one registry of either runner (see the module docstring).

    Args:
        pools: Where pools are made and kept.
        split: The read/write splitter (replicas, read-your-writes, breakers), over the same registry.
        config: The configuration version in use (follows a ``ConfigHolder``).
    """

    def __init__(self, pools: _Registry[P], split: ReadWriteSplitter, config: Callable[[], ShardingConfig]) -> None:
        self.pools = pools
        self.split = split
        self._config = config
        # Data source and primary pool by name, for the config version in use: the hot path skips the lookups.
        self._primaries: tuple[ShardingConfig | None, dict[str, tuple[DataSource, P]]] = (None, {})

    def primary(self, data_source: str) -> P:
        return self.pool_of(data_source, read=False)

    def reader(self, data_source: str) -> P:
        return self.pool_of(data_source, read=True)

    def pool_of(self, data_source: str, *, read: bool) -> P:
        """The pool a unit on ``data_source`` borrows from: the splitter's choice for reads, else the primary's.

        A ``gtid`` read's check asks its servers here, blocking (the thread runner's way).
        """
        return self._chosen(data_source, read, self.split.read_pool)  # type: ignore[no-any-return]

    def choice_of(self, data_source: str, *, read: bool) -> P | GtidCheck:
        """As :meth:`pool_of`, but a ``gtid`` read's check comes back unanswered, for the caller to answer."""
        return self._chosen(data_source, read, self.split.read_choice)  # type: ignore[no-any-return]

    def plain_primary(self, data_source: str, config: ShardingConfig) -> P | None:
        """The primary's pool of ``data_source`` when it has no replicas (nor a splitter) and is known under
        ``config`` (the version in use): what :meth:`choice_of` returns for it, read or write, without the
        lookups; ``None``: ask :meth:`choice_of`."""
        version, known = self._primaries
        if version is not config:
            return None
        entry = known.get(data_source)
        if entry is None or entry[0].replicas or entry[1].split is not None:
            return None
        return entry[1]

    def _chosen(self, data_source: str, read: bool, reader: Callable[[DataSource], Any]) -> Any:
        config = self._config()
        version, known = self._primaries
        if version is not config:  # first use, or a reloaded configuration
            known = {}
            self._primaries = (config, known)
        entry = known.get(data_source)
        if entry is None:
            ds = data_source_of(config, data_source)
            if read and ds.replicas:  # the primary's pool is made only once something needs it
                return reader(ds)
            primary = self.pools.pool(ds, ds.primary)
            if ds.replicas:
                self.split.mark_primary(ds, primary)  # its units run through the splitter
            else:
                primary.split = None  # a reload took the replicas away
                primary.breaker = self.split.breakers.of(ds, ds.primary)  # every endpoint has one
            entry = known[data_source] = (ds, primary)
        ds, primary = entry
        if read and ds.replicas:
            return reader(ds)
        return primary


def data_source_of(config: ShardingConfig, name: str) -> DataSource:
    """The configured data source ``name`` (during a migration also the target's new ones).

    Raises:
        ExecutionError: no such data source.
    """
    try:  # during a migration also the target's new data sources (dual writes, shifted reads)
        return routing_data_sources(config)[name]
    except KeyError:
        raise ExecutionError(f"data source {name!r} is not configured", data_source=name) from None
