"""The XA statements on one connection, with their error codes read the way MariaDB 10.5+ means them.

Measured on MariaDB 10.11 (docs/xa.md#server-behaviour):

* ``XA ROLLBACK`` / ``XA COMMIT`` of an xid the server does not know answers
  1397 ``XAER_NOTA``: for a rollback that is the *empty rollback* (the branch
  never prepared, or is already gone) and counts as done;
* a prepared branch still attached to a live session is listed by ``XA
  RECOVER`` but another connection's ``XA COMMIT`` / ``ROLLBACK`` of it also
  answers ``XAER_NOTA``: only its own session (or, once it disconnected,
  anyone) can end it;
* a deadlock (1213) inside a branch leaves it ``ROLLBACK ONLY``: ``XA END``
  and ``XA PREPARE`` answer 1399 ``XAER_RMFAIL``, ``XA ROLLBACK`` works; a
  lock-wait timeout (1205) rolls back the statement only, and the whole
  global transaction is rolled back by ddm-core anyway;
* an ``ACTIVE`` branch must be ended (``XA END``) before ``XA ROLLBACK``.
"""

from __future__ import annotations

from typing import Any

from ddm_core.dialects import titles
from ddm_core.errors import DdmError, XaError
from ddm_core.execute.driver_errors import map_driver_error
from ddm_core.execute.pools import Borrowed, discard_on
from ddm_core.xa.xid import Xid, ours

__all__ = [
    "ABORTING_CODES",
    "XAER_NOTA",
    "code_of",
    "require_xa",
    "run",
    "start",
    "end",
    "prepare",
    "commit",
    "rollback",
    "recover",
]

XAER_NOTA = 1397  # unknown xid
XAER_RMFAIL = 1399  # the branch is in a state that does not allow the command
XA_RBROLLBACK = 1402  # the branch was rolled back
XA_RBTIMEOUT = 1613
XA_RBDEADLOCK = 1614
ER_LOCK_DEADLOCK = 1213
ER_LOCK_WAIT_TIMEOUT = 1205

#: A statement error with one of these codes ends the whole global transaction (every branch rolled back).
ABORTING_CODES = frozenset({ER_LOCK_DEADLOCK, ER_LOCK_WAIT_TIMEOUT, XA_RBDEADLOCK, XA_RBTIMEOUT, XA_RBROLLBACK})


def code_of(exc: BaseException) -> Any:
    """The server's error number behind ``exc`` (a mapped ddm-core error or the driver's own)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, DdmError) and seen.context.get("code") is not None:
            return seen.context["code"]
        args = getattr(seen, "args", ())
        if args and isinstance(args[0], int):
            return args[0]
        seen = seen.__cause__
    return None


def require_xa(pinned: Borrowed) -> None:
    """Refuse a data source whose backend has no XA (:attr:`~ddm_core.dialects.Dialect.supports_xa`)."""
    dialect = pinned.pool.driver.dialect
    if not dialect.supports_xa:
        raise XaError(
            f"data source {pinned.pool.data_source!r} is {dialect.name}: XA transactions need "
            f"{titles(lambda d: d.supports_xa)} data sources (use a local transaction there)",
            data_source=pinned.pool.data_source,
            dialect=dialect.name,
        )


def run(pinned: Borrowed, sql: str) -> int:
    """Run one statement on ``pinned``; its row count. Driver errors are mapped (naming the data source)."""
    try:
        cursor = pinned.raw.cursor()
        try:
            cursor.execute(sql)
            return int(cursor.rowcount)
        finally:
            cursor.close()
    except Exception as exc:
        raise map_driver_error(exc, data_source=pinned.pool.data_source, endpoint=pinned.pool.endpoint.name, sql=sql) from exc


def start(pinned: Borrowed, xid: Xid) -> None:
    run(pinned, f"XA START {xid.sql()}")


def end(pinned: Borrowed, xid: Xid) -> None:
    run(pinned, f"XA END {xid.sql()}")


def prepare(pinned: Borrowed, xid: Xid) -> None:
    run(pinned, f"XA PREPARE {xid.sql()}")


def commit(pinned: Borrowed, xid: Xid, *, one_phase: bool = False) -> bool:
    """``XA COMMIT``; ``False`` when the server does not know the xid (nothing was committed here)."""
    try:
        run(pinned, f"XA COMMIT {xid.sql()}" + (" ONE PHASE" if one_phase else ""))
    except DdmError as exc:
        if code_of(exc) == XAER_NOTA and not one_phase:
            return False
        raise
    return True


def rollback(pinned: Borrowed, xid: Xid, *, active: bool = False) -> bool:
    """Roll the branch back (``active``: end it first); ``False`` for an empty rollback (xid unknown).

    An empty rollback succeeds: the branch never reached the server, never
    prepared, or is already gone.
    """
    if active:
        try:
            end(pinned, xid)
        except DdmError as exc:
            if discard_on(exc.__cause__ or exc) or code_of(exc) not in (XAER_RMFAIL, XAER_NOTA, *ABORTING_CODES):
                raise
            # ROLLBACK ONLY after a deadlock, or already ended: XA ROLLBACK still works
    try:
        run(pinned, f"XA ROLLBACK {xid.sql()}")
    except DdmError as exc:
        if code_of(exc) == XAER_NOTA:
            return False
        raise
    return True


def recover(pinned: Borrowed, namespace: str) -> list[Xid]:
    """The prepared branches of ``namespace`` on ``pinned``'s server (``XA RECOVER``; others' xids left out)."""
    sql = "XA RECOVER"
    try:
        cursor = pinned.raw.cursor()
        try:
            cursor.execute(sql)
            rows = cursor.fetchall()
        finally:
            cursor.close()
    except Exception as exc:
        raise map_driver_error(exc, data_source=pinned.pool.data_source, endpoint=pinned.pool.endpoint.name, sql=sql) from exc
    return ours(rows, namespace)
