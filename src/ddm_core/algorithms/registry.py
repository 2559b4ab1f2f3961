"""Algorithm types by name, and configured algorithms by strategy id.

Two registries, for two kinds of name:

* **Type names** (``MOD``, ``HASH_MOD``, ``SLOTS`` ...): classes, registered
  with :func:`register` at import time; :func:`create` builds a configured
  instance from a type name and props. User code may register its own types
  the same way.
* **Strategy ids** (an annotation carries ``"user_id_mod_16"``, never a class:
  a class name that one service knows and another does not breaks a gradual
  rollout; docs/architecture.md#strategy-ids-not-classes). A :class:`StrategyRegistry` maps ids to
  configured instances; it is immutable, so the metadata layer builds a new
  one on reload and swaps it atomically. ShardingSphere's
  ``shardingAlgorithms: {db-inline: {type: INLINE, props: ...}}`` is exactly
  such a table: the algorithm name *is* the strategy id.
"""

from __future__ import annotations

import threading
from types import MappingProxyType
from typing import Any, Iterator, Mapping, TypeVar

from ddm_core.errors import ConfigError
from ddm_core.algorithms.base import ShardingAlgorithm

__all__ = ["register", "create", "known_types", "algorithm_class", "StrategyRegistry"]

_A = TypeVar("_A", bound=type[ShardingAlgorithm])

_TYPES: dict[str, type[ShardingAlgorithm]] = {}
_LOCK = threading.Lock()


def register(cls: _A) -> _A:
    """Class decorator: make ``cls`` creatable by its ``type_name`` (case-insensitive).

    Raises:
        ConfigError: ``type_name`` is empty or already taken by another class.
    """
    key = _key(getattr(cls, "type_name", ""))
    if not key:
        raise ConfigError(f"{cls.__name__} has no type_name to register under", value=cls.__name__)
    with _LOCK:
        existing = _TYPES.get(key)
        if existing is not None and existing is not cls:
            raise ConfigError(
                f"algorithm type {key!r} is already registered by {existing.__module__}."
                f"{existing.__qualname__}",
                value=key,
            )
        _TYPES[key] = cls
    return cls


def known_types() -> list[str]:
    """Registered type names, sorted."""
    return sorted(_TYPES)


def algorithm_class(type_name: str) -> type[ShardingAlgorithm]:
    """The class registered for ``type_name``.

    Raises:
        ConfigError: Unknown type, listing the known ones.
    """
    cls = _TYPES.get(_key(type_name))
    if cls is None:
        raise ConfigError(
            f"unknown sharding algorithm type {type_name!r}; known types: {', '.join(known_types())}",
            algorithm_type=type_name,
            value=type_name,
        )
    return cls


def create(
    type_name: str, props: Mapping[str, Any] | None = None, *, name: str = ""
) -> ShardingAlgorithm:
    """A configured algorithm of type ``type_name``.

    Raises:
        ConfigError: Unknown type (listing the known ones) or invalid props
            (naming the algorithm, type, prop and value).
    """
    if not isinstance(type_name, str):
        raise ConfigError(
            f"sharding algorithm {name!r}: type must be a string, not {type_name!r}",
            algorithm=name,
            value=type_name,
        )
    return algorithm_class(type_name)(props or {}, name=name)


def _key(type_name: Any) -> str:
    return type_name.strip().upper() if isinstance(type_name, str) else ""


class StrategyRegistry(Mapping[str, ShardingAlgorithm]):
    """Immutable strategy id → configured algorithm.

    Args:
        definitions: id → either a ready :class:`ShardingAlgorithm` or a
            definition ``{"type": "SALTED_MOD", "props": {...}}``.

    Raises:
        ConfigError: A definition is malformed or its algorithm invalid.
    """

    def __init__(self, definitions: Mapping[str, Any] | None = None) -> None:
        built: dict[str, ShardingAlgorithm] = {}
        for sid, spec in (definitions or {}).items():
            if not isinstance(sid, str) or not sid.strip():
                raise ConfigError(f"strategy ids must be non-empty strings, got {sid!r}", value=sid)
            built[sid] = self._build(sid, spec)
        self._algorithms = MappingProxyType(built)

    @staticmethod
    def _build(sid: str, spec: Any) -> ShardingAlgorithm:
        if isinstance(spec, ShardingAlgorithm):
            return spec
        if not isinstance(spec, Mapping) or "type" not in spec:
            raise ConfigError(
                f"strategy {sid!r}: a definition needs a 'type' (and optional 'props'), got {spec!r}",
                strategy=sid,
                value=spec,
            )
        extra = sorted(set(spec) - {"type", "props"})
        if extra:
            raise ConfigError(
                f"strategy {sid!r}: unknown key {extra[0]!r} (a definition has 'type' and 'props')",
                strategy=sid,
                value=extra[0],
            )
        props = spec.get("props") or {}
        if not isinstance(props, Mapping):
            raise ConfigError(f"strategy {sid!r}: props must be a mapping, got {props!r}", strategy=sid, value=props)
        return create(spec["type"], props, name=sid)

    def resolve(self, strategy_id: str) -> ShardingAlgorithm:
        """The algorithm for ``strategy_id``.

        Raises:
            ConfigError: Unknown id, listing the known ones (an annotation or
                hint names a strategy nobody configured).
        """
        try:
            return self._algorithms[strategy_id]
        except KeyError:
            known = ", ".join(sorted(self._algorithms)) or "none"
            raise ConfigError(
                f"unknown sharding strategy id {strategy_id!r}; configured ids: {known}",
                strategy=strategy_id,
                value=strategy_id,
            ) from None

    def with_strategy(self, strategy_id: str, spec: Any) -> StrategyRegistry:
        """A new registry with ``strategy_id`` added or replaced (this one is unchanged)."""
        merged: dict[str, Any] = dict(self._algorithms)
        merged[strategy_id] = spec
        return StrategyRegistry(merged)

    def __getitem__(self, strategy_id: str) -> ShardingAlgorithm:
        return self._algorithms[strategy_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._algorithms)

    def __len__(self) -> int:
        return len(self._algorithms)

    def __repr__(self) -> str:
        inner = ", ".join(f"{k!r}: {v.describe()}" for k, v in self._algorithms.items())
        return f"StrategyRegistry({{{inner}}})"
