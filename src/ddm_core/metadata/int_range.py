"""The accepted values of one numeric field, and how a refused value is shown.

Every range of a configuration is listed in :mod:`~ddm_core.metadata.limits`;
the type lives apart so that the modules below the model (``urls.py``: a URL's
port) can hold a range of their own that the list names.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MAX_INT_DIGITS", "IntRange", "show_int"]

#: Most digits of an integer (a signed 64-bit integer has 19).
MAX_INT_DIGITS = 30


@dataclass(frozen=True, slots=True)
class IntRange:
    """The accepted values of one numeric field.

    Attributes:
        low, high: Inclusive bounds.
        default: The value used when the field is absent (``None``: derived,
            see ``note``).
        off: ``0`` is accepted too and switches the feature off.
        unit: ``"ms"`` or ``""``.
        note: Why these bounds (one short sentence, for the documentation).
    """

    low: int
    high: int
    default: int | None
    off: bool = False
    unit: str = ""
    note: str = ""

    def accepts(self, value: int) -> bool:
        """Whether ``value`` is in the range (or is the ``off`` value 0)."""
        return (self.off and value == 0) or self.low <= value <= self.high

    def describe(self) -> str:
        """``"an integer from 1 to 1000"`` / ``"0 (off) or an integer from 1000 to 86400000"``."""
        span = f"an integer from {self.low} to {self.high}"
        return f"0 (off) or {span}" if self.off else span

    def problem(self, value: int) -> str | None:
        """``None`` when ``value`` is accepted, else the message naming the range and the value."""
        return None if self.accepts(value) else f"must be {self.describe()}, not {show_int(value)}"


def show_int(value: int) -> str:
    """``value`` as text, or ``"a number of N digits"`` when it is too long to be useful (or printable)."""
    if -(10**MAX_INT_DIGITS) < value < 10**MAX_INT_DIGITS:
        return str(value)
    digits = int(abs(value).bit_length() * 0.30103) + 1  # str() refuses past 4300 digits
    return f"a number of about {digits} digits"
