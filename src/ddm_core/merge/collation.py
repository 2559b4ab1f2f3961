"""Comparing strings the way the database does: one sort key per collation.

MySQL and MariaDB compare a string column by its collation: ``utf8mb4_general_ci``
(MariaDB's default) takes ``'a' = 'A' = 'á'``, and every collation that is not
``NO PAD`` ignores trailing spaces (``'b ' = 'b'``). Python compares code points.
A merge that compares values itself (``ORDER BY``, ``MIN`` / ``MAX``, ``GROUP BY``,
``DISTINCT``, ``COUNT(DISTINCT)``) compares :meth:`Collation.key` of each value
instead: two values are equal under the collation exactly when their keys are
equal, and ordered as their keys are. Keys are ``str`` (their characters are
weights, or codes of weights), so they hash, and the compiled heap merge compares them in C.

How a key is made:

* **Weights.** Each character becomes its weight (``str.translate``): the code
  point for ``_bin``; for ``general_ci`` the upper-case letter without its accent,
  computed from Unicode 3.0-era character data (what MySQL's table was built
  from, see :func:`_general_ci_weight`), every character beyond U+FFFF weighing
  U+FFFD; for ``latin1_swedish_ci`` MySQL's 256-entry sort order; for
  ``unicode_ci`` and ``unicode_520_ci`` MariaDB's UCA weights, none, one or
  several per character, read from a table shipped with the package on first
  use (:mod:`.uca`).
* **PAD SPACE** (:func:`pad_key`). The shorter string compares as if padded with
  spaces: trailing spaces are dropped, and a weight that sorts below the
  space (a tab, a newline) makes a string sort *before* the same string without
  it (``'a\\t' < 'a'``). The key encodes that, so the ordering stays a plain
  ``str`` comparison. ``NO PAD`` collations use the weights as they are.

Every key is tested against MariaDB itself (``tests/test_merge_collation.py``:
every BMP character for ``general_ci`` and the Unicode collations, all 256
``latin1`` bytes, strings with trailing spaces and control characters). A collation not listed in
:data:`SUPPORTED` is refused with :class:`~ddm_core.errors.CollationError` naming
it — when a merge would compare a column of it, never before.
"""

from __future__ import annotations

import unicodedata
from operator import itemgetter
from typing import Any, Callable, NamedTuple, Sequence

from ddm_core.errors import CollationError
from ddm_core.merge import uca
from ddm_core.merge.weights import END, Weights, escaped, pad_key

__all__ = ["Collation", "collation_for", "collation_name", "pad_key", "SUPPORTED", "BINARY"]

#: The ``binary`` character set / collation: bytes, compared as bytes (Python's order).
BINARY = 63


class Collation(NamedTuple):
    """How one collation compares strings.

    Attributes:
        id: The collation's number in the MySQL protocol.
        name: Its name (``utf8mb4_general_ci``).
        key: ``str`` → its sort key; ``None`` when Python's own order is the
            collation's (``utf8mb4_nopad_bin``, ``binary``).
        plain: For code point collations that ignore trailing spaces
            (``utf8mb4_bin``): ``plain(rows, column)`` says whether Python's
            own order and equality are already the collation's for the strings
            in that column of those rows (no trailing space, no character below
            the space) — then a merge need not make keys.
    """

    id: int
    name: str
    key: Callable[[str], str] | None
    plain: Callable[[Sequence[Sequence[Any]], int], bool] | None = None


# -- weights ------------------------------------------------------------------------------


_UCD_3 = unicodedata.ucd_3_2_0
#: Characters of Unicode 3.1 / 3.2 (MySQL's general_ci table predates them): no case pairs there.
_AFTER_3_0 = frozenset({0x220, 0x3D8, 0x3D9, 0x3F4, 0x3F5, 0x48A, 0x48B, 0x4C5, 0x4C6, 0x4C9, 0x4CA, 0x4CD, 0x4CE,
                        *range(0x500, 0x510)})  # fmt: skip
#: Weights general_ci gives that no case or decomposition rule explains (ß = S, lunate sigma = Σ).
_GENERAL_CI_SPECIAL = {0xDF: 0x53, 0x3F2: 0x3A3}
#: Letters general_ci keeps apart from their base letter (Cyrillic short i is a letter of its own).
_GENERAL_CI_KEPT = frozenset({0x419, 0x439})


def _assigned_3_0(code: int) -> bool:
    return code not in _AFTER_3_0 and _UCD_3.category(chr(code)) != "Cn"


