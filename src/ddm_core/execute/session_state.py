"""Statements that change a connection's session, and what the executor does with each kind.

A pooled connection serves many callers one after another, so anything a
statement leaves behind in its *session* — not in the data — reaches the next
caller: a routed ``SET autocommit = 0`` left a connection in manual-commit mode
(later inserts were reported OK and silently rolled back), a routed ``USE``
sent later writes for one data source into another's database, a ``GET_LOCK``
stayed held by an idle connection. Each kind gets one of two answers
(docs/operations.md#session-state):

=====================  ==========================================  ===================================
kind                   statements                                   answer
=====================  ==========================================  ===================================
autocommit             ``SET autocommit``, ``SET @@autocommit``     refused: ``autocommit=`` / ``begin()``
character set          ``SET NAMES``, ``SET CHARACTER SET``,       refused: the driver encodes with
                       ``SET character_set_client`` ...             the connection's utf8mb4
database               ``USE db``                                   refused: the url fixes it
table lock             ``LOCK TABLES``, ``UNLOCK TABLES``           refused: implicit COMMIT
transaction control    ``BEGIN``, ``START TRANSACTION``,            refused: ``commit()`` /
                       ``COMMIT``, ``ROLLBACK``, ``SAVEPOINT``, XA   ``rollback()``
session variable       ``SET [SESSION] x = ...``, ``SET ROLE``,     pinned session only
                       ``SET TRANSACTION ...``
user variable          ``SET @x = ...``, ``@x :=``, ``INTO @x``     pinned session only
named lock             ``GET_LOCK()``, ``RELEASE_LOCK()``,          pinned session only
                       ``RELEASE_ALL_LOCKS()``
temporary table        ``CREATE / DROP TEMPORARY TABLE``            pinned session only
prepared statement     ``PREPARE``, ``EXECUTE``, ``DEALLOCATE``     pinned session only
=====================  ==========================================  ===================================

*Pinned session only*: inside a transaction (``with executor.transaction():``,
a DB-API connection with autocommit off, or after ``conn.begin()``) the
statement runs on the transaction's pinned connection of the data source it
was routed to, and that connection is reset (:meth:`Driver.reset_session
<ddm_core.execute.drivers.Driver.reset_session>`: ``COM_RESET_CONNECTION`` on
MySQL / MariaDB) before it goes back to the pool — or discarded when the reset
fails. Outside one there is no connection to keep the state on, so the
statement is refused before anything is sent. ``SET GLOBAL`` / ``PERSIST``,
``SET PASSWORD``, ``SET STATEMENT ... FOR`` (one statement) and reading a
variable change no session and run anywhere.

Classification reads the statement text once per distinct text (cached):
strings and comments are blanked first (the content of MySQL
executable comments ``/*! ... */`` is kept, it runs).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from ddm_core._text import shorten_sql
from ddm_core.errors import SessionStateError
from ddm_core.route.plan import RoutePlan

if TYPE_CHECKING:
    from ddm_core.execute.pools import Borrowed

__all__ = ["SessionEffect", "effect_of", "refuse_unpinned", "check_pinned", "reset_or_discard"]

log = logging.getLogger("ddm_core.execute")


@dataclass(frozen=True, slots=True)
class SessionEffect:
    """What a statement changes in its session.

    Attributes:
        kind: ``"user variable"``, ``"database"``... (the module table).
        pinnable: Allowed on a pinned session (then reset); ``False``: always refused.
    """

    kind: str
    pinnable: bool


AUTOCOMMIT = SessionEffect("autocommit", False)
CHARACTER_SET = SessionEffect("character set", False)
DATABASE = SessionEffect("database", False)
TABLE_LOCK = SessionEffect("table lock", False)
TRANSACTION_CONTROL = SessionEffect("transaction control", False)
SESSION_VARIABLE = SessionEffect("session variable", True)
USER_VARIABLE = SessionEffect("user variable", True)
NAMED_LOCK = SessionEffect("named lock", True)
TEMPORARY_TABLE = SessionEffect("temporary table", True)
PREPARED_STATEMENT = SessionEffect("prepared statement", True)

# Why each always-refused kind is refused, and what to do instead.
_REFUSED = {
    "autocommit": (
        "ddm-core runs autocommit and transactions itself, over one pooled connection per data source; "
        "a routed SET autocommit would leave the connection of {where} in manual-commit mode, and statements "
        "reported OK on it later would be rolled back when it is reused",
        "use connect(..., autocommit=True/False) or conn.autocommit(...), or executor.transaction()",
    ),
    "character set": (
        "every connection is opened with charset utf8mb4, which the driver also encodes parameters "
        "and decodes results with; a routed character set change would make the server of {where} read "
        "and send text in an encoding the driver does not use",
        "keep the connection utf8mb4 (convert single values with CONVERT(... USING ...) in the statement)",
    ),
    "database": (
        "each data source's database is fixed by its url (dataSources.{first}.url); a routed USE would move "
        "the connection of {where} to another database, and later statements meant for it would read and "
        "write there",
        "configure the other database as a data source of its own",
    ),
    "table lock": (
        "LOCK TABLES and UNLOCK TABLES commit the open transaction implicitly and keep table locks on "
        "one pooled connection of {where}",
        "lock rows with SELECT ... FOR UPDATE inside a transaction (executor.transaction(), or a DB-API "
        "connection with autocommit off)",
    ),
    "transaction control": (
        "a transaction holds one pinned connection per data source it uses; a routed transaction "
        "statement would start or end it on {where} only",
        "use conn.begin() / conn.commit() / conn.rollback(), or `with executor.transaction():`",
    ),
}

# -- reading the statement -----------------------------------------------------------------


def _skip_quoted(sql: str, i: int) -> int:
    """Index just past the quoted string / identifier starting at ``sql[i]``."""
    quote = sql[i]
    n = len(sql)
    i += 1
    while i < n:
        c = sql[i]
        if c == "\\" and quote != "`":
            i += 2
            continue
        if c == quote:
            if i + 1 < n and sql[i + 1] == quote:  # doubled quote inside the string
                i += 2
                continue
            return i + 1
        i += 1
    return n


_EXECUTABLE = re.compile(r"/\*M?!\d*")
_SPECIAL = re.compile(r"[`'\"/#-]")  # what may start a quoted name, a string or a comment


def code_of(sql: str) -> str:
    """``sql`` upper-cased, comments dropped, every string blanked to ``''`` (a backquoted name kept as one word).

    The content of an executable comment (``/*!40101 SET NAMES utf8 */``) is
    kept: MySQL runs it.
    """
    out: list[str] = []
    i = 0
    n = len(sql)
    while i < n:
        # Ordinary text is copied a run at a time (a 1000-row INSERT is one run), not a character at a time.
        special = _SPECIAL.search(sql, i)
        if special is None:
            out.append(sql[i:])
            break
        if special.start() > i:
            out.append(sql[i : special.start()])
            i = special.start()
        c = sql[i]
        if c == "`":  # a quoted name still names something (SET `autocommit`): keep it, one word
            end = _skip_quoted(sql, i)
            out.append(re.sub(r"\W", "_", sql[i + 1 : end - 1].replace("``", "_")) or "``")
            i = end
        elif c in "'\"":
            out.append(c * 2)
            i = _skip_quoted(sql, i)
        elif c == "/" and sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            end = n if end < 0 else end
            m = _EXECUTABLE.match(sql, i)
            out.append(" " + code_of(sql[m.end() : end]) + " " if m is not None else " ")
            i = end + 2
        elif c == "#" or (c == "-" and sql.startswith("--", i) and (i + 2 >= n or sql[i + 2] in " \t\r\n")):
            end = sql.find("\n", i)
            i = n if end < 0 else end
            out.append(" ")
        else:
            out.append(c)
            i += 1
    return "".join(out).upper()


_FIRST_WORDS = re.compile(r"[\s;(]*([A-Z_]+)(?:\s+([A-Z_]+))?")
_TEMPORARY = re.compile(r"\s*(?:CREATE|DROP)\s+(?:OR\s+REPLACE\s+)?(?:GLOBAL\s+|LOCAL\s+)?TEMP(?:ORARY)?\s+(?:TABLE|VIEW)\b")
_LOCK_FUNCTION = re.compile(r"\b(?:GET_LOCK|RELEASE_LOCK|RELEASE_ALL_LOCKS)\s*\(")
_ASSIGNED = re.compile(r"(?<![@\w$])@(?:[A-Z0-9_$.]+|''|``|\"\")\s*:=")
_INTO_VARIABLE = re.compile(r"\bINTO\s+@(?!@)")
_FOR = re.compile(r"\bFOR\b")
_SCOPE = re.compile(r"\s*(GLOBAL|SESSION|LOCAL|PERSIST_ONLY|PERSIST)\b")
_SYSTEM_VARIABLE = re.compile(r"\s*@@(?:(GLOBAL|SESSION|LOCAL|PERSIST_ONLY|PERSIST)\.)?([A-Z0-9_$]+|``)")
_NAME = re.compile(r"\s*([A-Z0-9_$]+|``)")

_TRANSACTION_WORDS = {"BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE", "XA"}
_PREPARED_WORDS = {"PREPARE", "EXECUTE", "DEALLOCATE"}
_CHARSET_VARIABLES = {
    "CHARACTER_SET_CLIENT",
    "CHARACTER_SET_CONNECTION",
    "CHARACTER_SET_RESULTS",
    "COLLATION_CONNECTION",
}
_SERVER_WIDE = {"GLOBAL", "PERSIST", "PERSIST_ONLY"}

# Most severe first: the strongest effect of a statement decides.
_ORDER = (AUTOCOMMIT, CHARACTER_SET, DATABASE, TABLE_LOCK, TRANSACTION_CONTROL,
          SESSION_VARIABLE, USER_VARIABLE, NAMED_LOCK, TEMPORARY_TABLE, PREPARED_STATEMENT)


def _strongest(effects: list[SessionEffect]) -> SessionEffect | None:
    return min(effects, key=_ORDER.index) if effects else None


def _split_assignments(text: str) -> list[str]:
    """``SET`` assignments split at top-level commas (strings are already blanked)."""
    parts: list[str] = []
    depth = 0
    start = 0
    for i, c in enumerate(text):
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _assignment_effect(item: str, scope: str) -> tuple[SessionEffect | None, str]:
    """One ``SET`` assignment's effect, and the scope following assignments inherit."""
    m = _SCOPE.match(item)
    if m is not None:
        scope = "SESSION" if m.group(1) == "LOCAL" else m.group(1)
        item = item[m.end() :]
    head = item.lstrip()
    if head.startswith("@@"):
        sm = _SYSTEM_VARIABLE.match(head)
        own = sm.group(1) if sm is not None and sm.group(1) else "SESSION"
        name = sm.group(2) if sm is not None else ""
        return _system_variable(name, "SESSION" if own == "LOCAL" else own), scope
    if head.startswith("@"):
        return USER_VARIABLE, scope
    words = head.split(None, 2)
    first = words[0] if words else ""
    if first in ("NAMES", "CHARSET") or (first == "CHARACTER" and len(words) > 1 and words[1] == "SET"):
        return CHARACTER_SET, scope
    if first == "TRANSACTION":
        return (None if scope in _SERVER_WIDE else SESSION_VARIABLE), scope
    nm = _NAME.match(head)
    return _system_variable(nm.group(1) if nm is not None else "", scope), scope


