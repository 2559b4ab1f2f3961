"""Typed, validated reading of an algorithm's props.

ShardingSphere props are Java ``Properties``: every value may arrive as a
string (``sharding-count: "16"``). Each getter accepts the native type or its
string form and raises :class:`~ddm_core.errors.ConfigError` naming the
algorithm, its type, the prop and the value; :meth:`Props.finish` rejects
props the algorithm does not know (a typo must not silently fall back to a
default).
"""

from __future__ import annotations

import re
from typing import Any, Mapping, NoReturn

from ddm_core.errors import ConfigError

__all__ = ["Props", "MISSING", "parse_int_text"]


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


MISSING: Any = _Missing()

_INT_TEXT = re.compile(r"[+-]?[0-9]+")


def parse_int_text(text: str) -> int | None:
    """``int`` of a plain decimal literal (sign, digits, surrounding blanks), else ``None``."""
    stripped = text.strip(" \t\r\n")
    if _INT_TEXT.fullmatch(stripped) is None:
        return None
    return int(stripped)


class Props:
    """Reads one algorithm's props; remembers which were read."""

    def __init__(
        self, type_name: str, name: str, props: Mapping[str, Any], known: Mapping[str, str]
    ) -> None:
        self.type_name = type_name
        self.name = name
        self.props = props
        self.known = known
        self._read: set[str] = set()

    # -- errors -------------------------------------------------------------

    @property
    def label(self) -> str:
        return f"{self.type_name} {self.name!r}" if self.name else self.type_name

    def fail(self, prop: str, value: Any, why: str) -> NoReturn:
        """Raise the ConfigError for ``prop``."""
        raise ConfigError(
            f"sharding algorithm {self.label}: prop {prop!r} = {value!r}: {why}",
            algorithm=self.name,
            algorithm_type=self.type_name,
            prop=prop,
            value=value,
        )

    # -- getters ------------------------------------------------------------

    def has(self, prop: str) -> bool:
        return prop in self.props

    def raw(self, prop: str, default: Any = MISSING) -> Any:
        """The value as given; a missing prop without default is an error."""
        self._read.add(prop)
        if prop in self.props:
            return self.props[prop]
        if default is MISSING:
            desc = self.known.get(prop)
            raise ConfigError(
                f"sharding algorithm {self.label}: prop {prop!r} is required"
                + (f" ({desc})" if desc else ""),
                algorithm=self.name,
                algorithm_type=self.type_name,
                prop=prop,
                value=None,
            )
        return default

    def integer(
        self, prop: str, default: Any = MISSING, *, min: int | None = None, max: int | None = None
    ) -> int:
        """An integer (``16`` or ``"16"``) within ``[min, max]``."""
        value = self.raw(prop, default)
        if type(value) is int:
            result = value
        elif isinstance(value, str) and (parsed := parse_int_text(value)) is not None:
            result = parsed
        else:
            self.fail(prop, value, "must be an integer")
        if min is not None and result < min:
            self.fail(prop, value, f"must be at least {min}")
        if max is not None and result > max:
            self.fail(prop, value, f"must be at most {max}")
        return result

    def boolean(self, prop: str, default: bool) -> bool:
        """``true``/``false`` (bool or case-insensitive string)."""
        value = self.raw(prop, default)
        if type(value) is bool:
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        self.fail(prop, value, "must be true or false")

    def text(self, prop: str, default: Any = MISSING, *, choices: tuple[str, ...] = ()) -> str:
        """A non-empty string; with ``choices``, one of them (case-insensitive, returned lower-case)."""
        value = self.raw(prop, default)
        if not isinstance(value, str) or not value.strip():
            self.fail(prop, value, "must be a non-empty string")
        if choices:
            folded = value.strip().lower()
            if folded not in choices:
                self.fail(prop, value, f"must be one of {', '.join(choices)}")
            return folded
        return value

    def columns(self, prop: str, default: Any = MISSING) -> tuple[str, ...]:
        """A column list: ``"tenant_id, user_id"`` or a list of names; no duplicates."""
        value = self.raw(prop, default)
        if isinstance(value, str):
            names = [part.strip() for part in value.split(",")]
        elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            names = [v.strip() for v in value]
        else:
            self.fail(prop, value, "must be a comma-separated string or a list of column names")
        if not names or any(not n for n in names):
            self.fail(prop, value, "must name at least one column, without empty entries")
        lowered = [n.lower() for n in names]
        if len(set(lowered)) != len(lowered):
            self.fail(prop, value, "names a column twice")
        return tuple(names)

    def finish(self) -> None:
        """Reject props nobody read (unknown to this algorithm)."""
        unknown = sorted(set(self.props) - self._read - set(self.known))
        if unknown:
            prop = unknown[0]
            known = ", ".join(sorted(self.known)) or "none"
            raise ConfigError(
                f"sharding algorithm {self.label}: unknown prop {prop!r} = {self.props[prop]!r} "
                f"(known props: {known})",
                algorithm=self.name,
                algorithm_type=self.type_name,
                prop=prop,
                value=self.props[prop],
            )
