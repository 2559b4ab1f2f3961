"""The one error class users see, and the internal signal operations raise."""

from __future__ import annotations

from ddm_core.errors import InlineExpressionError

__all__ = ["OpError", "error"]


class OpError(Exception):
    """An operation failed; the caller turns it into an InlineExpressionError at its position."""

    def __init__(self, msg: str) -> None:
        super().__init__(msg)
        self.msg = msg


def error(text: str, msg: str, pos: int) -> InlineExpressionError:
    """The error for ``msg`` at ``pos`` of expression ``text`` (quoting the fragment there)."""
    if pos >= len(text):
        where = f"at position {pos} (end of text)"
    else:
        frag = text[pos : pos + 24]
        where = f"at position {pos} (near {frag!r})"
    return InlineExpressionError(
        f"{msg} {where} in inline expression {text!r}", expression=text, position=pos
    )
