"""The one protocol every sharding algorithm follows.

An algorithm maps shard-key values to *target names*: data sources for a
database strategy, physical tables for a table strategy (the two strategies
are independent — ``hash(user_id)`` may pick the database while
``order_no`` picks the table). Targets are passed in on every call, in
configured order, so one configured algorithm serves every logic table that
names it.

Four entry points:

* :meth:`ShardingAlgorithm.precise` — ``column = value`` (and each value of an
  ``IN`` list): column → one value in, normally one target out.
* :meth:`ShardingAlgorithm.range` — ``BETWEEN`` / ``<`` / ``>=``: column →
  :class:`ValueRange` in, every target that may hold a matching row out. The
  default is every target (conservative); algorithms with
  :attr:`~ShardingAlgorithm.supports_range` narrow it. A router should say in
  its plan when a range fell back to every target.
* :meth:`ShardingAlgorithm.batch` — a whole column as a numpy array in (bulk
  INSERT, migration backfill), the target *index* of each row out. MOD,
  HASH_MOD, SALTED_MOD, VOLUME_RANGE, BOUNDARY_RANGE, SLOTS, GENE,
  CONSISTENT_HASH and COMPLEX_HASH_MOD route integer arrays without a Python
  call per row.
* :meth:`ShardingAlgorithm.scalar` / :meth:`~ShardingAlgorithm.multi_scalar`
  — built once per target list: a function from one value (or one value per
  column) to the target index, for the router's point fast path (a cached
  ``WHERE key = ?`` route). Every built-in algorithm returns a closure over
  precomputed lookups; it must agree with :meth:`precise`.

Values are never routed to a default target: a missing column raises
:class:`~ddm_core.errors.ShardKeyNotFoundError`, ``None`` and values of the
wrong type raise :class:`~ddm_core.errors.ShardValueError`, a result no target
answers to raises :class:`~ddm_core.errors.RoutingError`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, ClassVar, Mapping, Sequence

import numpy as np

from ddm_core.errors import RoutingError, ShardKeyNotFoundError
from ddm_core.algorithms._props import Props
from ddm_core.algorithms._targets import TargetSet, target_set

__all__ = ["ValueRange", "ShardingAlgorithm", "TargetSet"]


@dataclass(frozen=True)
class ValueRange:
    """A range condition on one column; a ``None`` bound is unbounded.

    ``ValueRange(10, 20)`` is ``BETWEEN 10 AND 20``; ``ValueRange(upper=5,
    upper_closed=False)`` is ``< 5``.
    """

    lower: Any = None
    upper: Any = None
    lower_closed: bool = True
    upper_closed: bool = True

    @property
    def bounded(self) -> bool:
        """Both bounds are present."""
        return self.lower is not None and self.upper is not None


class ShardingAlgorithm(ABC):
    """Base class of every sharding algorithm.

    Subclasses set :attr:`type_name` (the registry key), declare their props
    in :attr:`PROPS` (name → one-line description; any other prop is a
    :class:`~ddm_core.errors.ConfigError`) and implement :meth:`_configure`
    and :meth:`precise`.

    Args:
        props: The algorithm's properties, as in a ShardingSphere
            ``shardingAlgorithms.<name>.props`` block (strings are accepted
            wherever a number or boolean is expected).
        name: The configured name (strategy id), used in every message.

    Raises:
        ConfigError: A prop is missing, unknown or invalid; the message names
            the algorithm name, its type, the prop and the value.
    """

    type_name: ClassVar[str] = ""
    #: ``True`` when :meth:`range` can narrow the targets. An instance may
    #: override it (INLINE with ``allow-range-query-with-inline-sharding``).
    supports_range: ClassVar[bool] = False
    #: Known props: name → short description (also the documentation).
    PROPS: ClassVar[Mapping[str, str]] = {}

    def __init__(self, props: Mapping[str, Any] | None = None, *, name: str = "") -> None:
        self.name = name
        self.props: Mapping[str, Any] = MappingProxyType(dict(props or {}))
        reader = Props(self.type_name, name, self.props, self.PROPS)
        self._configure(reader)
        reader.finish()

    # -- to implement ---------------------------------------------------------

    @abstractmethod
    def _configure(self, props: Props) -> None:
        """Read and validate the props (called once, by ``__init__``)."""

    @abstractmethod
    def precise(self, targets: Sequence[str], values: Mapping[str, Any]) -> list[str]:
        """Targets for one value per sharding column (usually exactly one).

        Args:
            targets: The available target names, in configured order (a
                :class:`TargetSet` avoids rebuilding the name index per call).
            values: Sharding column → value. Single-column algorithms take the
                one value whatever the column is called; HINT_INLINE receives
                ``{"value": hint_value}``.

        Raises:
            ShardKeyNotFoundError: A column the algorithm needs is missing.
            ShardValueError: A value is ``None`` or of a type the algorithm
                does not define.
            RoutingError: No available target answers to the computed result.
        """

    # -- defaults ---------------------------------------------------------------

    def range(self, targets: Sequence[str], ranges: Mapping[str, ValueRange]) -> list[str]:
        """Every target that may hold a row in the ranges (default: all targets)."""
        return list(targets)

    def batch(self, targets: Sequence[str], columns: Mapping[str, np.ndarray]) -> np.ndarray:
        """The target index (into ``targets``) of every row, as an ``intp`` array.

        The default calls :meth:`precise` once per row; fast algorithms
        override it with numpy / compiled paths. Every row must route to
        exactly one target.
        """
        ts = target_set(targets)
        names = list(columns)
        arrays = [np.asarray(columns[c]) for c in names]
        n = _batch_length(self, arrays, names)
        out = np.empty(n, dtype=np.intp)
        lists = [a.tolist() for a in arrays]
        position = ts.position
        for i in range(n):
            row = {c: lst[i] for c, lst in zip(names, lists)}
            got = self.precise(ts, row)
            if len(got) != 1:
                raise RoutingError(
                    f"{self.label}: row {i} ({row}) routes to {len(got)} targets {got}; "
                    "a batch row needs exactly one",
                    algorithm=self.name,
                    row=i,
                    targets=got,
                )
            out[i] = position[got[0]]
        return out

    def scalar(self, targets: Sequence[str], column: str) -> Callable[[Any], int]:
        """A one-value function ``value → index into targets`` for the router's point fast path.

        Built once per target list; ``column`` is the strategy's sharding
        column (lower case, as the general path passes it to :meth:`precise`).
        The function must give :meth:`precise`'s one target for every value it
        returns on; it raises (any exception) for a value it cannot route to
        exactly one target, and the router then takes the general path, which
        raises the full error. The default wraps :meth:`precise`; the built-in
        algorithms return closures over their precomputed lookups.
        """
        ts = target_set(targets)
        position = ts.position

        def via_precise(value: Any) -> int:
            return position[self._only(self.precise(ts, {column: value}), value)]

        return via_precise

    def multi_scalar(self, targets: Sequence[str], columns: Sequence[str]) -> Callable[[Sequence[Any]], int]:
        """Like :meth:`scalar` for a complex strategy: ``values[i]`` is the value of ``columns[i]``."""
        ts = target_set(targets)
        position = ts.position
        names = tuple(columns)

        def via_precise(values: Sequence[Any]) -> int:
            return position[self._only(self.precise(ts, dict(zip(names, values))), values)]

        return via_precise

    def describe(self) -> str:
        """Short text for route plans, e.g. ``HASH_MOD(count=4)``."""
        return f"{self.type_name}()"

    def check_targets(self, targets: Sequence[str]) -> None:
        """Check at start that ``targets`` can hold every result (default: nothing to check).

        The metadata layer calls this with the full target list of a
        strategy; numeric-suffix algorithms check that each result number has
        exactly one target, named-target algorithms that every named target
        exists.

        Raises:
            ConfigError: Naming the algorithm and the missing or ambiguous targets.
        """

    # -- helpers for subclasses -----------------------------------------------

    @property
    def label(self) -> str:
        """``MOD 'db-mod'`` — how messages name this algorithm."""
        return f"{self.type_name} {self.name!r}" if self.name else self.type_name

    def _only(self, got: Sequence[str], value: Any) -> str:
        """The one target of a point route (a scalar cannot stand for several)."""
        if len(got) != 1:
            raise RoutingError(
                f"{self.label}: value {value!r} routes to {len(got)} targets {list(got)}; a point route needs one",
                algorithm=self.name,
                value=value,
                targets=list(got),
            )
        return got[0]

    def _single(self, values: Mapping[str, Any]) -> tuple[str, Any]:
        """The one (column, value) of a single-column algorithm."""
        if len(values) == 1:
            for item in values.items():
                return item
        if not values:
            raise ShardKeyNotFoundError(
                f"{self.label}: no sharding value given; a sharded statement needs the shard key",
                algorithm=self.name,
            )
        raise RoutingError(
            f"{self.label} shards by one column but got {len(values)}: {sorted(values)}",
            algorithm=self.name,
            columns=sorted(values),
        )

    def _single_array(self, columns: Mapping[str, np.ndarray]) -> tuple[str, np.ndarray]:
        column, arr = self._single(columns)
        a = np.asarray(arr)
        if a.ndim != 1:
            raise RoutingError(
                f"{self.label}: batch column {column!r} must be 1-D, got shape {a.shape}",
                algorithm=self.name,
                column=column,
            )
        return column, a

    def _column(self, values: Mapping[str, Any], column: str) -> Any:
        """The value of a named column of a multi-column algorithm."""
        try:
            return values[column]
        except KeyError:
            folded = column.lower()
            for key, value in values.items():  # SQL column names are case-insensitive
                if key.lower() == folded:
                    return value
            raise ShardKeyNotFoundError(
                f"{self.label} needs sharding column {column!r}; got {sorted(values)}",
                algorithm=self.name,
                column=column,
            ) from None

    def __repr__(self) -> str:
        name = f" {self.name!r}" if self.name else ""
        return f"<{type(self).__name__}{name} {self.describe()}>"

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt from its props (worker processes of a migration get the same algorithm).
        return (_rebuild, (type(self), dict(self.props), self.name))


def _rebuild(cls: type[ShardingAlgorithm], props: dict[str, Any], name: str) -> ShardingAlgorithm:
    return cls(props, name=name)


def _batch_length(alg: ShardingAlgorithm, arrays: list[np.ndarray], names: list[str]) -> int:
    if not arrays:
        raise ShardKeyNotFoundError(f"{alg.label}: batch got no columns", algorithm=alg.name)
    lengths = {a.shape[0] if a.ndim == 1 else -1 for a in arrays}
    if len(lengths) != 1 or -1 in lengths:
        raise RoutingError(
            f"{alg.label}: batch columns {names} must be 1-D arrays of one length, "
            f"got shapes {[a.shape for a in arrays]}",
            algorithm=alg.name,
        )
    return lengths.pop()