def _system_variable(name: str, scope: str) -> SessionEffect | None:
    if scope in _SERVER_WIDE:
        return None  # server-wide: no session is left different from the others
    if name == "AUTOCOMMIT":
        return AUTOCOMMIT
    if name in _CHARSET_VARIABLES:
        return CHARACTER_SET
    return SESSION_VARIABLE


def _set_effect(rest: str) -> SessionEffect | None:
    words = rest.split(None, 2)
    first = words[0] if words else ""
    if first == "STATEMENT":  # SET STATEMENT var=... FOR stmt: the variables last one statement
        m = _FOR.search(rest)
        return _classify(rest[m.end() :]) if m is not None else None
    if first == "PASSWORD" or (first == "DEFAULT" and len(words) > 1 and words[1].startswith("ROLE")):
        return None  # account settings, not the session
    if first == "ROLE":
        return SESSION_VARIABLE
    effects: list[SessionEffect] = []
    scope = "SESSION"
    for item in _split_assignments(rest):
        effect, scope = _assignment_effect(item, scope)
        if effect is not None:
            effects.append(effect)
    return _strongest(effects)


def _classify(code: str) -> SessionEffect | None:
    effects: list[SessionEffect] = []
    m = _FIRST_WORDS.match(code)
    first = m.group(1) if m is not None else ""
    second = (m.group(2) or "") if m is not None else ""
    if first == "SET":
        effect = _set_effect(code[m.end(1) :] if m is not None else "")
        if effect is not None:
            effects.append(effect)
    elif first == "USE":
        effects.append(DATABASE)
    elif first in ("LOCK", "UNLOCK"):
        effects.append(TABLE_LOCK)
    elif first in _TRANSACTION_WORDS or (first == "START" and second == "TRANSACTION"):
        effects.append(TRANSACTION_CONTROL)
    elif first in _PREPARED_WORDS or (first == "DROP" and second == "PREPARE"):
        effects.append(PREPARED_STATEMENT)
    elif _TEMPORARY.match(code):
        effects.append(TEMPORARY_TABLE)
    if _LOCK_FUNCTION.search(code):
        effects.append(NAMED_LOCK)
    if _ASSIGNED.search(code) or _INTO_VARIABLE.search(code):
        effects.append(USER_VARIABLE)
    return _strongest(effects)