def _general_ci_weight(code: int) -> int:
    """MySQL's ``general_ci`` weight: the upper-case base letter, Unicode 3.0 data.

    A Latin, Greek or Cyrillic letter with a canonical decomposition weighs as
    its base letter (``é`` → ``E``, ``ῷ`` → ``Ω``); everything else as its simple
    upper-case mapping when both characters were in Unicode 3.0, else as itself.
    Beyond the BMP every character weighs U+FFFD.
    """
    if code > 0xFFFF:
        return 0xFFFD
    special = _GENERAL_CI_SPECIAL.get(code)
    if special is not None:
        return special
    ch = chr(code)
    if (code < 0x530 or 0x1E00 <= code < 0x2000) and code not in _GENERAL_CI_KEPT:
        parts = _UCD_3.decomposition(ch).split()
        if len(parts) > 1 and not parts[0].startswith("<"):
            base = int(parts[0], 16)
            if _UCD_3.category(chr(base)).startswith("L"):
                return _general_ci_weight(base)
    if _assigned_3_0(code):
        upper = ch.upper()
        if len(upper) == 1 and _assigned_3_0(ord(upper)):
            return ord(upper)
    return code


# MySQL's latin1 is Windows-1252, with its five unassigned bytes passed through as C1 controls.
_LATIN1 = "".join(
    chr(b) if b in (0x81, 0x8D, 0x8F, 0x90, 0x9D) else bytes([b]).decode("cp1252") for b in range(256)
)
#: MySQL's sort order for latin1_swedish_ci, by byte (Å Ä Ö after Z, Ü = Y, Æ = Ä, Ø = Ö).
_LATIN1_SWEDISH = bytes.fromhex(
    "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
    "202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f"
    "404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f"
    "604142434445464748494a4b4c4d4e4f505152535455565758595a7b7c7d7e7f"
    "808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f"
    "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf"
    "414141415c5b5c434545454549494949444e4f4f4f4f5dd7d85555555959dedf"
    "414141415c5b5c434545454549494949444e4f4f4f4f5df7d85555555959deff"
)


def _latin1_table(order: bytes, name: str) -> Weights:
    """Weights by latin1 byte; a character latin1 cannot hold is refused (it cannot come from such a column)."""

    def outside(code: int) -> str:
        raise CollationError(
            f"character U+{code:04X} is not in latin1, yet a {name} column returned it: "
            "ddm-core cannot compare it as the database would", collation=name,
        )  # fmt: skip

    table = Weights(outside)
    table.update({ord(ch): chr(w) for ch, w in zip(_LATIN1, order)})
    return table


# -- the collations -------------------------------------------------------------------------


def _padded(table: dict[int, str], fold_ascii: bool) -> Callable[[str], str]:
    """PAD SPACE keys over ``table``'s weights; ``fold_ascii``: an ASCII string weighs as its upper case."""
    if fold_ascii:

        def key(value: str) -> str:
            weights = (value.upper() if value.isascii() else value.translate(table)).rstrip(" ")
            return weights + END if weights.isprintable() else escaped(weights, " ")

    else:  # ASCII weighs as itself

        def key(value: str) -> str:
            weights = (value if value.isascii() else value.translate(table)).rstrip(" ")
            return weights + END if weights.isprintable() else escaped(weights, " ")

    return key


def _unpadded(table: dict[int, str], fold_ascii: bool) -> Callable[[str], str]:
    if fold_ascii:
        return lambda value: value.upper() if value.isascii() else value.translate(table)
    return lambda value: value if value.isascii() else value.translate(table)


_JOINT = "\xa4"  # a printable latin1 character ("¤"): one string of the column to check at C speed


def _plain(rows: Sequence[Sequence[Any]], column: int) -> bool:
    """No trailing space and nothing below the space in the column: code point order is PAD SPACE order.

    (A value holding " ¤" is taken for one with a trailing space: keys are made, which is merely slower.)
    """
    try:
        text = _JOINT.join(map(itemgetter(column), rows))
    except TypeError:  # NULLs (or values that are not str)
        try:
            text = _JOINT.join([v for v in map(itemgetter(column), rows) if v is not None])
        except TypeError:
            return False
    return text.isprintable() and " " + _JOINT not in text and not text.endswith(" ")


