"""DB-API placeholders → SQL that sqlglot can parse, and back.

sqlglot (MySQL dialect) reads ``%`` as modulo, so ``%s`` and ``%(name)s`` do
not parse. :func:`translate` turns every placeholder of one statement into
``?`` (which sqlglot reads as :class:`sqlglot.exp.Placeholder` and writes back
unchanged) and records, for the i-th ``?``, where its value comes from: the
parameter index (``format`` / ``qmark``) or the dict key (``pyformat``).
:meth:`Translated.bind` then turns the caller's params into the flat list for
those ``?``s, and :func:`to_paramstyle` turns the ``?``s of a (rewritten)
statement back into the driver's paramstyle.

Lexical rules (the same as sqlglot's MySQL tokenizer, so the ``?`` counted
here are exactly the placeholders sqlglot finds):

* ``'...'`` and ``"..."`` are strings (``''`` / ``""`` doubling and backslash
  escapes), ```...``` an identifier (doubled backtick); ``# ...`` and
  ``-- ...`` run to the end of the line (``--`` only when followed by
  whitespace, a control character or the end: ``1--1`` is ``1 - -1``), and
  ``/* ... */`` does not nest. Nothing inside them is a placeholder.
* ``%%`` outside quotes is a literal ``%`` (``a %% 2`` → ``a % 2``).
* A statement routed with params (``formatted``) and not written with ``?`` is,
  as PyMySQL treats it, one Python %-format string from end to end, so ``%%``
  *inside* its strings and comments is a literal ``%`` too (``'100%%'`` stores
  ``100%``), with or without ``%s`` in it. In a ``?`` statement the text inside
  quotes is kept byte for byte (sqlite3 formats nothing).
* A ``%`` outside quotes that is not ``%s``, ``%(name)s`` or ``%%`` is refused
  (it would fail in PyMySQL, or is a ``%d``-style slip) — except in a ``qmark``
  statement, where ``%`` cannot be a placeholder and stays the modulo operator.
* One statement uses one style; mixing them is refused.
* Without params (``execute(sql)``, ``params=None``) PyMySQL sends the text
  unchanged, so :func:`translate` with ``formatted=False`` leaves every ``%``
  alone: ``a % 7`` is the modulo operator, ``%s`` and ``%%`` are no
  placeholder or escape. ``?`` is still a placeholder (sqlite3 reads it so),
  which then has no value.
* MySQL executable comments are code: the markers of ``/*! ... */`` and
  ``/*!NNNNN ... */`` (a version every supported server runs, at most
  :data:`EXECUTED_UP_TO`) are blanked before anything else, so their content
  is scanned, parsed, analysed and sent like the rest of the statement. Any
  other version, MariaDB's ``/*M! ... */`` and comments inside an executable
  comment are refused: whether the server runs them depends on its version,
  which routing cannot know. Optimizer hints ``/*+ ... */`` stay comments.

Everything is one compiled regex split plus C-level ``map``/``join``/``str``
methods; there is no per-character or per-placeholder Python loop. A 10 000-row
``INSERT ... VALUES (%s,%s,%s),...`` translates in ~1.6 ms (~4 ms with a quoted
literal per row) where sqlglot (compiled) needs ~300 ms to parse the result.

:meth:`Translated.numbered` gives the same text with ``:p0``, ``:p1``... —
prefer it for anything sqlglot will *regenerate*: sqlglot writes ``LIMIT ?, ?``
back as ``LIMIT ? OFFSET ?`` (count first), so bare ``?``s can change order.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import accumulate
from typing import Any, NoReturn

from ddm_core._text import shorten_sql
from ddm_core.errors import ConfigError, ParameterError, UnsupportedSQLError

__all__ = [
    "ParameterError",
    "Translated",
    "translate",
    "to_paramstyle",
    "source_offset",
    "unwrap_executable_comments",
    "OUTPUT_PARAMSTYLES",
    "EXECUTED_UP_TO",
]

#: The styles :func:`to_paramstyle` can produce.
OUTPUT_PARAMSTYLES = ("format", "qmark")

#: The highest ``/*!NNNNN`` version treated as code: every server ddm-core
#: supports (MySQL 5.7 and later, MariaDB 10 and later) runs comments up to 5.7.0.
EXECUTED_UP_TO = 50700


# -- the scanner -----------------------------------------------------------------

# Strings, quoted identifiers and comments. Each form also accepts the end of
# the text instead of its closing delimiter (so an unterminated one is one token
# reaching the end — checked afterwards — and matching never backtracks).
_QUOTED = r"""
    '[^'\\]*(?:(?:\\.?|'')[^'\\]*)*(?:'|\Z)
  | "[^"\\]*(?:(?:\\.?|"")[^"\\]*)*(?:"|\Z)
  | `[^`]*(?:``[^`]*)*(?:`|\Z)
"""
_OPAQUE = _QUOTED + r"""
  | \#[^\n]*
  | --(?![^\s\x00-\x1f\x7f])[^\n]*
  | /\*.*?(?:\*/|\Z)
"""
#: Caller text: opaque tokens, ``%%``, ``%(name)s``, a lone ``%`` (not followed by
#: ``s``), ``?``. ``%s`` is deliberately *not* a token: it stays in the plain
#: text between tokens, where every ``%`` is then a ``%s`` (the alternatives
#: above take every other ``%``), so it is counted and replaced with C-level
#: ``str.count`` / ``str.replace`` instead of materialising one token per
#: placeholder (a 10 000-row INSERT has 30 000 of them).
_SCAN = re.compile(rf"({_OPAQUE} | %(?:%|\([^()]*\)s|(?!s)) | \?)", re.S | re.X)
#: Translated / regenerated text: opaque tokens or ``?``.
_QSCAN = re.compile(rf"({_OPAQUE} | \?)", re.S | re.X)

# Full (terminated) forms, to tell a closed token at the end of the text from an
# unterminated one.
_CLOSED = {
    "'": re.compile(r"'[^'\\]*(?:(?:\\.|'')[^'\\]*)*'", re.S),
    '"': re.compile(r'"[^"\\]*(?:(?:\\.|"")[^"\\]*)*"', re.S),
    "`": re.compile(r"`[^`]*(?:``[^`]*)*`", re.S),
}

_OPAQUE_START = re.compile(r"""['"`#]|--|/\*""")  # could start a string, identifier or comment
_QMARK_WORD = re.compile(r"\?[\w$]")  # a ``?`` touching a following word character
_STYLE_OF = {"%s": "format", "?": "qmark"}


def _style_of(token: str) -> str | None:
    if token in _STYLE_OF:
        return _STYLE_OF[token]
    if token[:2] == "%(":
        return "pyformat"
    return None


def _check_terminated(sql: str, parts: list[str]) -> None:
    """Refuse a string, identifier or block comment that runs off the end."""
    if parts[-1]:  # plain text after the last token: it did not reach the end
        return
    tok = parts[-2]
    opener = tok[0]
    if opener in _CLOSED:
        if _CLOSED[opener].fullmatch(tok):
            return
        what = "identifier" if opener == "`" else "string"
    elif tok[:2] == "/*":
        if len(tok) >= 4 and tok.endswith("*/"):
            return
        what = "comment"
    else:
        return
    position = len(sql) - len(tok)
    raise UnsupportedSQLError(
        f"unterminated {what} starting at position {position}: {tok[:40]!r} "
        f"in {shorten_sql(sql)!r}",
        sql=sql,
        position=position,
        fragment=tok,
    )


# -- executable comments -----------------------------------------------------------

#: Outside an executable comment: its opener, or a string / identifier / comment to skip.
_EXEC_OUTSIDE = re.compile(rf"(?P<open>/\*(?P<mariadb>[Mm])?!(?P<version>\d*)) | {_OPAQUE}", re.S | re.X)
#: Inside one: its end, a comment start (refused), or a string / identifier to skip.
_EXEC_INSIDE = re.compile(
    rf"(?P<close>\*/) | (?P<comment>/\*|\#|--(?![^\s\x00-\x1f\x7f])) | {_QUOTED}", re.S | re.X
)
_EXEC_START = re.compile(r"/\*[Mm]?!")


def unwrap_executable_comments(sql: str) -> str:
    """``sql`` with the markers of its MySQL executable comments blanked (see the module rules).

    The result has the same length as ``sql`` (markers become spaces), so an
    offset in it is the same offset in the caller's text.

    Raises:
        UnsupportedSQLError: a version the servers may not all run, a MariaDB-only
            ``/*M!`` comment, a comment inside an executable comment, or one that
            is never closed.
    """
    if _EXEC_START.search(sql) is None:
        return sql
    out: list[str] = []
    done = pos = 0
    while (found := _EXEC_OUTSIDE.search(sql, pos)) is not None:
        pos = found.end()
        if found.group("open") is None:
            continue
        _check_executable(sql, found)
        inner = pos
        while True:
            token = _EXEC_INSIDE.search(sql, inner)
            if token is None or token.group("comment") is not None:
                _refuse_executable(sql, found.start(), token)
            assert token is not None
            inner = token.end()
            if token.group("close") is not None:
                break
        out += [sql[done : found.start()], " " * (pos - found.start()), sql[pos : token.start()], "  "]
        done = pos = inner
    return "".join(out) + sql[done:]


def _check_executable(sql: str, opener: re.Match[str]) -> None:
    start = opener.start()
    fragment = sql[start : start + 40]
    version = opener.group("version")
    if opener.group("mariadb"):
        why = "it runs on MariaDB only (MySQL reads it as a comment)"
    elif version and len(version) != 5:
        why = f"its {len(version)}-digit version number is read differently by MySQL (5 digits) and MariaDB (6)"
    elif version and int(version) > EXECUTED_UP_TO:
        v = int(version)
        why = f"it runs only on servers of version {v // 10000}.{v // 100 % 100}.{v % 100} and later"
    else:
        return
    raise UnsupportedSQLError(
        f"executable comment at position {start} ({fragment!r}) is refused: {why}, and whether the data "
        f"sources run it decides what the statement does; write its content as plain SQL or drop it "
        f"(in {shorten_sql(sql)!r})",
        sql=sql,
        position=start,
        fragment=fragment,
        construct="executable comment",
    )


def _refuse_executable(sql: str, start: int, token: re.Match[str] | None) -> NoReturn:
    if token is None:
        what, position = "is never closed with '*/'", start
    else:
        what, position = f"contains a comment at position {token.start()}", token.start()
    raise UnsupportedSQLError(
        f"executable comment starting at position {start} ({sql[start : start + 40]!r}) {what}; "
        f"MySQL and MariaDB read such text differently (in {shorten_sql(sql)!r})",
        sql=sql,
        position=position,
        fragment=sql[start : start + 40],
        construct="executable comment",
    )


# -- translate ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Translated:
    """One statement with its placeholders replaced by ``?``.

    Attributes:
        sql: The SQL with every placeholder replaced by ``?`` and ``%%`` by ``%``
            (see the module docstring); ready for ``sqlglot.parse_one(read="mysql")``.
        style: ``"format"`` (``%s``), ``"pyformat"`` (``%(name)s``), ``"qmark"``
            (``?``) or ``"none"`` (no placeholder).
        names: For the i-th ``?`` of :attr:`sql`: the parameter index
            (format / qmark) or the dict key (pyformat; a key may repeat).
        formatted: Whether the text is read as PyMySQL reads it *with* params
            (``%s`` placeholders, ``%%`` escapes) or, ``False``, as sent
            unchanged without params (every ``%`` literal).
    """

    sql: str
    style: str
    names: tuple[str | int, ...]
    formatted: bool = True
    #: The caller's text, quoted in :meth:`bind`'s errors (default: :attr:`sql`).
    source: str = field(default="", compare=False, repr=False)

    def bind(self, params: Any = None) -> list[Any]:
        """The flat positional parameter list for the ``?``s of :attr:`sql`, in order.

        Args:
            params: What the caller passed with the statement: a sequence (list,
                tuple...) for format / qmark, a mapping for pyformat; ``None``
                or an empty container when there is no placeholder. Extra keys
                in a mapping are ignored (as PyMySQL does); extra items in a
                sequence are not.

        Raises:
            ParameterError: wrong container, wrong number of items, missing key.
        """
        names = self.names
        style = self.style
        if style == "pyformat":
            if not isinstance(params, Mapping):
                raise self._error(
                    f"%(name)s placeholders need a mapping of parameters, got {type(params).__name__}",
                    expected=len(names),
                )
            try:
                return [params[key] for key in names]
            except KeyError:
                missing = sorted({str(k) for k in names if k not in params})
                raise self._error(
                    f"missing parameter(s) {', '.join(map(repr, missing))} for %(name)s placeholders",
                    missing=tuple(missing),
                    expected=len(names),
                ) from None
        kind = type(params)
        if kind is tuple or kind is list:  # the common case, without ABC checks
            if len(params) == len(names):
                return list(params)
        elif params is None:
            if not names:
                return []
            raise self._error(
                f"statement has {len(names)} placeholder(s) but no parameters were given",
                expected=len(names),
                given=0,
            )
        elif isinstance(params, Mapping):
            if style == "none" and not params:
                return []
            raise self._error(
                f"{self._what()} need a sequence of parameters, got a mapping ({kind.__name__})",
                expected=len(names),
            )
        elif isinstance(params, (str, bytes, bytearray)) or not isinstance(params, Sequence):
            raise self._error(
                f"{self._what()} need a sequence of parameters (list or tuple), got {kind.__name__}",
                expected=len(names),
            )
        elif len(params) == len(names):
            return list(params)
        raise self._error(
            f"statement has {len(names)} placeholder(s) but {len(params)} parameter(s) were given",
            expected=len(names),
            given=len(params),
        )

    def numbered(self, prefix: str = ":p") -> str:
        """:attr:`sql` with the i-th ``?`` written as ``{prefix}{i}`` (``:p0``, ``:p1``...).

        Feed this to sqlglot when the tree will be regenerated: sqlglot keeps
        ``:pN`` names through rewrites, while bare ``?``s can change order
        (``LIMIT ?, ?`` is regenerated as ``LIMIT ? OFFSET ?``, count first).
        ``i`` indexes :meth:`bind`'s result. A space is added when the
        placeholder touches a following word character (``?AND`` → ``:p0 AND``).
        """
        if not self.names:
            return self.sql
        return "".join(self._numbered_parts(prefix)[1])

    def _numbered_parts(self, prefix: str, keep_old: bool = False) -> tuple[list[str], list[str]]:
        """The pieces of :attr:`sql` (with ``keep_old``; else ``[]``) and of :meth:`numbered`, aligned."""
        sql = self.sql
        label = (prefix.replace("{", "{{").replace("}", "}}") + "{}").format
        if _OPAQUE_START.search(sql) is None:  # no quotes or comments: every ``?`` counts
            plain = sql.split("?")
            tokens = ["?"] * (len(plain) - 1)
        else:
            split = _QSCAN.split(sql)
            plain, tokens = split[0::2], split[1::2]
        parts = [""] * (2 * len(tokens) + 1)
        parts[0::2] = plain
        old = list(parts) if keep_old else []
        if keep_old:
            old[1::2] = tokens
        if tokens.count("?") == len(tokens):
            parts[1::2] = map(label, range(len(tokens)))
        else:
            counter = iter(range(len(self.names)))
            parts[1::2] = [label(next(counter)) if t == "?" else t for t in tokens]
        for k in range(2, len(parts), 2) if _QMARK_WORD.search(sql) else ():
            head = parts[k][:1]
            if (head.isalnum() or head in ("_", "$")) and tokens[k // 2 - 1] == "?":
                parts[k - 1] += " "  # on the label, so the text after it stays aligned with the original
        return old, parts

    def _what(self) -> str:
        return {"format": "%s placeholders", "qmark": "? placeholders"}.get(
            self.style, "statements without placeholders"
        )

    def _error(self, message: str, **context: Any) -> ParameterError:
        return ParameterError(
            f"{message} (statement: {shorten_sql(self.source or self.sql)!r})",
            sql=self.source or self.sql,
            style=self.style,
            **context,
        )


@lru_cache(maxsize=4096)
def translate(sql: str, formatted: bool = True) -> Translated:
    """Replace the DB-API placeholders of ``sql`` by ``?`` (see the module rules).

    Results are cached per SQL text and ``formatted`` (LRU, 4096 entries).

    Args:
        sql: The caller's statement.
        formatted: ``True`` when the caller passes params (PyMySQL then
            %-formats the text: ``%s`` / ``%(name)s`` are placeholders, ``%%``
            a literal ``%``); ``False`` for ``params=None``, where the text is
            sent unchanged and every ``%`` is literal (``a % 7`` is modulo).

    Raises:
        ParameterError: mixed styles, a ``%`` that is neither ``%s``,
            ``%(name)s`` nor ``%%`` (formatted text), or a placeholder touching
            the next one or a ``::`` (``%s%s`` → ``??``, which sqlglot reads as one operator).
        UnsupportedSQLError: an unterminated string, identifier or comment, or
            an executable comment that cannot be routed safely.
    """
    if not isinstance(sql, str):
        raise ParameterError(f"SQL must be a str, got {type(sql).__name__}", sql=sql)
    # Same length as ``sql``: every offset below is also an offset in the caller's text.
    text = unwrap_executable_comments(sql) if "/*" in sql else sql
    if not formatted:
        return _translate_unformatted(sql, text)
    parts = _SCAN.split(text)
    if len(parts) == 1:  # no quotes, comments, ``?`` or ``%`` other than ``%s``
        count = text.count("%s")
        if not count:
            return Translated(text, "none", (), source=sql)
        out = text.replace("%s", "?")
        if "??" in out or "?::" in out:
            _check_adjacent(sql, parts)
        return Translated(out, "format", tuple(range(count)), source=sql)

    _check_terminated(sql, parts)
    plain = parts[0::2]
    tokens = parts[1::2]
    kinds = set(tokens)
    n_format = sum([p.count("%s") for p in plain])

    styles = {s for s in map(_style_of, kinds) if s is not None}
    if n_format:
        styles.add("format")
    if len(styles) > 1:
        _mixed(sql, parts, styles)
    style = styles.pop() if styles else "none"

    if "%" in kinds and style != "qmark":
        pos = _offsets(parts)[2 * tokens.index("%") + 1]
        fragment = sql[pos : pos + 12]
        raise ParameterError(
            f"unsupported '%' at position {pos}: {fragment!r} is neither a placeholder "
            f"(%s or %(name)s) nor an escaped percent sign (%%); with parameters the statement is "
            f"%-formatted as PyMySQL does, so write '%%' for a literal '%' (the modulo operator: "
            f"'a %% 2' or MOD(a, 2)) in {shorten_sql(sql)!r}",
            sql=sql,
            position=pos,
            fragment=fragment,
        )

    # One replacement per distinct token, applied to all tokens at C speed.
    percent_format = style != "qmark"  # PyMySQL %-formats the whole text
    repl = {tok: _replacement(tok, percent_format) for tok in kinds}
    parts[1::2] = map(repl.__getitem__, tokens)
    if n_format:
        parts[0::2] = [p.replace("%s", "?") for p in plain]
    out = "".join(parts)

    names: tuple[str | int, ...]
    if style == "format":
        names = tuple(range(n_format))
    elif style == "qmark":
        names = tuple(range(tokens.count("?")))
    elif style == "pyformat":
        names = tuple([t[2:-2] for t in tokens if t[:2] == "%("])
    else:
        names = ()

    if names and ("??" in out or "?::" in out):
        _check_adjacent(sql, _SCAN.split(text))
    return Translated(out, style, names, source=sql)


def _translate_unformatted(sql: str, text: str) -> Translated:
    """``params=None``: the text as sent; only ``?`` outside quotes and comments is a placeholder."""
    parts = _QSCAN.split(text)
    if len(parts) == 1:
        return Translated(text, "none", (), formatted=False, source=sql)
    _check_terminated(sql, parts)
    count = parts[1::2].count("?")
    if count and ("??" in text or "?::" in text):
        _check_adjacent(sql, parts, formatted=False)
    return Translated(text, "qmark" if count else "none", tuple(range(count)), formatted=False, source=sql)


def _replacement(token: str, percent_format: bool) -> str:
    """What a scanner token of a formatted statement becomes in the translated text."""
    lead = token[0]
    if lead == "%":
        return "%" if token in ("%%", "%") else "?"
    if lead == "?":
        return "?"
    return token.replace("%%", "%") if percent_format else token


def source_offset(translated: Translated, sql: str, offset: int) -> int:
    """Where offset ``offset`` of ``translated.numbered()`` lies in ``sql``, the text it was translated from.

    For error messages. An offset inside a replaced piece (a placeholder, a
    ``%%``, a string whose ``%%`` were unescaped) maps to the start of that
    piece in ``sql``.
    """
    if translated.names:
        offset = _map_back(*translated._numbered_parts(":p", keep_old=True), offset)
    if not translated.formatted or sql == translated.sql:  # the translation kept the text as it was
        return offset
    text = unwrap_executable_comments(sql) if "/*" in sql else sql  # same length and offsets as sql
    percent_format = translated.style != "qmark"
    old: list[str] = []
    new: list[str] = []
    for k, part in enumerate(_SCAN.split(text)):
        if k % 2:
            old.append(part)
            new.append(_replacement(part, percent_format))
            continue
        for piece in re.split("(%s)", part):
            old.append(piece)
            new.append("?" if piece == "%s" else piece)
    return _map_back(old, new, offset)


def _map_back(old: list[str], new: list[str], offset: int) -> int:
    """The offset in ``"".join(old)`` of ``offset`` in ``"".join(new)`` (pieces aligned one to one)."""
    o = n = 0
    for before, after in zip(old, new):
        if offset < n + len(after):
            return o + (offset - n if before == after else 0)
        o += len(before)
        n += len(after)
    return o + (offset - n)


def _offsets(parts: list[str]) -> list[int]:
    """Start offset of every part of a split (error paths only)."""
    return [0, *accumulate(map(len, parts))]


def _placeholder_units(sql: str, parts: list[str], formatted: bool = True) -> list[tuple[int, str, bool]]:
    """(offset, text, is_placeholder) for every piece of the original text (error paths)."""
    offsets = _offsets(parts)
    units: list[tuple[int, str, bool]] = []
    for k, part in enumerate(parts):
        if k % 2:
            units.append((offsets[k], part, _style_of(part) is not None))
            continue
        pos = offsets[k]
        for piece in re.split("(%s)", part) if formatted else [part]:
            if piece:
                units.append((pos, piece, formatted and piece == "%s"))
            pos += len(piece)
    return units


def _mixed(sql: str, parts: list[str], styles: set[str]) -> None:
    first: dict[str, tuple[int, str]] = {}
    for pos, text, is_placeholder in _placeholder_units(sql, parts):
        if is_placeholder:
            first.setdefault(_style_of(text) or "format", (pos, text))
    found = sorted((pos, style, text) for style, (pos, text) in first.items())
    listed = " and ".join(f"{s!r} ({t!r} at position {p})" for p, s, t in found)
    raise ParameterError(
        f"statement mixes placeholder styles {listed}: use one style per statement "
        f"(in {shorten_sql(sql)!r})",
        sql=sql,
        styles=tuple(s for _, s, _ in found),
        position=found[1][0],
    )


def _check_adjacent(sql: str, parts: list[str], formatted: bool = True) -> None:
    """Refuse ``??`` / ``?::`` outside quotes: sqlglot reads each as one operator token."""
    units = _placeholder_units(sql, parts, formatted)
    for i, (pos, _, is_placeholder) in enumerate(units[:-1]):
        if not is_placeholder:
            continue
        _, after, after_is_placeholder = units[i + 1]
        if after_is_placeholder or after[:2] == "::":
            fragment = sql[pos : pos + 12]
            raise ParameterError(
                f"placeholder at position {pos} touches the next token ({fragment!r}): the parser "
                f"would read '??' / '?::' as one operator; separate them (in {shorten_sql(sql)!r})",
                sql=sql,
                position=pos,
                fragment=fragment,
            )


# -- back to the driver's paramstyle ---------------------------------------------------


@lru_cache(maxsize=4096)
def to_paramstyle(sql_with_qmarks: str, style: str) -> str:
    """Write the ``?`` placeholders of a (rewritten) statement in a driver's paramstyle.

    Args:
        sql_with_qmarks: SQL whose placeholders are ``?`` (and whose ``%`` are
            literal), e.g. sqlglot's regeneration of :attr:`Translated.sql`.
        style: ``"format"`` (PyMySQL, mysqlclient): ``?`` outside quotes and
            comments → ``%s`` and every literal ``%`` → ``%%`` (everywhere:
            the driver %-formats the whole text, so execute the result with a
            params list — ``[]`` when empty, never ``None``). ``"qmark"``
            (sqlite3): returned unchanged.

    Raises:
        ConfigError: an unknown style.
        UnsupportedSQLError: an unterminated string, identifier or comment.
    """
    if style == "qmark":
        return sql_with_qmarks
    if style != "format":
        raise ConfigError(
            f"unsupported output paramstyle {style!r}: expected one of {OUTPUT_PARAMSTYLES}",
            field="paramstyle",
            value=style,
        )
    escaped = sql_with_qmarks.replace("%", "%%")
    if "?" not in escaped:
        return escaped
    parts = _QSCAN.split(escaped)
    _check_terminated(escaped, parts)
    tokens = parts[1::2]
    repl = {tok: tok for tok in set(tokens)}
    repl["?"] = "%s"
    parts[1::2] = map(repl.__getitem__, tokens)
    return "".join(parts)
