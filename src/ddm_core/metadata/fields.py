"""Typed reading of one YAML mapping, recording problems instead of raising.

A :class:`Section` wraps a mapping and its field path. Getters check the type
of each field and report a :class:`~ddm_core.metadata.problems.Problem`
naming the path and the value; :meth:`Section.finish` reports every field
nobody asked for, with a "did you mean" hint — a misspelt ``tablePerShard``
must fail the load, not silently fall back to a default.

With ``loose=True`` (ddm-core's own format) field names match regardless of
case, ``_`` and ``-``: ``tablePerShard``, ``table_per_shard`` and
``table-per-shard`` are one field. ShardingSphere sections match exactly.
"""

from __future__ import annotations

import builtins
import difflib
import re
from typing import Any, Mapping

from ddm_core.metadata.limits import MAX_INT_DIGITS, IntRange
from ddm_core.metadata.problems import Problems, join_path

__all__ = ["Section", "canon", "as_int", "MISSING"]

_INT_TEXT = re.compile(r"[+-]?[0-9]{1,%d}" % MAX_INT_DIGITS)
_MAX_UNKNOWN_SHOWN = 20  # a section of thousands of stray keys still fails fast


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


MISSING: Any = _Missing()


def as_int(value: Any) -> int | None:
    """``value`` as an integer: an int (not a bool) or its decimal text (ASCII digits, sign); else ``None``."""
    if type(value) is builtins.int:
        return value
    if isinstance(value, builtins.str) and _INT_TEXT.fullmatch(value.strip()):
        return builtins.int(value.strip())
    return None


def canon(key: str) -> str:
    """The loose form of a field name: lower case without ``_`` and ``-``."""
    return key.replace("_", "").replace("-", "").lower()


