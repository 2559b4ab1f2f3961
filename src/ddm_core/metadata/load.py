"""``load_config(source)``: a path, YAML text or a dict → validated :class:`ShardingConfig`.

The source kind is detected (a mapping; a path-like or an existing file; text
with a newline or that is not a file name) and so is the format: a document
with ``rules`` (or ``databaseName`` / ``schemaName`` / ``mode``, or data
sources written with ShardingSphere keys and no ``tables``) is ShardingSphere
5.x YAML, anything else ddm-core's own format; a top-level ``format: ddm-core``
(written by :func:`~ddm_core.metadata.dump.to_native`) settles it, and
``format=`` forces one.

Every problem of the document is collected and raised together as one
:class:`~ddm_core.metadata.problems.ConfigValidationError`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any, Mapping, Union

from ddm_core.errors import ConfigError
from ddm_core.metadata.bounds import Refused, check_object
from ddm_core.metadata.build import Context
from ddm_core.metadata.limits import MAX_DOCUMENT_BYTES
from ddm_core.metadata.cutover import attach_cutover
from ddm_core.metadata.migration import attach_migration
from ddm_core.metadata.model import ConfigOrigin, ShardingConfig, freeze
from ddm_core.metadata.native import read_native
from ddm_core.metadata.problems import ConfigValidationError, Problem
from ddm_core.metadata.shardingsphere import read_shardingsphere
from ddm_core.metadata.validate import validate
from ddm_core.metadata.yaml_tags import parse_yaml

__all__ = ["load_config", "parse_config", "detect_format", "digest_of", "ConfigSourceType"]

log = logging.getLogger("ddm_core.metadata")

ConfigSourceType = Union[str, bytes, "os.PathLike[str]", Mapping[str, Any]]
_FORMAT_ALIASES = {
    "native": "native", "ddm": "native", "ddm-core": "native", "shardingsphere": "shardingsphere", "ss": "shardingsphere",
}  # fmt: skip
_SS_KEYS = frozenset({"rules", "databaseName", "schemaName", "mode"})
_SS_DS_KEYS = frozenset({"jdbcUrl", "dataSourceClassName", "driverClassName", "standardJdbcUrl"})
_YAML_SUFFIXES = (".yaml", ".yml", ".json")


def load_config(
    source: ConfigSourceType,
    *,
    format: str | None = None,
    check_env: bool = True,
) -> ShardingConfig:
    """Load and validate a configuration.

    Args:
        source: A file path (``str`` or path-like), YAML/JSON text (``str`` or
            ``bytes``), or an already parsed mapping.
        format: ``"native"`` or ``"shardingsphere"``; detected when ``None``.
        check_env: Check that every ``${ENV:NAME}`` / ``passwordEnv`` variable
            is set (``False`` defers it to :meth:`Secret.reveal`).

    Returns:
        The validated, immutable configuration.

    Raises:
        ConfigValidationError: listing every problem (a :class:`ConfigError`).
        ConfigError: the file cannot be read.
    """
    if isinstance(source, Mapping):
        return parse_config(source, origin="<dict>", format=format, check_env=check_env)
    if isinstance(source, bytes):
        return parse_config(_decode(source), origin="<string>", format=format, check_env=check_env)
    if isinstance(source, os.PathLike) or (isinstance(source, str) and _looks_like_path(source)):
        path = Path(source)
        text = _decode(_read_bounded(path))
        return parse_config(
            text, origin=str(path), format=format, base_dir=path.resolve().parent, check_env=check_env
        )
    if isinstance(source, str):
        return parse_config(source, origin="<string>", format=format, check_env=check_env)
    raise ConfigError(
        f"a configuration source must be a path, YAML text or a mapping, not {type(source).__name__}",
        value=type(source).__name__,
    )


def _read_bounded(path: Path) -> bytes:
    """The file's bytes; a file over the size limit is refused without reading it all."""
    try:
        with path.open("rb") as file:
            data = file.read(MAX_DOCUMENT_BYTES + 1)
    except OSError as exc:
        raise ConfigError(
            f"cannot read configuration file {str(path)!r}: {exc.strerror or exc}", path=str(path)
        ) from exc
    if len(data) > MAX_DOCUMENT_BYTES:
        raise ConfigValidationError.from_problems(
            str(path),
            [Problem("<document>", f"the file is larger than {MAX_DOCUMENT_BYTES} bytes (1 MiB), the limit")],
        )
    return data


def _decode(data: bytes) -> str:
    # Bytes that are not UTF-8 become lone surrogates, which the YAML reader reports
    # at the field holding them (rather than a codec error naming only an offset).
    return data.decode("utf-8", "surrogateescape")


def _looks_like_path(text: str) -> bool:
    if "\n" in text or not text.strip():
        return False
    if os.path.isfile(text):
        return True
    return text.strip().lower().endswith(_YAML_SUFFIXES) and ": " not in text


