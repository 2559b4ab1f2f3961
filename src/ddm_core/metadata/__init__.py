"""Metadata: the configuration model, its two input formats, validation and hot reload.

* :func:`load_config` — a path, YAML text or a dict (ddm-core's own format or
  ShardingSphere-JDBC 5.x YAML, detected) → validated, immutable
  :class:`ShardingConfig`; every problem of a file is raised together as one
  :class:`ConfigValidationError`.
* :class:`ConfigHolder` — the current version, swapped atomically on reload,
  numbered, snapshotted locally, started from the snapshot when the source is
  unreachable (docs/operations.md#configuration-reload).
* :func:`to_native` / :func:`dump_native` — any configuration written in
  ddm-core's own format (a ShardingSphere file converted, a snapshot).
"""

from ddm_core.metadata.dump import dump_native, to_native
from ddm_core.metadata.load import detect_format, load_config, parse_config
from ddm_core.metadata.model import (
    AlgorithmSpec,
    BindingGroup,
    ConfigOrigin,
    DataNode,
    DataSource,
    Endpoint,
    KeyGeneration,
    KeyGeneratorSpec,
    MetadataCenter,
    PoolSettings,
    RuntimeSettings,
    ReadWriteSettings,
    XaSettings,
    ShardedTable,
    ShardingConfig,
    SingleTable,
    Strategy,
    StrategyKind,
    TableKind,
)
from ddm_core.metadata.problems import ConfigValidationError, Problem
from ddm_core.metadata.reload import ConfigHolder, ConfigVersion, ReloadResult, SourceUnavailableError
from ddm_core.metadata.sources import ConfigSource
from ddm_core.metadata.sources.file import FileSource
from ddm_core.metadata.sources.static import StaticSource
from ddm_core.metadata.urls import Secret

__all__ = [
    "load_config",
    "parse_config",
    "detect_format",
    "to_native",
    "dump_native",
    "ShardingConfig",
    "ConfigOrigin",
    "DataSource",
    "Endpoint",
    "PoolSettings",
    "Secret",
    "ShardedTable",
    "DataNode",
    "Strategy",
    "StrategyKind",
    "AlgorithmSpec",
    "KeyGeneration",
    "KeyGeneratorSpec",
    "BindingGroup",
    "SingleTable",
    "RuntimeSettings",
    "ReadWriteSettings",
    "XaSettings",
    "MetadataCenter",
    "TableKind",
    "ConfigValidationError",
    "Problem",
    "ConfigHolder",
    "ConfigSource",
    "ConfigVersion",
    "FileSource",
    "StaticSource",
    "ReloadResult",
    "SourceUnavailableError",
]
