"""Data masking of result sets, for proxy users without ``unmask`` (docs/proxy.md#masking).

Rules name a result column (and optionally the logic table the statement
must be on). A masked column is sent as a string column, whatever its type,
since ``138****1234`` is no longer a number. Rules match result column
*names*: a column renamed by an alias, or used inside an expression, is not
recognised (docs/proxy.md#masking says what that means).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

from ddm_core.metadata.model import MaskRule

__all__ = ["mask_value", "Masker", "MASKS"]


def _phone(text: str) -> str:
    if len(text) < 7:
        return "*" * len(text)
    return text[:3] + "*" * (len(text) - 7) + text[-4:]


def _email(text: str) -> str:
    local, at, domain = text.partition("@")
    if not at or not local:
        return "****"
    return local[0] + "***@" + domain


def _full(text: str) -> str:
    return "****"


MASKS: dict[str, Callable[[str], str]] = {"phone": _phone, "email": _email, "full": _full}


def mask_value(kind: str, value: Any) -> Any:
    """``value`` masked as ``kind`` (NULL stays NULL; bytes are read as UTF-8)."""
    if value is None:
        return None
    text = value.decode("utf-8", "replace") if isinstance(value, (bytes, bytearray)) else str(value)
    return MASKS[kind](text)


class Masker:
    """Which columns of a result to mask, from the rules of the configuration."""

    def __init__(self, rules: Sequence[MaskRule]) -> None:
        self._rules = [(r.column.lower(), r.table.lower() if r.table else None, r.mask) for r in rules]

    @property
    def active(self) -> bool:
        return bool(self._rules)

    def columns(self, names: Sequence[str], tables: Iterable[str]) -> dict[int, str]:
        """Column index → mask kind, for a result with ``names`` from a statement on ``tables``."""
        if not self._rules:
            return {}
        on = {t.lower() for t in tables}
        found: dict[int, str] = {}
        for i, name in enumerate(names):
            lowered = name.lower()
            for column, table, kind in self._rules:
                if column == lowered and (table is None or table in on):
                    found[i] = kind
                    break
        return found

    @staticmethod
    def apply(rows: list[tuple[Any, ...]], masked: dict[int, str]) -> list[tuple[Any, ...]]:
        """``rows`` with the ``masked`` columns masked."""
        if not masked:
            return rows
        return [tuple(mask_value(masked[i], v) if i in masked else v for i, v in enumerate(row)) for row in rows]
