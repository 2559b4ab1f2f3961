"""Which statements a session answers itself, and which go to the router.

Both servers of a client session read statements through here: ``ddm proxy``
(docs/proxy.md#session-statements) and the DB-API facade, which SQLAlchemy and
other clients drive (docs/sqlalchemy.md#what-the-facade-answers).

Data statements (SELECT with tables, INSERT, UPDATE, DELETE, DDL, SHOW TABLES)
go to ddm-core's router as they are, so each is parsed once, by the router.
Session statements — transaction control, ``SET``, ``USE``, ``SHOW DATABASES``,
``SHOW VARIABLES``, the FROM-less probes drivers send on connect (``SELECT
@@version_comment LIMIT 1``, ``SELECT DATABASE()``) and ``PREVIEW <sql>`` — are
recognised here by their first words, with no parse: they concern the client
session, which no data source holds.
"""

from __future__ import annotations

import functools

import re
from enum import Enum
from typing import NamedTuple

__all__ = ["Kind", "Classified", "Probe", "classify", "probe_items", "returns_rows"]


class Kind(Enum):
    """What a statement is, for the session."""

    ROUTED = "routed"  # the router's: data, DDL, SHOW TABLES, anything not below
    EMPTY = "empty"  # nothing but comments / whitespace / ';'
    BEGIN = "begin"
    COMMIT = "commit"
    ROLLBACK = "rollback"
    SET = "set"
    USE = "use"
    SHOW_DATABASES = "show databases"
    SHOW_VARIABLES = "show variables"
    SHOW_NOTHING = "show nothing"  # SHOW WARNINGS / ERRORS / STATUS: empty, as no statement left any
    PROBE = "probe"  # FROM-less SELECT of session facts only
    PREVIEW = "preview"
    KILL = "kill"  # KILL [CONNECTION | QUERY] <id>: of the proxy's own sessions, never forwarded
    SAVEPOINT = "savepoint"  # the name in ``rest``: set on every connection of the transaction
    ROLLBACK_TO = "rollback to savepoint"
    RELEASE = "release savepoint"


class Classified(NamedTuple):
    kind: Kind
    rest: str = ""  # BEGIN: START TRANSACTION's characteristics; SET: the statement; PREVIEW: the SQL to route; USE: the database; SHOW VARIABLES: the LIKE pattern; KILL: what follows


_LEADING = re.compile(r"(?:\s+|/\*(?!M?!).*?\*/|(?:--\s|#)[^\n]*(?:\n|\Z))*", re.S)
#: What ends a statement without being part of it: MySQL's whitespace and ';'. Stripped with
#: str.rstrip, not a regex: ``[\s;]+\Z`` is tried at every position of a run and fails at each
#: but the last, so a statement of 48 000 spaces and one character took seconds (quadratic).
_TRAILING = " \t\r\n\f\v;"
_CHARACTERISTIC = r"(?:WITH\s+CONSISTENT\s+SNAPSHOT|READ\s+(?:WRITE|ONLY))"
_BEGIN = re.compile(
    r"(?:BEGIN(?:\s+WORK)?|START\s+TRANSACTION(?:\s+(" + _CHARACTERISTIC + r"(?:\s*,\s*" + _CHARACTERISTIC + r")*))?)\Z",
    re.I,
)
_COMMIT = re.compile(r"COMMIT(?:\s+WORK)?\Z", re.I)
_ROLLBACK = re.compile(r"ROLLBACK(?:\s+WORK)?\Z", re.I)
_USE = re.compile(r"USE\s+(`(?:[^`]|``)+`|\S+)\Z", re.I)
_SHOW_DATABASES = re.compile(r"SHOW\s+(?:DATABASES|SCHEMAS)\Z", re.I)
_SHOW_VARIABLES = re.compile(
    r"SHOW\s+(?:(?:SESSION|LOCAL|GLOBAL)\s+)?VARIABLES(?:\s+LIKE\s+'([^'\\]*(?:(?:\\.|'')[^'\\]*)*)')?\Z", re.I
)
_SHOW_NOTHING = re.compile(r"SHOW\s+(?:(?:SESSION|GLOBAL)\s+)?(?:WARNINGS|ERRORS|STATUS)(?:\s+LIKE\s+'[^']*')?\Z", re.I)
_PREVIEW = re.compile(r"PREVIEW\s+(.+)\Z", re.I | re.S)
_NAME = r"(`(?:[^`]|``)+`|[A-Za-z0-9_$]+)"
_SAVEPOINTS = (
    (re.compile(r"SAVEPOINT\s+" + _NAME + r"\Z", re.I), "SAVEPOINT"),
    (re.compile(r"ROLLBACK(?:\s+WORK)?\s+TO\s+(?:SAVEPOINT\s+)?" + _NAME + r"\Z", re.I), "ROLLBACK_TO"),
    (re.compile(r"RELEASE\s+SAVEPOINT\s+" + _NAME + r"\Z", re.I), "RELEASE"),
)
_FIRST_WORD = re.compile(r"[A-Za-z]+")

#: First words that can only be a session statement (anything else is the router's).
_SESSION_WORDS = frozenset({
    "BEGIN", "START", "COMMIT", "ROLLBACK", "SET", "USE", "SHOW", "PREVIEW", "SELECT", "KILL", "SAVEPOINT", "RELEASE",
})  # fmt: skip


class Probe(NamedTuple):
    """One item of a FROM-less probe: what it asks for and the column name it gets."""

    what: str  # "@@<variable>" (lower case, scope dropped) or a function name (upper case)
    column: str


