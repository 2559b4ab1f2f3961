"""What a proxy user may run beyond the logic database's data (docs/proxy.md#privileges).

A statement that names no logic table goes to the default data source as the data sources' own
user — often one with every privilege. So beyond reading and writing tables of the logic database
(and DDL on them), a statement needs a privilege the proxy user was given (``proxy.users[].allow``),
as on MySQL:

* ``file``: ``LOAD_FILE()``, ``SELECT ... INTO OUTFILE / DUMPFILE``, ``LOAD DATA`` / ``LOAD XML``;
* ``process``: ``SHOW PROCESSLIST``, ``SHOW ENGINE``, ``SHOW STATUS``, ``EXPLAIN FOR CONNECTION``, the
  ``information_schema`` tables of server state (every one but the metadata views drivers read);
* ``admin``: every statement not known to be data, logic-table DDL or a savepoint — user and
  privilege management, ``CREATE / DROP DATABASE``, ``SHUTDOWN``, ``FLUSH``, ``CALL``, ``HANDLER``,
  ``LOCK TABLES``, ``XA``, ``PREPARE``, replication, the ``SHOW`` of server state;
* ``schemas``: a table or routine qualified with another database than the logic one
  (``mysql.user``, ``performance_schema.*``, ``sys.*``, the data sources' own databases).

:func:`required` reads a statement as the data source would: executable comments (``/*! ... */``)
are code, strings and comments are not (a literal ``'load_file(x)'`` needs nothing). Words and
patterns find the statement's kind and the file functions; sqlglot (the router's parser) finds the
qualified tables, only for statements that have a qualified name. The answer depends on the text
alone, so sessions keep it per statement shape (``Shape.needs``): a statement seen before costs one
identity test (``needs is PLAIN``). ``KILL``, ``SET`` and ``USE`` are the proxy's own statements
(ddm_core/session_statements.py); written inside an executable comment they would be forwarded, so they are
refused for everyone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Iterable, NamedTuple

from sqlglot import exp
from sqlglot.errors import SqlglotError

from ddm_core._text import BACKTICKED, DOUBLE_QUOTED, SINGLE_QUOTED, shorten_sql
from ddm_core.errors import DdmError, ProxyAccessDeniedError, UnsupportedSQLError
from ddm_core.metadata.model import PROXY_PRIVILEGES, ProxyUser
from ddm_core.route.text.placeholders import translate
from ddm_core.route.text.statement_parser import parse_statements

__all__ = ["Privilege", "Demand", "Needs", "PLAIN", "required", "AccessControl"]


class Privilege(Enum):
    """A ``proxy.users[].allow`` value (the module docstring says what each opens)."""

    FILE = "file"
    PROCESS = "process"
    ADMIN = "admin"
    SCHEMAS = "schemas"


#: What each privilege is about, for the refusal's message.
_WHY = {
    Privilege.FILE: "it reads or writes files on a data source's server",
    Privilege.PROCESS: "it shows other sessions or the server's internals",
    Privilege.ADMIN: "it administers a data source's server",
    Privilege.SCHEMAS: "it reaches outside the logic database",
}


class Demand(NamedTuple):
    """One privilege a statement needs, and what in it asks for it."""

    privilege: Privilege
    scope: str  # what a refusal names: operation, table, routine or database (its MySQL code: mysql_errors.py)
    target: str  # "LOAD_FILE()", "SHOW PROCESSLIST", "mysql.user", ...
    command: str  # the statement's first word, as MySQL's "SELECT command denied" names it


@dataclass(frozen=True, slots=True)
class Needs:
    """What a statement needs beyond plain data (:data:`PLAIN`: nothing)."""

    demands: tuple[Demand, ...] = ()
    #: A statement the proxy answers itself (KILL, SET, USE), found where it would be forwarded.
    forbidden: str | None = None
    privileges: frozenset[Privilege] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "privileges", frozenset(d.privilege for d in self.demands))


PLAIN = Needs()

# -- reading a statement ----------------------------------------------------------------------------

#: Strings and comments (blanked: they are not code); `identifiers` kept (they may hold quotes). A comment
#: never closed runs to the end, so thousands of unclosed ``/*`` are one match, not one scan each.
_HIDDEN = re.compile(
    rf"({BACKTICKED})|{SINGLE_QUOTED}|{DOUBLE_QUOTED}|/\*.*?(?:\*/|\Z)|\#[^\n]*|--(?![^\s\x00-\x1f\x7f])[^\n]*",
    re.S,
)
#: Executable comments, when the router's own unwrapping refused the text (a fallback: see _code).
_EXECUTABLE = re.compile(r"/\*[Mm]?!\d*(.*?)(?:\*/|\Z)", re.S)
_STATEMENT = re.compile(r"[^;]+")
_IDENT = rf"(?:[\w$]+|{BACKTICKED})"
_WORD = re.compile(rf"[A-Za-z_$][\w$]*|{BACKTICKED}")
# Names are matched from their first character only (the lookbehinds): a long word is one attempt.
_QUALIFIED = re.compile(rf"(?<![\w$])({_IDENT})\s*\.\s*({_IDENT})")
_ROUTINE = re.compile(rf"(?<![\w$])([A-Za-z_$][\w$]*|{BACKTICKED})\s*\.\s*({_IDENT})\s*\(")
_LOAD_FILE = re.compile(r"(?<![\w$`])`?LOAD_FILE`?\s*\(", re.I)
_INTO_FILE = re.compile(r"(?<![\w$])INTO\s+(OUTFILE|DUMPFILE)(?![\w$])", re.I)
#: Table options that put a table's files anywhere on the server, or its rows on another server / in files.
_DIRECTORY = re.compile(r"(?<![\w$])(DATA|INDEX)\s+DIRECTORY(?![\w$])", re.I)
_REMOTE_ENGINE = re.compile(r"(?<![\w$])ENGINE\s*=?\s*`?(CONNECT|FEDERATED|FEDERATEDX|SPIDER)(?![\w$])", re.I)
_WORDS_READ = 8  # a statement's kind is in its first words

#: Statements that read or write rows (their tables are checked).
_DATA = frozenset({"SELECT", "WITH", "VALUES", "TABLE", "INSERT", "REPLACE", "UPDATE", "DELETE"})
#: DDL kept to tables and indexes of the logic database.
_TABLE_DDL = frozenset({"CREATE", "ALTER", "DROP"})
_DDL_MODIFIERS = frozenset(
    {"OR", "REPLACE", "TEMPORARY", "UNIQUE", "FULLTEXT", "SPATIAL", "ONLINE", "OFFLINE", "IGNORE"}
)
_TABLE_OBJECTS = frozenset({"TABLE", "INDEX"})
_SAVEPOINTS = frozenset({"SAVEPOINT", "RELEASE", "ROLLBACK"})
#: Answered by the proxy itself (ddm_core/session_statements.py): never forwarded, whoever asks.
_PROXY_ONLY = frozenset({"KILL", "SET", "USE"})
_EXPLAIN = frozenset({"EXPLAIN", "DESCRIBE", "DESC", "ANALYZE"})
_EXPLAIN_OPTIONS = frozenset({"EXTENDED", "PARTITIONS", "ANALYZE", "FORMAT", "JSON", "TREE", "TRADITIONAL"})
_SHOW_MODIFIERS = frozenset({"FULL", "EXTENDED", "GLOBAL", "SESSION", "LOCAL", "STORAGE"})
#: SHOW of the logic database's tables and of fixed server facts (MySQL shows them to every user).
_SHOW_OPEN = frozenset({
    "TABLES", "TABLE", "COLUMNS", "FIELDS", "INDEX", "INDEXES", "KEYS", "CHARACTER", "CHARSET", "COLLATION",
    "ENGINES", "TRIGGERS", "PRIVILEGES", "WARNINGS", "ERRORS", "COUNT",
})  # fmt: skip
_SHOW_CREATE_OPEN = frozenset({"TABLE", "VIEW"})
_SHOW_PROCESS = frozenset({"PROCESSLIST", "ENGINE", "PROFILE", "PROFILES", "STATUS", "EXPLAIN", "ANALYZE", "MUTEX"})
_SHOW_SCHEMAS = frozenset({"DATABASES", "SCHEMAS"})
#: Statements whose qualified names are all tables (no columns): read without sqlglot when it cannot.
_TABLES_ONLY = frozenset({"CREATE", "ALTER", "DROP", "RENAME", "TRUNCATE", "SHOW", "DESC", "DESCRIBE"})
#: Databases of every server: checked by word even where sqlglot cannot read the statement.
_SYSTEM_SCHEMAS = frozenset({"mysql", "information_schema", "performance_schema", "sys"})
#: information_schema views of the metadata drivers and ORMs read (SQLAlchemy's reflection, JDBC's).
_OPEN_INFORMATION_SCHEMA = frozenset({
    "SCHEMATA", "TABLES", "COLUMNS", "STATISTICS", "KEY_COLUMN_USAGE", "TABLE_CONSTRAINTS",
    "REFERENTIAL_CONSTRAINTS", "CHECK_CONSTRAINTS", "VIEWS", "TRIGGERS", "ROUTINES", "PARAMETERS", "PARTITIONS",
    "EVENTS", "CHARACTER_SETS", "COLLATIONS", "COLLATION_CHARACTER_SET_APPLICABILITY", "ENGINES", "KEYWORDS",
    "SQL_FUNCTIONS", "COLUMNS_EXTENSIONS", "TABLES_EXTENSIONS", "VIEW_TABLE_USAGE", "VIEW_ROUTINE_USAGE",
})  # fmt: skip
#: information_schema views of accounts and grants; every other one shows server state (process).
_ADMIN_INFORMATION_SCHEMA = frozenset({
    "USER_PRIVILEGES", "SCHEMA_PRIVILEGES", "TABLE_PRIVILEGES", "COLUMN_PRIVILEGES", "APPLICABLE_ROLES",
    "ENABLED_ROLES", "ADMINISTRABLE_ROLE_AUTHORIZATIONS", "ROLE_COLUMN_GRANTS", "ROLE_ROUTINE_GRANTS",
    "ROLE_TABLE_GRANTS", "USER_ATTRIBUTES", "USERS", "PLUGINS", "ALL_PLUGINS",
})  # fmt: skip


def required(text: str, schema: str, *, formatted: bool) -> Needs:
    """What ``text`` needs beyond plain data in the logic database ``schema``.

    Args:
        text: The statement as the router gets it (literals may be ``%s`` / ``?`` placeholders).
        schema: The logic database's name (tables qualified with it are the logic tables).
        formatted: ``text`` comes with parameters (``%s`` are placeholders, as for the router).
    """
    code = _code(text, formatted)
    bare = _HIDDEN.sub(_blank, code) if _has_hidden(code) else code
    demands: list[Demand] = []
    forbidden: str | None = None
    # One statement (the router refuses more) is read whole, without copies of a long text.
    pieces = [(bare, code)]
    if ";" in bare:
        pieces = [(m.group(), code[m.start() : m.end()]) for m in _STATEMENT.finditer(bare)]
    for piece, piece_code in pieces:
        found, proxy_only = _statement(piece, piece_code, schema.lower())
        demands.extend(found)
        forbidden = forbidden or proxy_only
    if not demands and forbidden is None:
        return PLAIN
    return Needs(tuple(dict.fromkeys(demands)), forbidden)


def _code(text: str, formatted: bool) -> str:
    """``text`` with executable comments unwrapped, as the router sends it to a data source."""
    try:
        return translate(text, formatted=formatted).sql
    except DdmError:  # the router refuses it too; read every executable comment as code all the same
        return _EXECUTABLE.sub(r" \1 ", text)


def _has_hidden(code: str) -> bool:
    return "'" in code or '"' in code or "`" in code or "/*" in code or "#" in code or "--" in code


def _blank(m: re.Match[str]) -> str:
    """A string or comment becomes spaces (offsets stay those of the code); an `identifier` stays."""
    return m.group() if m.group(1) else " " * (m.end() - m.start())


def _words(bare: str) -> list[re.Match[str]]:
    """The first words of a statement: empty when it does not start with one (after ``(``)."""
    words: list[re.Match[str]] = []
    for m in _WORD.finditer(bare):
        if not words and bare[: m.start()].strip(" \t\r\n\f\v("):
            return []
        words.append(m)
        if len(words) == _WORDS_READ:
            break
    return words


def _statement(bare: str, code: str, schema: str) -> tuple[list[Demand], str | None]:
    """One statement's demands (``bare``: its code with strings and comments blanked), and a proxy-only word."""
    words = _words(bare)
    if not words:
        return [], None
    names = [w.group().upper() for w in words]
    first = names[0]
    if first in _PROXY_ONLY:
        return [], first
    demands = _kind(bare, code, words, names, schema)
    lower = bare.lower()  # substring tests in C before the regular expressions
    if "load_file" in lower and _LOAD_FILE.search(bare):
        demands.append(Demand(Privilege.FILE, "operation", "LOAD_FILE()", first))
    into = _INTO_FILE.search(bare) if "outfile" in lower or "dumpfile" in lower else None
    if into:
        demands.append(Demand(Privilege.FILE, "operation", f"INTO {into.group(1).upper()}", first))
    if first in _TABLE_DDL:
        directory = _DIRECTORY.search(bare) if "directory" in lower else None
        if directory:
            demands.append(Demand(Privilege.FILE, "operation", f"{directory.group(1).upper()} DIRECTORY", first))
        engine = _REMOTE_ENGINE.search(bare) if "engine" in lower else None
        if engine:
            demands.append(Demand(Privilege.ADMIN, "operation", f"ENGINE={engine.group(1).upper()}", first))
    if "." in bare or first == "SHOW":
        demands.extend(_foreign(bare, code, first, schema))
    return demands, None


def _kind(bare: str, code: str, words: list[re.Match[str]], names: list[str], schema: str) -> list[Demand]:
    """What the statement's kind needs (its first words)."""
    first = names[0]
    second = names[1] if len(names) > 1 else ""
    if first in _DATA or first in _SAVEPOINTS or first == "TRUNCATE":
        return []
    if first in _TABLE_DDL:
        return _ddl(words, names)
    if first == "RENAME":
        return [] if second == "TABLE" else [_admin(words)]
    if first == "SHOW":
        return _show(names)
    if first in _EXPLAIN:
        rest = [i for i in range(1, len(names)) if names[i] not in _EXPLAIN_OPTIONS]
        following = names[rest[0]] if rest else ""
        if following in _DATA and (following, first) != ("TABLE", "ANALYZE"):
            # EXPLAIN of a statement (MariaDB's ANALYZE runs it): what that statement needs
            start = words[rest[0]].start()
            found, _ = _statement(bare[start:], code[start:], schema)
            return found
        if following == "FOR":  # another session's statement
            return [Demand(Privilege.PROCESS, "operation", f"{first} FOR CONNECTION", first)]
        return [_admin(words)] if first == "ANALYZE" else []  # DESCRIBE t: its tables are checked; ANALYZE TABLE
    if first == "LOAD" and second in ("DATA", "XML"):
        return [Demand(Privilege.FILE, "operation", f"LOAD {second}", first)]
    return [_admin(words)]


def _admin(words: list[re.Match[str]]) -> Demand:
    """An administrative statement, named by its first two words (SHUTDOWN, GRANT ALL, CALL p)."""
    first = words[0].group().upper()
    return Demand(Privilege.ADMIN, "operation", " ".join([first] + [w.group() for w in words[1:2]]), first)


def _ddl(words: list[re.Match[str]], names: list[str]) -> list[Demand]:
    """CREATE / ALTER / DROP: of a table or an index, nothing; of a database or anything else, admin."""
    objects = [i for i in range(1, len(names)) if names[i] not in _DDL_MODIFIERS]
    what = names[objects[0]] if objects else ""
    if what in _TABLE_OBJECTS:
        return []
    if what in ("DATABASE", "SCHEMA"):
        named = [i for i in objects[1:] if names[i] not in ("IF", "NOT", "EXISTS")]
        return [Demand(Privilege.ADMIN, "database", _unquote(words[named[0]].group()) if named else "?", names[0])]
    return [Demand(Privilege.ADMIN, "operation", f"{names[0]} {what}".strip(), names[0])]


def _show(names: list[str]) -> list[Demand]:
    shown = [n for n in names[1:] if n not in _SHOW_MODIFIERS]
    what = shown[0] if shown else ""
    target = "SHOW " + " ".join(shown[:2])
    if what in _SHOW_OPEN or (what == "CREATE" and len(shown) > 1 and shown[1] in _SHOW_CREATE_OPEN):
        return []
    if what in _SHOW_PROCESS:
        return [Demand(Privilege.PROCESS, "operation", target, "SHOW")]
    if what in _SHOW_SCHEMAS:
        return [Demand(Privilege.SCHEMAS, "operation", target, "SHOW")]
    return [Demand(Privilege.ADMIN, "operation", target, "SHOW")]


# -- tables and routines of other databases ----------------------------------------------------------


def _foreign(bare: str, code: str, first: str, schema: str) -> list[Demand]:
    """Demands of the tables and routines of other databases than the logic one ``schema``."""
    found: list[Demand | None] = []
    for m in _ROUTINE.finditer(bare):  # db.f(...): a stored routine (runs with its definer's rights), or db.t (cols)
        scope = "table" if first in _TABLES_ONLY or first in ("INSERT", "REPLACE") else "routine"
        found.append(_of_table(_unquote(m.group(1)), _unquote(m.group(2)), schema, first, scope))
    if first == "SHOW" or _QUALIFIED.search(bare) is not None:
        tables = _tables_parsed(code, first)
        if tables is None:  # sqlglot cannot read it (nor can the router): by word, what surely is a table
            tables = [(_unquote(m.group(1)), _unquote(m.group(2))) for m in _QUALIFIED.finditer(bare)]
            if first not in _TABLES_ONLY:
                tables = [(db, name) for db, name in tables if db.lower() in _SYSTEM_SCHEMAS]
        found.extend(_of_table(db, name, schema, first, "table") for db, name in tables)
    return [d for d in found if d is not None]


def _of_table(db: str, name: str, schema: str, first: str, scope: str) -> Demand | None:
    """What reaching ``db.name`` needs (``name`` empty: the database itself, as SHOW TABLES FROM db names it)."""
    if db.lower() == schema:
        return None
    if db.lower() != "information_schema":
        if not name:
            return Demand(Privilege.SCHEMAS, "database", db, first)
        return Demand(Privilege.SCHEMAS, scope, f"{db}.{name}", first)
    view = name.upper()
    if view in _OPEN_INFORMATION_SCHEMA or not view:
        return None
    privilege = Privilege.ADMIN if view in _ADMIN_INFORMATION_SCHEMA else Privilege.PROCESS
    return Demand(privilege, "operation", f"information_schema.{view}", first)


def _tables_parsed(code: str, first: str) -> list[tuple[str, str]] | None:
    """``(database, table)`` of every qualified table sqlglot finds (``table`` empty: SHOW ... FROM db); ``None``:
    it cannot read the statement, or reads it as an opaque command."""
    if first == "REPLACE":  # sqlglot reads REPLACE as an opaque command; its tables are those of an INSERT
        start = code.upper().index("REPLACE")
        code = code[:start] + "INSERT " + code[start + 7 :]
    try:
        trees = parse_statements(code)
    except SqlglotError:
        return None
    found: list[tuple[str, str]] = []
    for tree in trees:
        if tree is None:
            continue
        if isinstance(tree, exp.Command):
            return None
        if isinstance(tree, exp.Show) and tree.text("db"):
            found.append((tree.text("db"), tree.text("target")))
        found.extend((t.db, t.name) for t in tree.find_all(exp.Table) if t.db)
    return found


def _unquote(name: str) -> str:
    return name[1:-1].replace("``", "`") if name[:1] == "`" else name


# -- who may ----------------------------------------------------------------------------------------


class AccessControl:
    """The privileges of one proxy's users, and the check of a statement's :class:`Needs` against them.

    Args:
        schema: The logic database's name.
    """

    def __init__(self, schema: str) -> None:
        self.schema = schema
        self._allowed: dict[str, frozenset[Privilege]] = {}
        #: Statements read by :meth:`needs` (each statement shape once: sessions keep the answer).
        self.read = 0

    def take(self, users: Iterable[ProxyUser]) -> None:
        """The users in force (at start and on every reload)."""
        self._allowed = {u.name: frozenset(Privilege(a) for a in u.allow) for u in users}

    def allows(self, user: str | None, privilege: Privilege) -> bool:
        return privilege in self._allowed.get(user or "", frozenset())

    def needs(self, text: str, *, formatted: bool) -> Needs:
        """:func:`required` for the logic database (callers keep the answer per statement shape)."""
        self.read += 1
        return required(text, self.schema, formatted=formatted)

    def check(self, needs: Needs, user: str | None, client: str, sql: str) -> None:
        """Refuse ``sql`` when ``user`` lacks a privilege it needs (call when ``needs`` is not :data:`PLAIN`).

        Raises:
            UnsupportedSQLError: a statement only the proxy answers, hidden where it would be forwarded.
            ProxyAccessDeniedError: a privilege is missing (the first one, in the statement's order).
        """
        shown = shorten_sql(sql)
        if needs.forbidden is not None:
            raise UnsupportedSQLError(
                f"{needs.forbidden} is the proxy's own statement and is never forwarded to a data source, but "
                f"{shown!r} has it inside an executable comment: write it as a statement of its own", sql=sql,
            )  # fmt: skip
        allowed = self._allowed.get(user or "", frozenset())
        for demand in needs.demands:
            if demand.privilege not in allowed:
                raise _denied(demand, user or "", client, sql, self.schema)


def _denied(demand: Demand, user: str, client: str, sql: str, schema: str) -> ProxyAccessDeniedError:
    """MySQL's words for the refusal, then why, and the setting that opens it."""
    name = demand.privilege.value
    account = f"'{user}'@'{client}'"
    if demand.scope == "table":
        mysql = f"{demand.command} command denied to user {account} for table '{demand.target}'"
    elif demand.scope == "routine":
        mysql = f"execute command denied to user {account} for routine '{demand.target}'"
    elif demand.scope == "database":
        mysql = f"Access denied for user {account} to database '{demand.target}'"
    else:
        mysql = f"Access denied; you need (at least one of) the {name.upper()} privilege(s) for this operation"
    why = _WHY[demand.privilege] + (f" {schema!r}" if demand.privilege is Privilege.SCHEMAS else "")
    message = (f"{mysql}: {demand.target} in {shorten_sql(sql)!r} would run on a data source as its own user, "
               f"and {why}; proxy user {user!r} may not (proxy.users[].allow: [{name}] allows it)")  # fmt: skip
    return ProxyAccessDeniedError(message, user=user, privilege=name, scope=demand.scope, target=demand.target,
                                  sql=sql)  # fmt: skip
