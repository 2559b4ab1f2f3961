"""What a DB-API connection answers about its own session, without routing a statement.

Clients ask a connection about itself before and around their statements:
SQLAlchemy's MySQL dialect reads ``character_set_name()``, ``SELECT VERSION()``,
``SELECT DATABASE()``, ``@@sql_mode``, ``@@lower_case_table_names`` and
``@@transaction_isolation`` on its first connection, sends ``SET NAMES`` and, to
change the level, ``SET SESSION TRANSACTION ISOLATION LEVEL ...`` followed by
``COMMIT``. Routed, each would reach one pooled connection of one data source
and be answered for that connection, or be refused as a session change
(:mod:`ddm_core.execute.session_state`). The facade answers them for the
logical session instead (docs/sqlalchemy.md#what-the-facade-answers):

====================================  ===============================================================
statement                             answer
====================================  ===============================================================
``SELECT DATABASE()`` / ``SCHEMA()``  the logic database (``name`` of the configuration, else ``logic_db``)
``SELECT VERSION()``, ``@@version``   the data sources' server version when they are all MySQL or
                                      MariaDB (read once per executor), else MySQL 8.0's protocol
``@@sql_mode``                        the server's, without ``ANSI_QUOTES`` and ``NO_BACKSLASH_ESCAPES``:
                                      the router reads MySQL's default quoting
``@@lower_case_table_names``          the server's (0 on other backends)
``@@transaction_isolation``           the connection's level, else the server's default
``@@autocommit``, ``@@character_set_  the connection's: autocommit as set, utf8mb4 (every pooled
client`` ...                          connection's character set)
``SET NAMES utf8mb4 [COLLATE ..]``    accepted, nothing to do; any other character set is routed and
                                      refused as today
``SET [SESSION] TRANSACTION           the level every connection of the connection's next (``SESSION``:
ISOLATION LEVEL ...``                 every later) transaction opens at
``BEGIN`` / ``COMMIT`` / ``ROLLBACK`` the connection's own ``begin()`` / ``commit()`` / ``rollback()``
                                      (``BEGIN`` commits an open transaction first, as on MySQL)
``SAVEPOINT`` / ``ROLLBACK TO`` /      on every connection of the connection's transaction
``RELEASE SAVEPOINT``                 (:mod:`ddm_core.execute.savepoints`)
``USE <logic database>``              accepted, nothing to do
``SHOW VARIABLES [LIKE ...]``,        the variables above
``SHOW DATABASES``, ``SHOW WARNINGS``
====================================  ===============================================================

A probe naming anything else (``@@max_allowed_packet``, ``LAST_INSERT_ID()``) is
routed, as before. This module only decides (no I/O): :class:`SessionFacts` is
read by the caller, the thread or the asyncio facade, with :data:`FACTS_SQL`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from typing import Any, Iterable, NamedTuple

from ddm_core.execute.isolation import isolation_level
from ddm_core.execute.result import Result
from ddm_core.execute.savepoints import RELEASE, ROLLBACK_TO, SAVEPOINT
from ddm_core.metadata.model import ShardingConfig
from ddm_core.route.text.edits import LOGIC_DB
from ddm_core.session_statements import Classified, Kind, classify, probe_items

__all__ = [
    "FACTS_SQL", "SessionFacts", "facts_of", "emulated_facts", "needs_server_facts", "logic_database",
    "Rows", "Control", "Savepoint", "Isolation", "Nothing", "Local", "session_statement", "local_answer", "CHARSET", "SessionLevel", "result_of", "SAVEPOINT_KINDS",
    "emulated_version", "EMULATED_SQL_MODE",
]

#: Every pooled connection's character set (docs/operations.md#session-state).
CHARSET = "utf8mb4"

#: The server facts the facade reports, read once per executor from the default data source.
FACTS_SQL = (
    "SHOW VARIABLES WHERE Variable_name IN ('version', 'sql_mode', 'lower_case_table_names', "
    "'tx_isolation', 'transaction_isolation', 'collation_connection')"
)
_MYSQL = frozenset({"mysql", "mariadb"})
_UNREAD_MODES = frozenset({"ANSI_QUOTES", "NO_BACKSLASH_ESCAPES"})
#: The sql_mode reported where no MySQL server is asked (over other backends, and by ``ddm proxy``).
EMULATED_SQL_MODE = "STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION"
_DEFAULT_ISOLATION = {"sqlite": "SERIALIZABLE", "postgresql": "READ COMMITTED"}


@dataclass(frozen=True, slots=True)
class SessionFacts:
    """What the data sources' server reports about a session, as the facade passes it on."""

    version: str
    sql_mode: str
    lower_case_table_names: int
    isolation: str  # one of ISOLATION_LEVELS
    collation: str


@cache
def emulated_version() -> str:
    """The version reported where no MySQL server is asked: MySQL 8.0's protocol and variable names
    (SQLAlchemy then reads ``transaction_isolation``), and who answers (read on first use, not at import)."""
    return f"8.0.35-ddm-core-{metadata.version('ddm-core')}"


