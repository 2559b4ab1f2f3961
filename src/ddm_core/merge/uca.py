"""MariaDB's root Unicode collations: ``unicode_ci`` (UCA 4.0.0) and ``unicode_520_ci`` (UCA 5.2.0).

How MariaDB 10.11 compares strings under them (each point is checked against
the server in ``tests/test_merge_collation.py``):

* Every character has a fixed list of 16-bit primary weights: none for an
  ignorable one (most controls, combining marks), one for most, several for an
  expansion (``ß`` weighs as ``ss``, ``ŉ`` as ``ʼn``). There are no contractions,
  so a string's weights are its characters' weights one after the other.
* UCA 4.0.0 weighs every character beyond U+FFFF as the one weight 0xFFFD
  (``'😀' = '😁'``); the 5.2.0 table covers every plane. A character the table
  does not list weighs implicitly: ``base + (code >> 15), (code & 0x7FFF) | 0x8000``,
  the base telling CJK ideographs (0xFB40, 0xFB80) from the rest (0xFBC0).
* PAD SPACE compares the weight lists as if the shorter went on with the
  space's weight (so a tab, which weighs less, sorts ``'a\\t' < 'a'``); NO PAD
  compares them as they are.

The weights are MariaDB's own, read from the server once by
``tools/uca_tables.py`` into ``data/uca400.bin`` and ``data/uca520.bin`` and
loaded on first use. A file is ``MAGIC`` and then, zlib-compressed and
big-endian: ``maxchar`` (u32), the weight of a character beyond it (u16), the
implicit base of an unlisted character (u16), the number of implicit runs and of
listed characters (u32 each); the runs as (first, last, base) (u32, u32, u16);
the listed code points (u32 each, ascending), their weight counts (u8 each),
and all their weights (u16 each).

**Keys.** A weight is written as a code of latin-1 characters that sorts as the
weights do and is never a prefix of another code: one character for each weight
of a printable ASCII character (an ASCII string's key is one ``bytes.translate``,
no per-character lookup), else the character of the gap between two such weights
that the weight falls in, followed by the weight in three base-128 digits
(characters 128-255). Codes start at character 3 (the PAD marks of
:mod:`.weights` sort below them) and below 128, so a code starts below the
space's code exactly when its weight is below the space's, and its digits are
above it — what :func:`~ddm_core.merge.weights.escaped` needs.
"""

from __future__ import annotations

import functools
import struct
import sys
import zlib
from array import array
from bisect import bisect_left, bisect_right
from importlib import resources
from itertools import accumulate
from typing import Callable, Sequence

from ddm_core.errors import CollationError
from ddm_core.merge.weights import END, Weights, escaped

__all__ = ["UcaTable", "MAGIC", "VERSIONS", "table", "key"]

#: The first bytes of a weight file.
MAGIC = b"ddm-core UCA weights 1\n"
#: Weight files by UCA version: ``400`` (``unicode_ci``), ``520`` (``unicode_520_ci``).
VERSIONS = {"400": "uca400.bin", "520": "uca520.bin"}

_HEADER = struct.Struct(">IHHII")  # maxchar, weight beyond it, implicit base, runs, listed characters
_RUN = struct.Struct(">IIH")  # first, last, implicit base
_SPACE = 0x20
_PRINTABLE_ASCII = range(0x20, 0x7F)
_FIRST_CODE = 3  # below: the PAD marks
_DIGIT = 128  # digits of a weight written in full: characters 128-255


def _big_endian(typecode: str, data: bytes) -> array[int]:
    values = array(typecode, data)
    if sys.byteorder == "little":
        values.byteswap()
    return values


class UcaTable:
    """The weights MariaDB gives each code point under one UCA version (the file format: see the module)."""

    #: The highest code point the table weighs; every character beyond it weighs ``beyond``.
    maxchar: int
    beyond: int
    #: The implicit base of a code point neither listed nor in a run.
    implicit_base: int

    def __init__(self, data: bytes, source: str) -> None:
        if not data.startswith(MAGIC):
            raise CollationError(f"{source} is not a ddm-core UCA weight file (it does not start with {MAGIC!r})")
        try:
            self._read(zlib.decompress(data[len(MAGIC) :]))
        except (zlib.error, struct.error, ValueError) as exc:
            raise CollationError(f"{source} is damaged: {exc}") from exc

    def _read(self, payload: bytes) -> None:
        header: tuple[int, int, int, int, int] = _HEADER.unpack_from(payload)
        self.maxchar, self.beyond, self.implicit_base, runs, listed = header
        at = _HEADER.size
        run_rows = list(_RUN.iter_unpack(payload[at : at + runs * _RUN.size]))
        at += runs * _RUN.size
        self._run_first = [r[0] for r in run_rows]
        self._run_last = [r[1] for r in run_rows]
        self._run_base = [r[2] for r in run_rows]
        self._listed = _big_endian("I", payload[at : at + 4 * listed])
        at += 4 * listed
        self._offsets = list(accumulate(payload[at : at + listed], initial=0))
        at += listed
        self._weights = _big_endian("H", payload[at:])
        if len(self._listed) != listed or len(self._weights) != self._offsets[-1]:
            raise ValueError("it is shorter or longer than its header says")

    def weights(self, code: int) -> Sequence[int]:
        """The primary weights of code point ``code``, in order (none: ignorable)."""
        if code > self.maxchar:
            return (self.beyond,)
        i = bisect_left(self._listed, code)
        if i < len(self._listed) and self._listed[i] == code:
            return self._weights[self._offsets[i] : self._offsets[i + 1]]
        r = bisect_right(self._run_first, code) - 1
        base = self._run_base[r] if r >= 0 and code <= self._run_last[r] else self.implicit_base
        return (base + (code >> 15), (code & 0x7FFF) | 0x8000)