@lru_cache(maxsize=4096)
def effect_of(sql: str) -> SessionEffect | None:
    """What ``sql`` changes in its session, or ``None`` for an ordinary statement (cached per text)."""
    return _classify(code_of(sql))


# -- what the executor does --------------------------------------------------------------------


def _error(effect: SessionEffect, plan: RoutePlan, *, pinned: bool) -> SessionStateError:
    sql = plan.units[0].sql
    sources = plan.data_sources
    where = "data source " + ", ".join(repr(s) for s in sources)
    shown = shorten_sql(sql)
    if not effect.pinnable:
        why, instead = _REFUSED[effect.kind]
        reason = why.format(where=where, first=sources[0] if sources else "<name>")
        message = f"{shown!r} is refused ({effect.kind}): {reason}; {instead}; nothing was sent"
    else:
        message = (
            f"{shown!r} changes the session of the connection it runs on ({effect.kind}); outside a "
            f"transaction that is a pooled connection of {where}, which the next caller would get as it "
            "was left, so nothing was sent. Run it inside a transaction (`with executor.transaction():`, "
            "or a DB-API connection with autocommit off, or after conn.begin()): there the connection is "
            "pinned to you until commit / rollback and reset before it goes back to the pool; the "
            f"{effect.kind} then lasts until the transaction ends and exists on {where} only"
        )
    return SessionStateError(message, kind=effect.kind, statement=sql, data_sources=sources, pinned=pinned)