_PROBE_FUNCTIONS = frozenset({
    "DATABASE", "SCHEMA", "VERSION", "LAST_INSERT_ID", "CONNECTION_ID", "USER", "CURRENT_USER",
    "SESSION_USER", "SYSTEM_USER",
})  # fmt: skip
_PROBE_ITEM = re.compile(
    r"(?P<expr>@@(?:(?:session|global|local)\.)?(?P<var>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<fn>[A-Za-z_]+)\s*\(\s*\)|(?P<bare>CURRENT_USER))"
    r"(?:\s+(?:AS\s+)?(?P<alias>`(?:[^`]|``)+`|'[^']*'|[A-Za-z_][A-Za-z0-9_$]*))?\Z",
    re.I,
)
_CURRENT_USER = re.compile(r"CURRENT_USER", re.I)
#: A whole statement in one executable comment: ``/*!`` or MariaDB's ``/*M!``, an optional version,
#: then the body, with no other comment end inside (the server runs the body: it is the statement).
_EXECUTABLE = re.compile(r"/\*M?!(?:\d{5,6})?\s*([^*]*(?:\*(?!/)[^*]*)*)\*/", re.S)
_PROBE = re.compile(r"SELECT\s+(?P<items>.+)\Z", re.I | re.S)
#: A probe's LIMIT: only where a whitespace run starts (the lookbehind), so a long run of spaces
#: is scanned once, not once from each of its positions.
_PROBE_LIMIT = re.compile(r"(?<!\s)\s+LIMIT\s+\d+\Z", re.I)


def _strip(sql: str) -> str:
    """``sql`` without leading comments and trailing ``;`` / whitespace; a statement that is one
    executable comment (``/*!40101 SET NAMES utf8 */``, as dump files write them) is its body."""
    start = _LEADING.match(sql)
    text = sql[start.end() :] if start else sql
    text = text.rstrip(_TRAILING)
    whole = _EXECUTABLE.fullmatch(text)
    return whole.group(1).rstrip(_TRAILING) if whole else text


@functools.lru_cache(maxsize=4096)
def classify(sql: str) -> Classified:
    """What ``sql`` is (one look at its first words; no parse), remembered per text: clients repeat their
    texts, a prepared statement's every execute."""
    text = _strip(sql)
    if not text:
        return Classified(Kind.EMPTY)
    first = _FIRST_WORD.match(text)
    word = first.group(0).upper() if first else ""
    if word not in _SESSION_WORDS:
        return Classified(Kind.ROUTED)
    if word == "SELECT":
        return Classified(Kind.PROBE) if probe_items(text) is not None else Classified(Kind.ROUTED)
    if word == "SET":
        return Classified(Kind.SET, text)
    if word == "KILL":
        return Classified(Kind.KILL, text[first.end() :].strip() if first else "")
    begin = _BEGIN.match(text)
    if begin:  # START TRANSACTION's characteristics as written (execute.isolation.characteristics reads them)
        return Classified(Kind.BEGIN, " ".join((begin.group(1) or "").split()))
    for pattern, kind in ((_COMMIT, Kind.COMMIT), (_ROLLBACK, Kind.ROLLBACK)):
        if pattern.match(text):
            return Classified(kind)
    for pattern, name in _SAVEPOINTS:
        m = pattern.match(text)
        if m:
            return Classified(Kind[name], _unquote(m.group(1)))
    m = _USE.match(text)
    if m:
        return Classified(Kind.USE, _unquote(m.group(1)))
    if _SHOW_DATABASES.match(text):
        return Classified(Kind.SHOW_DATABASES)
    m = _SHOW_VARIABLES.match(text)
    if m:
        return Classified(Kind.SHOW_VARIABLES, m.group(1) or "")
    if _SHOW_NOTHING.match(text):
        return Classified(Kind.SHOW_NOTHING)
    m = _PREVIEW.match(text)
    if m:
        return Classified(Kind.PREVIEW, m.group(1))
    return Classified(Kind.ROUTED)


#: First words of the statements that return rows (a prepared one's columns are announced at prepare).
_ROW_WORDS = frozenset({"SELECT", "WITH", "SHOW", "VALUES", "TABLE", "DESC", "DESCRIBE", "EXPLAIN"})


def returns_rows(sql: str) -> bool:
    """``sql`` is a query (``SELECT``, ``WITH``, ``SHOW``, ...), not DML, DDL or a session statement."""
    text = _strip(sql).lstrip("( \t\r\n")
    first = _FIRST_WORD.match(text)
    return first is not None and first.group(0).upper() in _ROW_WORDS


def probe_items(text: str) -> list[Probe] | None:
    """The items of a FROM-less SELECT of session facts only, or ``None`` when it is anything else."""
    if "@@" not in text and "(" not in text and _CURRENT_USER.search(text) is None:
        return None  # every probe item has one of them; most SELECTs are told apart here, in C
    m = _PROBE.match(_strip(text))
    if m is None:
        return None
    listed = m.group("items")
    limit = _PROBE_LIMIT.search(listed)
    items: list[Probe] = []
    for raw in (listed[: limit.start()] if limit else listed).split(","):
        item = _PROBE_ITEM.match(raw.strip())
        if item is None:
            return None
        fn = item.group("fn")
        if fn is not None and fn.upper() not in _PROBE_FUNCTIONS:
            return None
        what = "@@" + item.group("var").lower() if item.group("var") else (fn or "CURRENT_USER").upper()
        alias = item.group("alias")
        items.append(Probe(what, _unquote(alias) if alias else item.group("expr")))
    return items


def _unquote(name: str) -> str:
    if len(name) >= 2 and name[0] == name[-1] and name[0] in "`'":
        return name[1:-1].replace(name[0] * 2, name[0])
    return name