def logic_database(config: ShardingConfig) -> str:
    """The database name a client sees (``SELECT DATABASE()``, ``SHOW TABLES``' column)."""
    return config.name or LOGIC_DB


def needs_server_facts(config: ShardingConfig) -> bool:
    """The data sources are all MySQL or MariaDB: the facts come from the server (:data:`FACTS_SQL`)."""
    return all(ds.primary.dialect in _MYSQL for ds in config.data_sources.values())


def emulated_facts(config: ShardingConfig) -> SessionFacts:
    """The facts reported over SQLite and PostgreSQL data sources."""
    default = config.data_sources[config.default_data_source or next(iter(config.data_sources))]
    level = _DEFAULT_ISOLATION.get(default.primary.dialect, "REPEATABLE READ")
    return SessionFacts(emulated_version(), EMULATED_SQL_MODE, 0, level, f"{CHARSET}_general_ci")


def facts_of(rows: Iterable[tuple[Any, ...]]) -> SessionFacts:
    """:class:`SessionFacts` from the ``(Variable_name, Value)`` rows :data:`FACTS_SQL` returned."""
    values = {str(name).lower(): "" if value is None else str(value) for name, value, *_ in rows}
    modes = [m for m in values.get("sql_mode", "").split(",") if m and m.upper() not in _UNREAD_MODES]
    level = values.get("transaction_isolation") or values.get("tx_isolation") or "REPEATABLE-READ"
    casing = values.get("lower_case_table_names", "0")
    return SessionFacts(
        version=values.get("version") or emulated_version(),
        sql_mode=",".join(modes),
        lower_case_table_names=int(casing) if casing.isdigit() else 0,
        isolation=isolation_level(level),
        collation=values.get("collation_connection") or f"{CHARSET}_general_ci",
    )


# -- what a statement asks of the session ---------------------------------------------------------


class Rows(NamedTuple):
    """Answer with these rows."""

    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]


class Control(NamedTuple):
    """Run the connection's own ``begin`` / ``commit`` / ``rollback``."""

    command: str  # "BEGIN" | "COMMIT" | "ROLLBACK"
    characteristics: str = ""  # BEGIN: START TRANSACTION's (READ ONLY, WITH CONSISTENT SNAPSHOT...)


class Savepoint(NamedTuple):
    """A savepoint command on the connection's transaction (:mod:`ddm_core.execute.savepoints`)."""

    command: str  # SAVEPOINT | ROLLBACK TO SAVEPOINT | RELEASE SAVEPOINT
    name: str


class Isolation(NamedTuple):
    """Set the isolation level of the next transaction (``session``: of every later one)."""

    level: str
    session: bool


class Nothing(NamedTuple):
    """Accepted, nothing to do (``SET NAMES utf8mb4``, ``USE`` the logic database)."""


Local = Rows | Control | Savepoint | Isolation | Nothing

_SET_NAMES = re.compile(
    r"SET\s+(?:NAMES|CHARACTER\s+SET|CHARSET)\s+(['\"`]?)(\w+)\1(?:\s+COLLATE\s+(['\"`]?)\w+\3)?\Z", re.I
)
_SET_ISOLATION = re.compile(
    r"SET\s+(?:(SESSION|LOCAL)\s+)?TRANSACTION\s+ISOLATION\s+LEVEL\s+"
    r"(READ\s+UNCOMMITTED|READ\s+COMMITTED|REPEATABLE\s+READ|SERIALIZABLE)\Z", re.I
)
_SET_ISOLATION_VARIABLE = re.compile(
    r"SET\s+(?:SESSION\s+|LOCAL\s+|@@(?:SESSION\.|LOCAL\.)?)?(?:transaction_isolation|tx_isolation)\s*=\s*"
    r"(['\"])([A-Za-z _-]+)\1\Z", re.I
)
_CONTROL = {Kind.BEGIN: "BEGIN", Kind.COMMIT: "COMMIT", Kind.ROLLBACK: "ROLLBACK"}
#: The savepoint statements' kinds and the commands they run (the proxy's too).
SAVEPOINT_KINDS = {Kind.SAVEPOINT: SAVEPOINT, Kind.ROLLBACK_TO: ROLLBACK_TO, Kind.RELEASE: RELEASE}
def session_statement(sql: str) -> Classified | None:
    """What ``sql`` is when the session may answer it itself, else ``None`` (the router's: the usual case)."""
    classified = classify(sql)
    kind = classified.kind
    return None if kind is Kind.ROUTED or kind is Kind.EMPTY else classified


