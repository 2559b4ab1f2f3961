"""Session variables of a proxy session: what clients read back, and ``SET`` applied to them.

The values live in the client session (mysql-mimic's ``Variables``), not on
the pooled backend connections, which many sessions share: ``SET sql_mode``
or ``SET time_zone`` is remembered and answered back, but statements run with
the data sources' own settings. Only ``autocommit``, ``transaction_type``
(``LOCAL`` or ``XA``: what the session's transactions are, ShardingSphere-Proxy's
name; docs/proxy.md#xa-transactions) and the transaction statements change how
statements run (docs/proxy.md#session-statements).
"""

from __future__ import annotations

import re
from typing import Any, Callable

import sqlglot
from mysql_mimic.charset import CharacterSet
from mysql_mimic.errors import MysqlError
from mysql_mimic.intercept import TRANSACTION_CHARACTERISTICS, expression_to_value, setitem_kind
from mysql_mimic.variables import DEFAULT, SYSTEM_VARIABLES, GlobalVariables, SessionVariables, VariableSchema
from sqlglot import exp

from ddm_core.dialects import INPUT
from ddm_core.proxy.mysql_errors import NOT_SUPPORTED, UNKNOWN_SYSTEM_VARIABLE, WRONG_VALUE
from ddm_core.session_facts import EMULATED_SQL_MODE, emulated_version

__all__ = ["proxy_variables", "apply_set", "CountedVariables", "SERVER_VERSION", "TRANSACTION_TYPE", "TRANSACTION_TYPES"]

#: What clients see as the server version (the facade reports the same over non-MySQL backends).
SERVER_VERSION = emulated_version()

# mimic's defaults, except where they would mislead a client: sql_mode ANSI
# (SQLAlchemy would quote identifiers with '"', which the data sources read as
# strings) and the engine names.
_OVERRIDES: dict[str, VariableSchema] = {
    "version": (str, SERVER_VERSION, False),
    "version_comment": (str, "ddm-core proxy", False),
    "sql_mode": (str, EMULATED_SQL_MODE, True),
    "transaction_isolation": (str, "REPEATABLE-READ", True),
    "tx_isolation": (str, "REPEATABLE-READ", True),
    "tx_read_only": (bool, False, True),
    "default_storage_engine": (str, "InnoDB", True),
    "default_tmp_storage_engine": (str, "InnoDB", True),
    "foreign_key_checks": (bool, True, True),
    "unique_checks": (bool, True, True),
    "sql_notes": (bool, True, True),
    "sql_safe_updates": (bool, False, True),
    "net_read_timeout": (int, 30, True),
    "group_concat_max_len": (int, 1024, True),
    "lc_messages": (str, "en_US", True),
    "character_set_system": (str, "utf8mb3", False),
    "hostname": (str, "ddm-proxy", False),
    "port": (int, 3307, False),
    "transaction_type": (str, "LOCAL", True),
}

#: The session variable naming the session's transaction mode, and its values → the executor's modes.
TRANSACTION_TYPE = "transaction_type"
TRANSACTION_TYPES = {"LOCAL": "local", "XA": "xa"}
#: ShardingSphere's DistSQL spelling, ``SET [DIST] VARIABLE name = value``: read as ``SET name = value``.
_DIST_SQL = re.compile(r"\s*SET\s+(?:DIST\s+)?VARIABLE\s+", re.I)


class CountedVariables(SessionVariables):  # type: ignore[misc]  # mimic ships no types
    """A session's variables that count their changes: what the connection reads of them on every statement
    (its character sets) it keeps until ``changes`` moves. mimic's ``set`` is the one writer of the values."""

    def __init__(self, global_variables: GlobalVariables) -> None:
        super().__init__(global_variables)
        self.changes = 0

    def set(self, name: str, value: Any, force: bool = False) -> None:
        try:
            super().set(name, value, force)
        finally:
            self.changes += 1


def proxy_variables(port: int) -> GlobalVariables:
    """The global variables every session of one proxy starts from."""
    schema = {**SYSTEM_VARIABLES, **_OVERRIDES, "port": (int, port, False)}
    return GlobalVariables(schema)


def apply_set(
    sql: str, variables: Any, set_autocommit: Callable[[bool], None],
    set_transaction_mode: Callable[[str], None] | None = None,
) -> None:  # fmt: skip
    """Apply one ``SET`` statement to the session's ``variables``.

    ``autocommit`` also goes to ``set_autocommit`` (the ddm session's switch), ``transaction_type``
    to ``set_transaction_mode`` (``"local"`` / ``"xa"``; it raises while a transaction is open).
    A SET statement is parsed here, once; it is never routed.

    Raises:
        MysqlError: 1193 for an unknown variable, 1235 for a GLOBAL or user
            variable or a computed value, 1231 for a value the variable refuses.
    """
    dist = _DIST_SQL.match(sql)
    if dist is not None:
        sql = "SET " + sql[dist.end() :]
    try:
        tree = sqlglot.parse_one(sql, read=INPUT)
    except sqlglot.errors.ParseError as exc:
        raise MysqlError(f"ddm: cannot read the SET statement: {exc}", code=1064) from exc
    if not isinstance(tree, exp.Set):
        raise MysqlError("ddm: cannot read the SET statement", code=1064)
    for item in tree.expressions:
        kind = setitem_kind(item)
        if kind == "VARIABLE":
            _set_variable(item, variables, set_autocommit, set_transaction_mode)
        elif kind in ("NAMES", "CHARACTER SET"):
            _set_charset(item, variables, names=kind == "NAMES")
        elif kind == "TRANSACTION":
            for characteristic in (e.name.upper() for e in item.expressions):
                name, value = TRANSACTION_CHARACTERISTICS[characteristic]
                if name == "transaction_read_only" and value:
                    _refuse_read_only(sql)
                variables.set(name, value)
        else:
            raise MysqlError(f"ddm: SET {kind} is not supported by the proxy", code=NOT_SUPPORTED)


