"""The thread runner of cross-node statements: blocking answers to :func:`~ddm_core.crossnode.copy.copy_steps`.

The copies live on one connection per target data source (the gathering node,
or every data source of a broadcast copy's driving part): the caller's
transaction's, or a local transaction's opened for the statement (so that the
parts of an autocommit caller stream on other pooled connections while the
copies fill). The statement then runs over the copies on those connections,
and the copies are dropped before the connections are given back — a pooled
connection never keeps one (docs/cross-node-queries.md#connections).
"""

from __future__ import annotations

import logging

from typing import Any

from ddm_core.crossnode.client_join import explained, join_rows
from ddm_core.crossnode.insert_select import run_insert_select
from ddm_core.crossnode.copy import FetchRows, Held, InsertRows, ReadPart, Sessions, Step, copy_steps
from ddm_core.execute.driver_errors import map_driver_error
from ddm_core.execute.pools import Borrowed
from ddm_core.execute.result import Result
from ddm_core.execute.steps import drive
from ddm_core.execute.transaction import Transaction
from ddm_core.route.crossnode import CrossNodePlan, ExplainPlan
from ddm_core.route.crossnode.insert_select import InsertSelectPlan
from ddm_core.route.plan import RoutePlan

log = logging.getLogger(__name__)

__all__ = ["run_threads"]


def run_threads(executor: Any, plan: RoutePlan, tx: Transaction | None, timeout: Any) -> Result:
    """Run a ``RouteKind.CROSS_NODE`` plan: read its parts, then join them in the client or run the
    statement over their copies (dropped afterwards)."""
    if isinstance(plan.cross_node, InsertSelectPlan):
        return run_insert_select(executor, plan, tx, timeout)
    if isinstance(plan.cross_node, ExplainPlan):
        return explained(plan.cross_node)
    cross: CrossNodePlan = plan.cross_node
    copies = _Copies(tx, executor.transaction)
    try:
        held = _copy(executor, cross, tx, copies, timeout)
        if held is not None:
            assert cross.local is not None
            description, rows = join_rows(cross.local, held)
            result = Result.buffered(description, rows)
        else:
            session = copies.session()
            if not cross.final.merge.is_trivial:  # the merge may ask for collations: only these connections can
                for unit in cross.final.units:
                    target = copies.on(unit.data_source)
                    executor.engine.collations.learn(unit.data_source, target.pool.driver.sql_for(unit.sql, "format"),
                                                      target)
            result = session.execute_plan(cross.final, timeout=timeout)
        copies.drop()
    except BaseException:
        copies.abandon()
        raise
    copies.finish()
    return result


class _Copies(Sessions[Transaction]):
    """The connections that hold copies, with blocking calls."""

    def on(self, data_source: str) -> Borrowed:
        return self.session().connection(data_source)

    def drop(self) -> None:
        """Drop the copies; where that fails, the connection's session is reset (or it is discarded) at the end."""
        failure: Exception | None = None
        drops, self.drops = self.drops, []
        for ds, sql in reversed(drops):
            try:
                _on(self.on(ds), sql)
            except Exception as exc:
                self.session().mark_dirty(ds)
                failure = failure or exc
        if failure is not None:
            raise failure

    def abandon(self) -> None:
        """After a failure: drop what can be dropped, end a transaction of our own."""
        try:
            self.drop()
        except Exception as exc:  # noqa: BLE001 - the statement's own failure is the one raised
            log.warning("dropping a cross-node statement's copies failed (%s); their sessions are reset", exc)
        finally:
            if self.own is not None:
                self.own.rollback()

    def finish(self) -> None:
        if self.own is not None:
            self.own.commit()


def _copy(executor: Any, cross: CrossNodePlan, tx: Transaction | None, copies: _Copies, timeout: Any) -> Held | None:
    """Answer the copy steps with blocking calls; the parts held for a client join, if any."""
    reading: list[Result] = []  # the part being read (one at a time)

    def answer(step: Step) -> Any:
        if isinstance(step, FetchRows):
            return reading[-1].fetchmany(step.size)
        if isinstance(step, InsertRows):
            for ds in cross.targets:
                _on(copies.on(ds), step.sql, step.rows)
        elif isinstance(step, ReadPart):
            while reading:
                reading.pop().close()
            reading.append(_read(executor, tx, step, timeout))
            return list(reading[-1].description or ())
        else:
            _on(copies.on(step.data_source), step.sql)
            if step.drop is not None:
                copies.drops.append((step.data_source, step.drop))
        return None

    try:
        return drive(copy_steps(cross, executor.config.runtime), answer)
    finally:
        for result in reading:
            result.close()


def _read(executor: Any, tx: Transaction | None, step: ReadPart, timeout: Any) -> Result:
    """A part's rows: inside the caller's transaction (its own writes count), else streamed."""
    plan = executor.router.route(step.sql, step.params)
    result: Result = (tx.execute_plan(plan, timeout=timeout) if tx is not None
                      else executor.execute_plan(plan, timeout=timeout, stream=step.stream))
    return result


def _on(target: Borrowed, sql: str, rows: Any = None) -> None:
    driver, pool = target.pool.driver, target.pool
    cursor = driver.cursor(target.raw, False)
    try:
        if rows is None:
            cursor.execute(sql)
        else:
            cursor.executemany(sql, rows)
    except Exception as exc:
        raise map_driver_error(exc, data_source=pool.data_source, endpoint=pool.endpoint.name, sql=sql) from exc
    finally:
        cursor.close()