def local_answer(
    sql: str, classified: Classified, config: ShardingConfig, facts: SessionFacts, isolation: str | None,
    autocommit: bool,
) -> Local | None:  # fmt: skip
    """What the connection answers to ``sql`` itself, or ``None``: the router's after all.

    Args:
        sql: The statement as the client wrote it.
        classified: :func:`session_statement` of it.
        config: The configuration (the logic database's name).
        facts: The server's facts (:func:`facts_of`, :func:`emulated_facts`).
        isolation: The connection's isolation level, ``None`` for the server's default.
        autocommit: The connection's autocommit switch.
    """
    kind = classified.kind
    if kind in _CONTROL:
        return Control(_CONTROL[kind], classified.rest if kind is Kind.BEGIN else "")
    if kind in SAVEPOINT_KINDS:
        return Savepoint(SAVEPOINT_KINDS[kind], classified.rest)
    if kind is Kind.SET:
        return _set(classified.rest)
    variables = _variables(facts, isolation, autocommit)
    if kind is Kind.PROBE:
        return _probe(sql, variables, config, facts)
    if kind is Kind.SHOW_VARIABLES:
        pattern = _like(classified.rest) if classified.rest else None
        rows = [(k, str(v)) for k, v in sorted(variables.items()) if pattern is None or pattern.fullmatch(k)]
        return Rows(("Variable_name", "Value"), rows)
    if kind is Kind.SHOW_DATABASES:
        return Rows(("Database",), [(logic_database(config),)])
    if kind is Kind.SHOW_NOTHING:
        return Rows(("Level", "Code", "Message"), [])
    if kind is Kind.USE and classified.rest.lower() == logic_database(config).lower():
        return Nothing()
    return None  # USE of another database, PREVIEW, KILL: the router's answer (a refusal)


def _set(text: str) -> Local | None:
    names = _SET_NAMES.match(text)
    if names is not None:
        return Nothing() if names.group(2).lower() == CHARSET else None  # another charset: refused, routed
    level = _SET_ISOLATION.match(text)
    if level is not None:
        return Isolation(isolation_level(level.group(2)), session=level.group(1) is not None)
    variable = _SET_ISOLATION_VARIABLE.match(text)
    if variable is not None:
        return Isolation(isolation_level(variable.group(2)), session=True)
    return None


def _variables(facts: SessionFacts, isolation: str | None, autocommit: bool) -> dict[str, Any]:
    level = (isolation or facts.isolation).replace(" ", "-")
    return {
        "autocommit": int(autocommit),
        "character_set_client": CHARSET,
        "character_set_connection": CHARSET,
        "character_set_results": CHARSET,
        "collation_connection": facts.collation,
        "lower_case_table_names": facts.lower_case_table_names,
        "sql_mode": facts.sql_mode,
        "transaction_isolation": level,
        "tx_isolation": level,
        "version": facts.version,
    }


def _probe(sql: str, variables: dict[str, Any], config: ShardingConfig, facts: SessionFacts) -> Rows | None:
    items = probe_items(sql) or []
    values: list[Any] = []
    for item in items:
        if item.what.startswith("@@"):
            if item.what[2:] not in variables:
                return None  # a variable the facade does not own: the server answers
            values.append(variables[item.what[2:]])
        elif item.what in ("DATABASE", "SCHEMA"):
            values.append(logic_database(config))
        elif item.what == "VERSION":
            values.append(facts.version)
        else:
            return None  # LAST_INSERT_ID(), CONNECTION_ID(), USER(): the server answers
    return Rows(tuple(item.column for item in items), [tuple(values)])


def _like(pattern: str) -> re.Pattern[str]:
    """A ``LIKE`` pattern (``%``, ``_``, ``\\`` escapes) as a case-insensitive regex."""
    out, chars = [], iter(pattern.replace("''", "'"))
    for ch in chars:
        if ch == "\\":
            out.append(re.escape(next(chars, "\\")))
        else:
            out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
    return re.compile("".join(out), re.I | re.S)


class SessionLevel:
    """A connection's isolation level: the session's, and a one-shot one for its next transaction.

    ``SET TRANSACTION ISOLATION LEVEL`` (no scope) applies to the next transaction only, as on MySQL;
    with ``SESSION`` to every later one.
    """

    __slots__ = ("session", "next")

    def __init__(self) -> None:
        self.session: str | None = None
        self.next: str | None = None

    def set(self, answer: Isolation) -> None:
        if answer.session:
            self.session, self.next = answer.level, None
        else:
            self.next = answer.level

    @property
    def current(self) -> str | None:
        """The level the next transaction opens at (``None``: the server's default)."""
        return self.next or self.session

    def take(self) -> str | None:
        """:attr:`current`, for a transaction that starts now (the one-shot level is used up)."""
        level, self.next = self.next or self.session, None
        return level


#: PEP 249 type codes of answered columns (PyMySQL's FIELD_TYPE): LONGLONG, VAR_STRING.
_INT, _STRING = 8, 253


def result_of(local: Local) -> Result:
    """The result a statement the session answered itself returns: its rows, or none."""
    if isinstance(local, Rows):
        return Result.buffered(description_of(local), local.rows, statement="show")
    return Result.counted(0, None, (), "set")


def description_of(rows: Rows) -> tuple[tuple[Any, ...], ...]:
    """DB-API 7-tuples for an answer's columns (an int column where the first row holds an int)."""
    first = rows.rows[0] if rows.rows else (None,) * len(rows.columns)
    return tuple(
        (name, _INT if isinstance(value, int) else _STRING, None, None, None, None, True)
        for name, value in zip(rows.columns, first)
    )
