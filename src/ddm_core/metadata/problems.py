"""Collecting every problem of a configuration before failing (docs/architecture.md#fail-at-load-not-at-run-time).

A loader never stops at the first mistake: it records each one as a
:class:`Problem` (field path, message naming the value) in a :class:`Problems`
collector and raises one :class:`ConfigValidationError` listing them all at the
end, so an operator fixes a file in one pass instead of one error per restart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

from ddm_core.errors import ConfigError, ConfigValidationError

__all__ = ["Problem", "Problems", "ConfigValidationError", "join_path"]


def join_path(base: str, key: object) -> str:
    """``base`` extended by a mapping key (``a.b``) or a list index (``a[3]``)."""
    if isinstance(key, int):
        return f"{base}[{key}]"
    text = str(key)
    if not text or not all(ch.isalnum() or ch in "_-$" for ch in text):
        text = repr(text)  # keys with dots or spaces stay readable as one segment
    return f"{base}.{text}" if base else text


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with a configuration.

    Attributes:
        path: Field path inside the document (``rules[0].tables.t_order.actualDataNodes``).
        message: What is wrong; names the offending value.
        value: The offending value itself (for programs; the message already shows it).
    """

    path: str
    message: str
    value: Any = None

    def __str__(self) -> str:
        return f"{self.path or '<root>'}: {self.message}"


class Problems:
    """An ordered, de-duplicated collector of :class:`Problem` objects."""

    __slots__ = ("_items", "_seen", "origin")

    def __init__(self, origin: str) -> None:
        self.origin = origin
        self._items: list[Problem] = []
        self._seen: set[tuple[str, str]] = set()

    def add(self, path: str, message: str, value: Any = None) -> None:
        key = (path, message)
        if key not in self._seen:
            self._seen.add(key)
            self._items.append(Problem(path, message, value))

    def __bool__(self) -> bool:
        return bool(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Problem]:
        return iter(self._items)

    def raise_if_any(self) -> None:
        """Raise :class:`ConfigValidationError` listing every problem, if there is one."""
        if self._items:
            raise ConfigValidationError.from_problems(self.origin, self._items)


