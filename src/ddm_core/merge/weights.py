"""Weight strings: the lazy ``str.translate`` tables that make them, and PAD SPACE keys over them.

A collation key is a ``str`` whose characters stand for the collation's weights,
in their order. ``NO PAD`` collations compare the weight strings as they are;
PAD SPACE collations compare them as if the shorter were followed by spaces'
weights, which :func:`pad_key` turns into a plain ``str`` comparison.
"""

from __future__ import annotations

from typing import Callable

__all__ = ["Weights", "pad_key", "escaped", "END"]

# Reserved key characters: every weight character is >= 3.
_LOW = "\x00"  # prefix of a weight that sorts below the space
_SPACE_BEFORE_LOW = "\x01"  # a space followed, after more spaces, by such a weight
#: The end of the string: where the padding spaces begin.
END = "\x02"


class Weights(dict[int, str]):
    """A ``str.translate`` table that weighs a character the first time it is seen."""

    def __init__(self, weigh: Callable[[int], str]) -> None:
        super().__init__()
        self._weigh = weigh

    def __missing__(self, code: int) -> str:
        weight = self._weigh(code)
        self[code] = weight
        return weight


def pad_key(weights: str, space: str = " ") -> str:
    """The key of a PAD SPACE comparison over ``weights`` (``space``: the space's weight).

    Comparing two keys with ``<`` / ``==`` is comparing the weight strings with
    the shorter one padded by ``space`` weights. Trailing spaces are dropped and
    the end is marked with a character below every weight; a weight below the
    space is escaped below that mark, and a space whose run of spaces ends in
    such a weight sorts between the two (the padding of a shorter string meets
    these spaces, and the weight after them decides). Weights must be >= 3.
    """
    weights = weights.rstrip(space)
    if weights.isprintable() if space == " " else (not weights or min(weights) >= space):
        return weights + END  # nothing sorts below the padding: the common case
    return escaped(weights, space)


def escaped(weights: str, space: str) -> str:
    """:func:`pad_key` of (stripped) weights some of which sort below the space.

    A weight may be written as several characters (see :mod:`.uca`), as long as
    its first character is below ``space`` exactly when the weight is, and every
    further character is above it.
    """
    out: list[str] = []
    low_follows = False  # scanning backwards: the next non-space weight sorts below the space
    for ch in reversed(weights):
        if ch == space:
            out.append(_SPACE_BEFORE_LOW if low_follows else space)
        elif ch < space:
            out.append(ch)
            out.append(_LOW)
            low_follows = True
        else:
            out.append(ch)
            low_follows = False
    out.reverse()
    out.append(END)
    return "".join(out)