class Section:
    """One mapping being read.

    Args:
        data: The mapping (anything else is reported and read as empty).
        path: Its field path.
        problems: Where problems go.
        loose: Match field names loosely (see the module docstring).
    """

    def __init__(self, data: Any, path: builtins.str, problems: Problems, *, loose: bool = False) -> None:
        self.path = path
        self.problems = problems
        self.loose = loose
        self.ok = isinstance(data, Mapping) or data is None
        if not self.ok:
            problems.add(path or "<root>", f"must be a mapping, not {data!r}", data)
        self.data: Mapping[Any, Any] = data if isinstance(data, Mapping) else {}
        self._index: dict[str, Any] = {}
        for key in self.data:
            k = canon(str(key)) if loose else str(key)
            if k in self._index and loose:
                problems.add(
                    join_path(path, str(key)),
                    f"field {key!r} is given twice (also as {self._index[k]!r})",
                    key,
                )
            self._index.setdefault(k, key)
        self._known: dict[str, str] = {}  # key as matched → the name a getter used

    # -- lookup -------------------------------------------------------------

    def _key(self, name: builtins.str) -> Any:
        k = canon(name) if self.loose else name
        self._known.setdefault(k, name)
        return self._index.get(k, MISSING)

    def has(self, *names: builtins.str) -> bool:
        return any(self._key(n) is not MISSING for n in names)

    def field_path(self, *names: builtins.str) -> str:
        """Path of the first of ``names`` present (else of the first name)."""
        for n in names:
            key = self._key(n)
            if key is not MISSING:
                return join_path(self.path, str(key))
        return join_path(self.path, names[0])

    def get(self, *names: builtins.str, default: Any = None) -> Any:
        """The value of the first of ``names`` present (aliases), else ``default``."""
        for n in names:
            key = self._key(n)
            if key is not MISSING:
                return self.data[key]
        return default

    def mark(self, *names: builtins.str) -> None:
        """Declare fields as known without reading them."""
        for n in names:
            self._key(n)

    # -- typed getters ------------------------------------------------------------

    def _bad(self, names: tuple[builtins.str, ...], value: Any, what: builtins.str) -> None:
        self.problems.add(self.field_path(*names), f"must be {what}, not {value!r}", value)

    def _blank(self, names: tuple[builtins.str, ...], what: builtins.str) -> None:
        """Report a field written but left blank: it is never read as absent (docs/configuration.md#checks-at-load)."""
        self.problems.add(self.field_path(*names), f"must be {what}, not blank (empty, ~ or null)", None)

    def str(self, *names: builtins.str, default: Any = None, required: bool = False) -> Any:
        """A non-empty string (a number is read as its text); ``default`` when absent.

        Written but blank (``auditLog:``, ``~``, ``null``, ``''``) is a problem, never the default:
        ``auditLog:`` left to be filled in must not load as "no audit log".
        """
        value = self.get(*names, default=MISSING)
        if value is MISSING:
            if required:
                self.problems.add(self.field_path(*names), "is required", None)
            return default
        if value is None:
            self._blank(names, "a non-empty string")
            return default
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(value)  # YAML reads `name: 0` as an int
        if not isinstance(value, str) or not value.strip():
            self._bad(names, value, "a non-empty string")
            return default
        return value.strip()

    def int(
        self,
        *names: builtins.str,
        bounds: IntRange,
        default: Any = None,
        required: bool = False,
    ) -> Any:
        """An integer (``16`` or ``"16"``) that ``bounds`` accepts; else a problem and ``default`` (absent: no problem).

        Written but blank (``maxOffset:``, ``~``, ``null``) is a problem, as for :meth:`str`.
        """
        value = self.get(*names, default=MISSING)
        if value is MISSING:
            if required:
                self.problems.add(self.field_path(*names), "is required", None)
            return default
        if value is None:
            self._blank(names, bounds.describe())
            return default
        number = as_int(value)
        if number is None:
            self._bad(names, value, bounds.describe())
            return default
        why = bounds.problem(number)
        if why is not None:
            self.problems.add(self.field_path(*names), why, number)
            return default
        return number

    def bool(self, *names: builtins.str, default: Any = None) -> Any:
        """``true`` / ``false`` (or their text, ``on`` / ``off``, ``yes`` / ``no``); ``default`` when absent.

        Written but blank (``allowFullRoute:``, ``~``, ``null``, ``''``) is a problem, never the
        default: a switch written to refuse something must not load as the default that allows it.
        """
        value = self.get(*names, default=MISSING)
        if value is MISSING:
            return default
        if value is None:
            self._blank(names, "true or false")
            return default
        if isinstance(value, str) and value.strip().lower() in ("true", "false", "on", "off", "yes", "no"):
            value = value.strip().lower() in ("true", "on", "yes")
        if type(value) is not bool:
            self._bad(names, value, "true or false")
            return default
        return value

    def mapping(self, *names: builtins.str) -> Mapping[Any, Any]:
        """A mapping; absent or blank, an empty one.

        Blank is not refused here, unlike a string or number: absent means empty too, so blank
        (``props:``, ``masks:``) never loads as a default the config did not say.
        """
        value = self.get(*names, default=None)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self._bad(names, value, "a mapping")
            return {}
        return value

    def list(self, *names: builtins.str, split: builtins.bool = False) -> builtins.list[Any]:
        """A list (absent or blank: empty, as :meth:`mapping`); with ``split``, a comma-separated string too."""
        value = self.get(*names, default=None)
        if value is None:
            return []
        if split and isinstance(value, str):
            return [p.strip() for p in value.split(",") if p.strip()]
        if not isinstance(value, (list, tuple)):
            self._bad(names, value, "a list")
            return []
        return builtins.list(value)

    def section(self, *names: builtins.str) -> "Section":
        """A nested mapping as a Section (empty when absent)."""
        return Section(
            self.get(*names, default=None), self.field_path(*names), self.problems, loose=self.loose
        )

    # -- end ----------------------------------------------------------------------

    def finish(self, what: builtins.str = "field") -> None:
        """Report every field that no getter asked for (the first few by name, then how many more)."""
        unknown = [(k, key) for k, key in self._index.items() if k not in self._known]
        known = sorted(self._known)
        for k, key in unknown[:_MAX_UNKNOWN_SHOWN]:
            close = difflib.get_close_matches(k, known, n=1, cutoff=0.75)
            hint = f"; did you mean {self._known[close[0]]!r}?" if close else ""
            self.problems.add(join_path(self.path, str(key)), f"unknown {what} {str(key)!r}{hint}", key)
        if len(unknown) > _MAX_UNKNOWN_SHOWN:
            self.problems.add(
                self.path or "<root>", f"{len(unknown) - _MAX_UNKNOWN_SHOWN} more unknown {what}s", None
            )