def digest_of(source: str | Mapping[str, Any]) -> str:
    """SHA-256 of the text, or of a mapping's canonical JSON."""
    if isinstance(source, str):
        data = source.encode("utf-8", "surrogateescape")
    else:
        try:
            text = json.dumps(source, sort_keys=True, default=str)
        except TypeError:  # keys of mixed types (1 and "a") cannot be sorted
            text = json.dumps(_str_keys(source), sort_keys=True, default=str)
        data = text.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def _str_keys(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _str_keys(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_str_keys(v) for v in value]
    return value


def detect_format(doc: Any) -> str:
    """``"shardingsphere"`` or ``"native"`` for a parsed document (see the module docstring)."""
    if not isinstance(doc, Mapping):
        return "native"
    keys = {str(k) for k in doc}
    declared = doc.get("format")
    if isinstance(declared, str) and declared.strip().lower() in _FORMAT_ALIASES:
        return _FORMAT_ALIASES[declared.strip().lower()]
    if keys & _SS_KEYS:
        return "shardingsphere"
    ds = doc.get("dataSources")
    if "tables" not in keys and isinstance(ds, Mapping):
        for spec in ds.values():
            inner = getattr(spec, "value", spec)  # 4.x class-tagged entries
            if isinstance(inner, Mapping) and ({str(k) for k in inner} & _SS_DS_KEYS or "props" in inner):
                return "shardingsphere"
    return "native"


def parse_config(
    source: str | Mapping[str, Any],
    *,
    origin: str,
    format: str | None = None,
    base_dir: Path | None = None,
    check_env: bool = True,
) -> ShardingConfig:
    """Parse and validate text or a mapping (what :func:`load_config` and the reload holder call).

    Args:
        source: YAML/JSON text or a parsed mapping.
        origin: Names the source in every message (file path, URL, ``<string>``).
        format: Forced format, else detected.
        base_dir: Directory relative SQLite paths resolve against.
        check_env: See :func:`load_config`.

    Raises:
        ConfigValidationError: listing every problem.
    """
    ctx = Context(origin, base_dir=base_dir, check_env=check_env)
    if isinstance(source, str):
        doc = parse_yaml(source, ctx.problems)
    else:
        doc = source
        try:
            check_object(doc, ctx.problems)
        except Refused:
            pass  # recorded; raised below
    ctx.problems.raise_if_any()
    if doc is None:
        ctx.problems.add("<document>", "the configuration is empty", None)
        ctx.problems.raise_if_any()
    fmt = _resolve_format(format, doc, ctx)
    if not isinstance(doc, Mapping):
        ctx.problems.add(
            "<document>", f"the configuration must be a mapping at the top, not {type(doc).__name__}", None
        )
        ctx.problems.raise_if_any()
    _refuse_foreign(doc, ctx)
    kwargs = read_shardingsphere(doc, ctx) if fmt == "shardingsphere" else read_native(doc, ctx, parse_config)
    pending = kwargs.pop("migration", None)  # needs the whole base configuration first
    cutover = kwargs.pop("cutover", None)  # likewise
    config = ShardingConfig(
        **kwargs,
        algorithms=freeze(dict(ctx.algorithms)),
        key_generators=freeze(dict(ctx.key_generators)),
        origin=ConfigOrigin(fmt, origin, digest_of(source)),
    )
    validate(config, ctx)
    ctx.problems.raise_if_any()
    if pending is not None:
        config = attach_migration(config, pending, ctx, parse_config)
        ctx.problems.raise_if_any()
    if cutover is not None:
        config = attach_cutover(config, cutover, ctx, parse_config)
        ctx.problems.raise_if_any()
    for warning in ctx.warnings:
        log.warning("%s", warning)
    return dataclasses.replace(config, warnings=tuple(ctx.warnings)) if ctx.warnings else config


def _resolve_format(format: str | None, doc: Any, ctx: Context) -> str:
    if format is None:
        return detect_format(doc)
    fmt = _FORMAT_ALIASES.get(format.strip().lower()) if isinstance(format, str) else None
    if fmt is None:
        raise ConfigError(
            f"unknown configuration format {format!r} (use native or shardingsphere)", value=format
        )
    return fmt


def _refuse_foreign(doc: Mapping[str, Any], ctx: Context) -> None:
    """Name the formats people paste by mistake instead of listing every key as unknown."""
    if "shardingRule" in doc or "masterSlaveRule" in doc:
        ctx.problems.add(
            "shardingRule" if "shardingRule" in doc else "masterSlaveRule",
            "this is ShardingSphere 4.x YAML, which is not supported; convert it to 5.x "
            "(rules: - !SHARDING ...)",
            None,
        )
        ctx.problems.raise_if_any()
    spring = doc.get("spring")
    if isinstance(spring, Mapping) and "shardingsphere" in spring:
        ctx.problems.add(
            "spring.shardingsphere",
            "Spring Boot property YAML is not supported; use ShardingSphere-JDBC's own YAML "
            "(dataSources + rules)",
            None,
        )
        ctx.problems.raise_if_any()