def _build() -> dict[int, Collation]:
    general = Weights(lambda code: chr(_general_ci_weight(code)))
    swedish = _latin1_table(_LATIN1_SWEDISH, "latin1_swedish_ci")
    latin1_bin = _latin1_table(bytes(range(256)), "latin1_bin")
    collations = [
        Collation(BINARY, "binary", None),
        # code point order, trailing spaces ignored / kept
        Collation(46, "utf8mb4_bin", pad_key, _plain),
        Collation(83, "utf8mb3_bin", pad_key, _plain),
        Collation(1070, "utf8mb4_nopad_bin", None),
        Collation(1107, "utf8mb3_nopad_bin", None),
        # general_ci
        Collation(45, "utf8mb4_general_ci", _padded(general, True)),
        Collation(33, "utf8mb3_general_ci", _padded(general, True)),
        Collation(1069, "utf8mb4_general_nopad_ci", _unpadded(general, True)),
        Collation(1057, "utf8mb3_general_nopad_ci", _unpadded(general, True)),
        # latin1 (byte order is not code point order: ``€`` is byte 0x80)
        Collation(8, "latin1_swedish_ci", _padded(swedish, True)),
        Collation(1032, "latin1_swedish_nopad_ci", _unpadded(swedish, True)),
        Collation(47, "latin1_bin", _padded(latin1_bin, False)),
        Collation(1071, "latin1_nopad_bin", _unpadded(latin1_bin, False)),
    ]
    return {c.id: c for c in collations}


_COLLATIONS = _build()

#: Unicode collations, their weights loaded on first use: id → (name, UCA version, PAD SPACE).
_UCA = {
    224: ("utf8mb4_unicode_ci", "400", True), 192: ("utf8mb3_unicode_ci", "400", True),
    1248: ("utf8mb4_unicode_nopad_ci", "400", False), 1216: ("utf8mb3_unicode_nopad_ci", "400", False),
    246: ("utf8mb4_unicode_520_ci", "520", True), 214: ("utf8mb3_unicode_520_ci", "520", True),
    1270: ("utf8mb4_unicode_520_nopad_ci", "520", False), 1238: ("utf8mb3_unicode_520_nopad_ci", "520", False),
}  # fmt: skip

#: The collation ids ddm-core compares exactly as the database does.
SUPPORTED = frozenset(_COLLATIONS) | frozenset(_UCA)

_SUPPORTED_NAMES = ", ".join(sorted([c.name for c in _COLLATIONS.values()] + [u[0] for u in _UCA.values()]))

#: Names of collations that are refused, for the message (MySQL's and MariaDB's numbers agree on these).
_REFUSED_NAMES = {
    5: "latin1_german1_ci", 15: "latin1_danish_ci", 31: "latin1_german2_ci", 48: "latin1_general_ci",
    49: "latin1_general_cs", 94: "latin1_spanish_ci", 202: "utf8mb3_czech_ci", 223: "utf8mb3_general_mysql500_ci",
    231: "utf8mb4_spanish_ci", 232: "utf8mb4_swedish_ci", 234: "utf8mb4_czech_ci", 244: "utf8mb4_german2_ci",
    255: "utf8mb4_0900_ai_ci", 305: "utf8mb4_0900_as_cs", 309: "utf8mb4_0900_bin",
}  # fmt: skip


def collation_name(collation_id: int) -> str:
    """The collation's name, or ``collation id N`` when ddm-core does not know it."""
    known = _COLLATIONS.get(collation_id)
    if known is not None:
        return known.name
    if collation_id in _UCA:
        return _UCA[collation_id][0]
    return _REFUSED_NAMES.get(collation_id, f"collation id {collation_id}")


def collation_for(collation_id: int, column: str = "") -> Collation:
    """The :class:`Collation` with this protocol number.

    Args:
        collation_id: The column's collation number (a column definition's
            character set field, read without result conversion).
        column: The column's name, for the error.

    Raises:
        CollationError: ddm-core cannot compare strings as this collation does.
    """
    found = _COLLATIONS.get(collation_id)
    if found is not None:
        return found
    if collation_id in _UCA:
        name, version, padded = _UCA[collation_id]
        return _COLLATIONS.setdefault(collation_id, Collation(collation_id, name, uca.key(version, padded)))
    name = collation_name(collation_id)
    where = f"column {column!r}" if column else "a column"
    raise CollationError(
        f"{where} has collation {name}, which ddm-core cannot compare across shards as the database "
        f"does; merging its values would give wrong answers. Compare it on one of: {_SUPPORTED_NAMES} "
        f"(e.g. ORDER BY {column or 'the column'} COLLATE utf8mb4_bin), or query one shard",
        collation=name, column=column,
    )  # fmt: skip
