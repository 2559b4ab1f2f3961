"""The metadata package's import paths: the names callers import keep resolving, each to its one definition.

Configuration sources moved to ``metadata/sources/``, the own format's reader to
``metadata/native/``, the cut-over's bucket vocabulary to ``metadata/buckets.py``
and the blocks' routing values into ``metadata/model.py``; the modules callers
import them from (the block modules, the package faces, the Redis source's
documented path) re-export them. A re-export that goes missing, or turns into a
second definition, fails here.
"""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import ddm_core.metadata

#: (path callers import from, name, module that defines it)
REEXPORTS = [
    ("ddm_core.metadata", "ConfigSource", "ddm_core.metadata.sources"),
    ("ddm_core.metadata", "FileSource", "ddm_core.metadata.sources.file"),
    ("ddm_core.metadata", "StaticSource", "ddm_core.metadata.sources.static"),
    ("ddm_core.metadata", "ConfigHolder", "ddm_core.metadata.reload"),
    ("ddm_core.metadata.redis_source", "RedisSource", "ddm_core.metadata.sources.redis"),
    ("ddm_core.metadata.redis_source", "DEFAULT_PREFIX", "ddm_core.metadata.sources.redis"),
    ("ddm_core.metadata.native", "read_native", "ddm_core.metadata.native"),
    ("ddm_core.metadata.native", "DEFAULT_SLOT_COUNT", "ddm_core.metadata.native.tables"),
    ("ddm_core.metadata.native", "PROXY_LIMIT_FIELDS", "ddm_core.metadata.limits"),
    ("ddm_core.metadata.native", "data_source_entry", "ddm_core.metadata.native.data_sources"),
    ("ddm_core.metadata.cutover", "BucketState", "ddm_core.metadata.buckets"),
    ("ddm_core.metadata.cutover", "L_AUTHORITATIVE", "ddm_core.metadata.buckets"),
    ("ddm_core.metadata.cutover", "DUAL_STATES", "ddm_core.metadata.buckets"),
    ("ddm_core.metadata.cutover", "bucket_lookup", "ddm_core.metadata.buckets"),
    ("ddm_core.metadata.cutover", "bucket_slots", "ddm_core.metadata.buckets"),
    ("ddm_core.metadata.cutover", "parse_buckets", "ddm_core.metadata.buckets"),
    ("ddm_core.metadata.cutover", "format_buckets", "ddm_core.metadata.buckets"),
    ("ddm_core.metadata.cutover", "CutoverRouting", "ddm_core.metadata.model"),
    ("ddm_core.metadata.cutover", "CutoverConfigError", "ddm_core.errors"),
    ("ddm_core.metadata.migration", "MigrationRouting", "ddm_core.metadata.model"),
    ("ddm_core.metadata.migration", "MigrationConfigError", "ddm_core.errors"),
    ("ddm_core.metadata.yaml_tags", "Tagged", "ddm_core.metadata.tagged"),
    ("ddm_core.metadata.limits", "IntRange", "ddm_core.metadata.int_range"),
    ("ddm_core.metadata.limits", "show_int", "ddm_core.metadata.int_range"),
    ("ddm_core.metadata.limits", "MAX_INT_DIGITS", "ddm_core.metadata.int_range"),
]


@pytest.mark.parametrize(("path", "name", "home"), REEXPORTS, ids=lambda v: str(v).rsplit(".", 1)[-1])
def test_a_moved_name_resolves_at_the_path_callers_use(path: str, name: str, home: str) -> None:
    module = importlib.import_module(path)
    assert name in getattr(module, "__all__", ()), f"{path} does not export {name}"
    assert getattr(module, name) is getattr(importlib.import_module(home), name)


def _metadata_modules() -> list[str]:
    return ["ddm_core.metadata"] + [
        info.name for info in pkgutil.walk_packages(ddm_core.metadata.__path__, "ddm_core.metadata.")
    ]


@pytest.mark.parametrize("path", _metadata_modules())
def test_every_exported_name_exists(path: str) -> None:
    module = importlib.import_module(path)
    missing = [n for n in getattr(module, "__all__", ()) if not hasattr(module, n)]
    assert missing == [], f"{path}.__all__ names what it does not hold: {missing}"