def _set_variable(
    item: exp.SetItem, variables: Any, set_autocommit: Callable[[bool], None],
    set_transaction_mode: Callable[[str], None] | None,
) -> None:  # fmt: skip
    assignment = item.this
    left = assignment.left
    if isinstance(left, exp.Parameter):
        raise MysqlError("ddm: user variables (@name) are not supported by the proxy", code=NOT_SUPPORTED)
    scope = (left.text("kind") if isinstance(left, exp.SessionParameter) else item.text("kind")) or "SESSION"
    name = left.name.lower()
    if scope.upper() not in ("SESSION", "LOCAL"):
        raise MysqlError(f"ddm: SET {scope.upper()} {name} is not forwarded to the data sources", code=NOT_SUPPORTED)
    if name not in variables.schema:
        raise MysqlError(f"Unknown system variable '{name}'", code=UNKNOWN_SYSTEM_VARIABLE)
    right = assignment.right
    # ``= XA`` (DistSQL writes the value bare) and ``= latin1`` are names to sqlglot: their text is the value
    bare = isinstance(right, (exp.Column, exp.Var)) and (name == TRANSACTION_TYPE or name in _CHARSET_VARIABLES)
    value = right.name if bare else expression_to_value(right)
    if name in _CHARSET_VARIABLES and value is not None and value is not DEFAULT:
        value = _known_charset(str(value))
    if name == TRANSACTION_TYPE:
        mode = TRANSACTION_TYPES.get(str(value).upper()) if isinstance(value, str) else None
        if mode is None:
            raise MysqlError(f"Variable '{name}' can't be set to the value of '{value}' (LOCAL or XA)",
                             code=WRONG_VALUE)  # fmt: skip
        if set_transaction_mode is not None:
            set_transaction_mode(mode)
        variables.set(name, str(value).upper())
        return
    if name in ("transaction_read_only", "tx_read_only") and _as_bool(value, name) and value is not DEFAULT:
        _refuse_read_only(f"SET {name} = {value}")
    if name == "autocommit":
        on = _as_bool(value, name)
        set_autocommit(on)
        variables.set(name, on)
        return
    try:
        variables.set(name, value)
    except (TypeError, ValueError) as exc:
        raise MysqlError(f"Variable '{name}' can't be set to the value of '{value}'", code=WRONG_VALUE) from exc


def _refuse_read_only(sql: str) -> None:
    """A session or next-transaction READ ONLY would bind the session's autocommit statements too, which run on
    shared pooled connections: refused rather than ignored (docs/proxy.md#session-statements)."""
    raise MysqlError(
        f"ddm: {' '.join(sql.split())} is not supported by the proxy (it would make autocommit statements read-only "
        "too); start the transaction with START TRANSACTION READ ONLY instead", code=NOT_SUPPORTED,
    )  # fmt: skip


def _as_bool(value: Any, name: str) -> bool:
    if value is DEFAULT:
        return True
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.upper() in ("ON", "OFF", "TRUE", "FALSE"):
        return value.upper() in ("ON", "TRUE")
    raise MysqlError(f"Variable '{name}' can't be set to the value of '{value}'", code=WRONG_VALUE)


#: The session's character sets a SET names directly (``NULL`` or ``DEFAULT``: the session's default, UTF-8).
_CHARSET_VARIABLES = frozenset({"character_set_client", "character_set_results", "character_set_connection"})


def _known_charset(name: str) -> str:
    """``name`` as the character set's name, or MariaDB's error 1115 for a set it does not know."""
    charset = name.lower()
    if charset not in CharacterSet.__members__:
        raise MysqlError(f"Unknown character set: '{charset}'", code=1115)
    return charset


def _set_charset(item: exp.SetItem, variables: Any, *, names: bool) -> None:
    if item.name.upper() == "DEFAULT":
        charset: Any = DEFAULT
        collation: Any = DEFAULT
    else:
        charset = _known_charset(item.name)
        collation = item.text("collate") or CharacterSet[charset].default_collation.name
    variables.set("character_set_client", charset)
    variables.set("character_set_results", charset)
    if names:
        variables.set("character_set_connection", charset)
        variables.set("collation_connection", collation)
    else:
        variables.set("character_set_connection", variables.get("character_set_database"))
