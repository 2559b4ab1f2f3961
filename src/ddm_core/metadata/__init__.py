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

Where each job lives: the model (``model.py``); reading a document
(``load.py``, ddm-core's own format in ``native/``, ``shardingsphere.py``, with
the shared pieces ``build.py``, ``fields.py``, ``limits.py`` and the YAML guard
``yaml_tags.py`` / ``bounds.py``) and checking it (``validate.py``); writing it
back (``dump.py``); the blocks a version carries during a migration
(``migration.py``, ``phases.py``) or a gray cut-over (``cutover.py``,
``buckets.py``); the holder that reloads versions (``reload.py``, with the rule
that a reload never moves data, ``placement.py``) and the sources it reads them
from (``sources/``: a file, memory, a database table, Redis).
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