def refuse_unpinned(plan: RoutePlan) -> None:
    """Refuse a plan about to run on pooled connections if it would change their session.

    Raises:
        SessionStateError: it would (nothing was sent).
    """
    units = plan.units
    if units:
        effect = effect_of(units[0].sql)  # every unit of a plan is the same statement
        if effect is not None:
            raise _error(effect, plan, pinned=False)


def check_pinned(plan: RoutePlan) -> bool:
    """Check a plan about to run on a transaction's pinned connections.

    Returns:
        ``True`` when the pins it runs on must be reset before they go back to the pool.

    Raises:
        SessionStateError: a kind refused even on a pinned session (nothing was sent).
    """
    units = plan.units
    if not units:
        return False
    effect = effect_of(units[0].sql)
    if effect is None:
        return False
    if not effect.pinnable:
        raise _error(effect, plan, pinned=True)
    return True


def reset_or_discard(borrowed: Borrowed) -> bool:
    """Reset a pinned connection's session before it goes back; ``False``: discard it instead."""
    pool = borrowed.pool
    try:
        ok = pool.driver.reset_session(borrowed.raw, pool.endpoint)
    except Exception as exc:
        log.warning("resetting a session on %s failed (%s); discarding the connection", pool.endpoint.name, exc)
        return False
    if not ok:
        log.info("%s cannot reset a session in place; discarding the connection", pool.endpoint.name)
    return ok
