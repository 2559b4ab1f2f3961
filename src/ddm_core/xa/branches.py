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
from ddm_core.execute.steps import Sql, Step, Steps, drive
from ddm_core.xa.xid import Xid, ours

__all__ = [
    "ABORTING_CODES",
    "XAER_NOTA",
    "code_of",
    "require_xa",
    "run",
    "send",
    "receive",
    "statement",
    "start",
    "end",
    "prepare",
    "commit",
    "rollback",
    "recover",
    "run_step",
    "commit_steps",
    "rollback_steps",
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


def require_xa(pinned: Any) -> None:
    """Refuse a data source whose backend has no XA (:attr:`~ddm_core.dialects.Dialect.supports_xa`).

    ``pinned``: either runner's borrowed connection.
    """
    dialect = pinned.pool.driver.dialect
    if not dialect.supports_xa:
        raise XaError(
            f"data source {pinned.pool.data_source!r} is {dialect.name}: XA transactions need "
            f"{titles(lambda d: d.supports_xa)} data sources (use a local transaction there)",
            data_source=pinned.pool.data_source,
            dialect=dialect.name,
        )


def run(pinned: Borrowed, sql: str, params: tuple[Any, ...] = ()) -> int:
    """Run one statement on ``pinned``; its row count. Driver errors are mapped (naming the data source)."""
    try:
        cursor = pinned.raw.cursor()
        try:
            cursor.execute(sql, params or None)
            return int(cursor.rowcount)
        finally:
            cursor.close()
    except Exception as exc:
        raise _mapped(pinned, sql, exc) from exc


def send(pinned: Borrowed, sql: str, params: tuple[Any, ...] = ()) -> Any:
    """Send ``sql`` on ``pinned`` without waiting for its answer (the driver's pipelining,
    docs/operations.md#multi-unit-statements); the cursor :func:`receive` reads the answer into."""
    try:
        return pinned.pool.driver.send(pinned.raw, sql, params or None)
    except Exception as exc:
        raise _mapped(pinned, sql, exc) from exc


def receive(pinned: Borrowed, cursor: Any, sql: str, *, queued: bool = False) -> int:
    """The answer to what :func:`send` sent on ``pinned``: its row count (errors mapped as :func:`run`'s).

    ``queued``: another statement was sent on ``pinned`` before this one and its answer read first (a
    round's statements queued on one connection, docs/xa.md#how-a-round-runs). The server numbers every
    answer's packets from 1; PyMySQL expects the numbering to go on from its *last sent* command, which was
    this one only if nothing followed it, so its count is reset to the start of an answer.
    """
    if queued:
        pinned.raw._next_seq_id = 1
    try:
        pinned.pool.driver.receive(pinned.raw, cursor, None)
        return int(cursor.rowcount)
    except Exception as exc:
        raise _mapped(pinned, sql, exc) from exc


def _mapped(pinned: Borrowed, sql: str, exc: Exception) -> DdmError:
    return map_driver_error(exc, data_source=pinned.pool.data_source, endpoint=pinned.pool.endpoint.name, sql=sql)


def statement(command: str, xid: Xid) -> str:
    """``XA <command> <xid>`` (``command``: ``START``, ``END``, ``PREPARE``, ``COMMIT``, ``ROLLBACK``)."""
    return f"XA {command} {xid.sql()}"


def start(pinned: Borrowed, xid: Xid) -> None:
    run(pinned, statement("START", xid))


def end(pinned: Borrowed, xid: Xid) -> None:
    run(pinned, statement("END", xid))


def prepare(pinned: Borrowed, xid: Xid) -> None:
    run(pinned, statement("PREPARE", xid))


def commit(pinned: Borrowed, xid: Xid, *, one_phase: bool = False) -> bool:
    """``XA COMMIT``; ``False`` when the server does not know the xid (nothing was committed here)."""
    return drive(commit_steps(pinned, xid, one_phase=one_phase), run_step)


def rollback(pinned: Borrowed, xid: Xid, *, active: bool = False) -> bool:
    """Roll the branch back (``active``: end it first); ``False`` for an empty rollback (xid unknown)."""
    return drive(rollback_steps(pinned, xid, active=active), run_step)


def run_step(step: Step) -> int:
    """Answer a branch's :class:`~ddm_core.execute.steps.Sql` step on its blocking connection."""
    assert isinstance(step, Sql)
    return run(step.on, step.sql, step.params)


# -- the same commands as steps, for either runner (ddm_core.execute.steps) ------------------------


def commit_steps(on: Any, xid: Xid, *, one_phase: bool = False) -> Steps[bool]:
    """``XA COMMIT`` on ``on``; ``False`` when the server does not know the xid (nothing was committed here)."""
    try:
        yield Sql(on, statement("COMMIT", xid) + (" ONE PHASE" if one_phase else ""))
    except DdmError as exc:
        if code_of(exc) == XAER_NOTA and not one_phase:
            return False
        raise
    return True


def rollback_steps(on: Any, xid: Xid, *, active: bool = False) -> Steps[bool]:
    """Roll the branch on ``on`` back (``active``: end it first); ``False`` for an empty rollback (xid unknown).

    An empty rollback succeeds: the branch never reached the server, never
    prepared, or is already gone.
    """
    if active:
        try:
            yield Sql(on, statement("END", xid))
        except DdmError as exc:
            if discard_on(exc.__cause__ or exc) or code_of(exc) not in (XAER_RMFAIL, XAER_NOTA, *ABORTING_CODES):
                raise
            # ROLLBACK ONLY after a deadlock, or already ended: XA ROLLBACK still works
    try:
        yield Sql(on, statement("ROLLBACK", xid))
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
        raise _mapped(pinned, sql, exc) from exc
    return ours(rows, namespace)