class _Codes:
    """Each weight's code (see the module): ``codes(weight)`` → its characters."""

    def __init__(self, one_character: Sequence[int], source: str) -> None:
        self._bounds = sorted(set(one_character))
        self._single: dict[int, str] = {}
        self._gaps: list[str] = []  # the gap below bounds[i], and above the last bound
        code = _FIRST_CODE
        below = 0  # weights are 1..0xFFFF
        for weight in [*self._bounds, 0x10000]:
            self._gaps.append(chr(code))  # used only if a weight lies between ``below`` and ``weight``
            if weight > below + 1:
                code += 1
            if weight <= 0xFFFF:
                self._single[weight] = chr(code)
                code += 1
            below = weight
        if code > _DIGIT:
            raise CollationError(f"the weights of {source} need {code} one-character codes, more than {_DIGIT}")

    def __call__(self, weight: int) -> str:
        single = self._single.get(weight)
        if single is not None:
            return single
        return (
            self._gaps[bisect_left(self._bounds, weight)]
            + chr(_DIGIT + (weight >> 14))
            + chr(_DIGIT + (weight >> 7 & 0x7F))
            + chr(_DIGIT + (weight & 0x7F))
        )


@functools.cache
def table(version: str) -> UcaTable:
    """The weights of UCA ``version`` (``"400"``, ``"520"``), read from the package on first use."""
    source = f"ddm_core/merge/data/{VERSIONS[version]}"
    try:
        data = resources.files("ddm_core.merge").joinpath("data", VERSIONS[version]).read_bytes()
    except OSError as exc:
        raise CollationError(f"{source}, the UCA {version} weights, cannot be read from this install: {exc}") from exc
    return UcaTable(data, source)


class _Translation:
    """What a key of one UCA version translates strings with."""

    def __init__(self, version: str) -> None:
        weights = table(version).weights
        ascii_weights = [weights(c) for c in _PRINTABLE_ASCII]
        if any(len(w) != 1 for w in ascii_weights):
            raise CollationError(f"UCA {version}: a printable ASCII character does not have exactly one weight")
        codes = _Codes([w[0] for w in ascii_weights], f"UCA {version}")
        #: Printable ASCII byte → its code (one character below 128), for ``bytes.translate``.
        self.ascii = bytes(
            ord(codes(weights(b)[0])) if b in _PRINTABLE_ASCII else 0 for b in range(256)
        )  # fmt: skip
        #: Code point → its weights' codes (``""``: ignorable), for ``str.translate``.
        self.chars = Weights(lambda code: "".join(map(codes, weights(code))))
        self.space = codes(weights(_SPACE)[0])


@functools.cache
def _translation(version: str) -> _Translation:
    return _Translation(version)


@functools.cache
def key(version: str, padded: bool) -> Callable[[str], str]:
    """The key function of UCA ``version``'s collation, PAD SPACE or NO PAD (loads the weights)."""
    translation = _translation(version)
    return _padded(translation) if padded else _unpadded(translation)


def _padded(t: _Translation) -> Callable[[str], str]:
    ascii_codes, chars, space = t.ascii, t.chars, t.space

    def key(value: str) -> str:
        if value.isascii() and value.isprintable():  # no weight below the space's in printable ASCII
            return value.encode().translate(ascii_codes).decode("latin-1").rstrip(space) + END
        codes = value.translate(chars).rstrip(space)
        # Only tab, LF, VT, FF, CR, U+0085, U+2028 and U+2029 weigh below the space: none printable.
        return codes + END if value.isprintable() else escaped(codes, space)

    return key


def _unpadded(t: _Translation) -> Callable[[str], str]:
    ascii_codes, chars = t.ascii, t.chars

    def key(value: str) -> str:
        if value.isascii() and value.isprintable():
            return value.encode().translate(ascii_codes).decode("latin-1")
        return value.translate(chars)

    return key
