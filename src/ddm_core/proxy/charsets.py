"""MariaDB's latin1 as a Python codec: Windows-1252, every byte defined (docs/proxy.md#character-sets).

MariaDB's ``latin1`` is Windows-1252 — ``€`` is byte 0x80, ``’`` 0x92, ``“`` 0x93 — with the five
bytes Windows-1252 leaves undefined (0x81, 0x8D, 0x8F, 0x90, 0x9D) read as the C1 controls of the same
number, so every byte decodes and every decoded text encodes back to the same bytes. Python's
``latin1`` is ISO 8859-1, whose 0x80–0x9F are all C1 controls: a latin1 client's ``’`` read with it is
U+0092, and written to a data source (whose connections are utf8mb4) that is the character stored.

mysql-mimic names a character set's Python codec after it (``CharacterSet.codec``) and decodes and encodes
with that name everywhere (the statement's text, names in packets, result values). :func:`install`
registers ``mariadb_latin1`` and points mimic's latin1 at it, once per process; every other character set
keeps mimic's codec.
"""

from __future__ import annotations

import codecs
from typing import TYPE_CHECKING, Any

from mysql_mimic.charset import CharacterSet

if TYPE_CHECKING:  # collections.abc.Buffer from Python 3.12 on
    from typing_extensions import Buffer

__all__ = ["LATIN1_CODEC", "install"]

#: The codec's name (what ``codecs.lookup`` is asked for: lower case, underscores).
LATIN1_CODEC = "mariadb_latin1"

#: Windows-1252's undefined bytes: MariaDB reads each as the C1 control of its number.
_UNDEFINED = frozenset({0x81, 0x8D, 0x8F, 0x90, 0x9D})
_DECODING = "".join(chr(b) if b in _UNDEFINED else bytes([b]).decode("cp1252") for b in range(256))
_ENCODING = codecs.charmap_build(_DECODING)


def _encode(text: str, errors: str = "strict") -> tuple[bytes, int]:
    return codecs.charmap_encode(text, errors, _ENCODING)


def _decode(data: Buffer, errors: str = "strict") -> tuple[str, int]:
    return codecs.charmap_decode(data, errors, _DECODING)


def _search(name: str) -> codecs.CodecInfo | None:
    return codecs.CodecInfo(_encode, _decode, name=LATIN1_CODEC) if name == LATIN1_CODEC else None


_mimic_codec: Any = None


def _codec(charset: CharacterSet) -> str:
    return LATIN1_CODEC if charset is CharacterSet.latin1 else str(_mimic_codec.fget(charset))


def install() -> None:
    """Register the codec and make it mimic's latin1 codec (idempotent)."""
    global _mimic_codec
    if _mimic_codec is not None:
        return
    codecs.register(_search)
    _mimic_codec = CharacterSet.codec
    CharacterSet.codec = property(_codec)  # an enum's property, not a member: reassigning it is allowed
