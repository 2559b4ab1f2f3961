"""Target name lists and the indexes algorithms look results up in.

Numeric-result algorithms (MOD, HASH_MOD, SALTED_MOD, the range and
AUTO_INTERVAL algorithms, COMPLEX_HASH_MOD) pick the target whose *trailing
digit run* equals the computed number, as ShardingSphere does — matched as a
number on the whole run, so ``t_order_1`` answers to 1 (and ``t_order_01``
too) but never to 11. INTERVAL matches a formatted time suffix
(``t_order_202401``) at the end of the name, not preceded by another digit.

Building these indexes costs a pass over the names, so they are kept on the
:class:`TargetSet` itself: build one per configured list and pass it on every
call (the router does, per table). A plain sequence is wrapped anew each call.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Iterator, Sequence, overload

import numpy as np

from ddm_core.errors import ConfigError, RoutingError

__all__ = ["TargetSet", "target_set", "NONE", "AMBIGUOUS", "show_targets"]

#: Lookup results that are not an index.
NONE = -1
AMBIGUOUS = -2

_TRAILING_DIGITS = re.compile(r"([0-9]+)\Z")
_LUT_LIMIT = 1 << 20


class TargetSet(Sequence[str]):
    """An immutable list of target names with cached lookups.

    Raises:
        ConfigError: A name is not a non-empty string or appears twice.
    """

    __slots__ = ("names", "position", "_numbers", "_luts", "_suffixes", "_hash")

    def __init__(self, names: Iterable[str]) -> None:
        self.names: tuple[str, ...] = tuple(names)
        position: dict[str, int] = {}
        for i, name in enumerate(self.names):
            if not isinstance(name, str) or not name:
                raise ConfigError(f"target names must be non-empty strings, got {name!r}", value=name)
            if name in position:
                raise ConfigError(f"target {name!r} is listed twice", value=name)
            position[name] = i
        self.position = position
        self._numbers: dict[int, int] | None = None
        self._luts: dict[int, np.ndarray] = {}
        self._suffixes: dict[str, int] = {}
        self._hash = hash(self.names)

    # -- Sequence -------------------------------------------------------------

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...
    def __getitem__(self, index: Any) -> Any:
        return self.names[index]

    def __len__(self) -> int:
        return len(self.names)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __contains__(self, name: object) -> bool:
        return name in self.position

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TargetSet):
            return self.names == other.names
        if isinstance(other, (tuple, list)):
            return self.names == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"TargetSet({show_targets(self.names)})"

    # -- lookups ----------------------------------------------------------------

    @property
    def numbers(self) -> dict[int, int]:
        """Trailing number → target index (:data:`AMBIGUOUS` when two names share it)."""
        numbers = self._numbers
        if numbers is None:
            numbers = {}
            for i, name in enumerate(self.names):
                m = _TRAILING_DIGITS.search(name)
                if m is not None:
                    n = int(m.group(1))
                    numbers[n] = AMBIGUOUS if n in numbers else i
            self._numbers = numbers
        return numbers

    def index_of_number(self, number: int) -> int:
        """Index of the target whose trailing number is ``number``, else NONE / AMBIGUOUS."""
        return self.numbers.get(number, NONE)

    def number_lut(self, count: int) -> np.ndarray | None:
        """``lut[k]`` = index of the target numbered ``k`` for ``k < count`` (NONE/AMBIGUOUS else).

        ``None`` when ``count`` is too large for a table (callers use :attr:`numbers`).
        """
        lut = self._luts.get(count)
        if lut is None:
            if count > _LUT_LIMIT:
                return None
            lut = np.full(count, NONE, dtype=np.intp)
            for n, i in self.numbers.items():
                if 0 <= n < count:
                    lut[n] = i
            lut.flags.writeable = False
            self._luts[count] = lut
        return lut

    def names_of_number(self, number: int) -> list[str]:
        """Every name whose trailing number is ``number`` (for messages)."""
        out = []
        for name in self.names:
            m = _TRAILING_DIGITS.search(name)
            if m is not None and int(m.group(1)) == number:
                out.append(name)
        return out

    def index_of_suffix(self, suffix: str) -> int:
        """Index of the one name ending with ``suffix`` (not right after another digit)."""
        found = self._suffixes.get(suffix)
        if found is None:
            matches = self.names_with_suffix(suffix)
            found = NONE if not matches else self.position[matches[0]] if len(matches) == 1 else AMBIGUOUS
            if len(self._suffixes) < 65536:
                self._suffixes[suffix] = found
        return found

    def names_with_suffix(self, suffix: str) -> list[str]:
        digit_start = suffix[:1].isdigit()
        out = []
        for name in self.names:
            if name.endswith(suffix):
                before = name[: len(name) - len(suffix)]
                if digit_start and before[-1:].isdigit():
                    continue
                out.append(name)
        return out


def target_set(targets: Sequence[str]) -> TargetSet:
    """``targets`` as a :class:`TargetSet`: as is when it already is one, else a new one.

    Raises:
        ConfigError: A name is not a non-empty string or appears twice.
    """
    if type(targets) is TargetSet:
        return targets
    return TargetSet(targets)


def show_targets(names: Sequence[str], limit: int = 8) -> str:
    """``['t_0', 't_1', ... (+14 more)]`` for messages."""
    shown = ", ".join(repr(n) for n in names[:limit])
    more = f", ... (+{len(names) - limit} more)" if len(names) > limit else ""
    return f"[{shown}{more}]"


def number_error(
    label: str, name: str, value: Any, number: int, ts: TargetSet, code: int, *, row: int | None = None
) -> RoutingError:
    """The RoutingError for a computed number no single target answers to."""
    where = f"row {row}: " if row is not None else ""
    if code == AMBIGUOUS:
        why = f"several targets end with the number {number}: {ts.names_of_number(number)}"
    else:
        why = f"no target's trailing number is {number} among {show_targets(ts.names)}"
    return RoutingError(
        f"{label}: {where}value {value!r} computes shard {number}, but {why}",
        algorithm=name,
        value=value,
        result=number,
        targets=ts.names,
    )


def missing_targets_error(label: str, name: str, named_by: str, missing: list[str], ts: TargetSet) -> ConfigError:
    """The ConfigError for target names an algorithm's props give but ``ts`` lacks.

    Args:
        named_by: What names them, with its verb: ``"weights name"``.
    """
    return ConfigError(
        f"sharding algorithm {label}: {named_by} target(s) {missing} missing from {show_targets(ts.names)}",
        algorithm=name,
        missing=missing,
    )


def check_numbers(label: str, name: str, ts: TargetSet, numbers: Iterable[int]) -> None:
    """ConfigError unless every number has exactly one target."""
    missing, ambiguous = [], []
    for n in numbers:
        code = ts.index_of_number(n)
        if code == NONE:
            missing.append(n)
        elif code == AMBIGUOUS:
            ambiguous.append(n)
    if missing or ambiguous:
        parts = []
        if missing:
            parts.append(f"no target for shard number(s) {_show_ints(missing)}")
        if ambiguous:
            parts.append(f"several targets for shard number(s) {_show_ints(ambiguous)}")
        raise ConfigError(
            f"sharding algorithm {label}: {'; '.join(parts)} among {show_targets(ts.names)}",
            algorithm=name,
            missing=missing,
            ambiguous=ambiguous,
        )


def _show_ints(values: list[int], limit: int = 10) -> str:
    shown = ", ".join(map(str, values[:limit]))
    return shown + (f", ... (+{len(values) - limit} more)" if len(values) > limit else "")
