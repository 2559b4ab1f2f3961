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

from typing import Any

from ddm_core.crossnode.copy import FetchRows, InsertRows, OnTarget, ReadPart, copy_steps
from ddm_core.execute.driver_errors import map_driver_error
from ddm_core.execute.pools import Borrowed
from ddm_core.execute.result import Result
from ddm_core.execute.transaction import Transaction
from ddm_core.route.crossnode import CrossNodePlan
from ddm_core.route.plan import RoutePlan

__all__ = ["run_threads"]


def run_threads(executor: Any, plan: RoutePlan, tx: Transaction | None, timeout: Any) -> Result:
    """Run a ``RouteKind.CROSS_NODE`` plan: copy its parts, run the statement over the copies, drop them."""
    cross: CrossNodePlan = plan.cross_node
    own = tx is None
    session = executor.transaction() if own else tx
    assert session is not None
    try:
        targets = {ds: session.connection(ds) for ds in cross.targets}
        drops: list[tuple[str, str]] = []
        try:
            _copy(executor, cross, tx, targets, drops, timeout)
            if not cross.final.merge.is_trivial:  # the merge may ask for collations: only these connections can
                for unit in cross.final.units:
                    target = targets[unit.data_source]
                    executor.engine.collations.learn(unit.data_source, target.pool.driver.sql_for(unit.sql, "format"),
                                                      target)
            result: Result = session.execute_plan(cross.final, timeout=timeout)
        finally:
            _drop(targets, drops, session)
    except BaseException:
        if own:
            session.rollback()
        raise
    if own:
        session.commit()
    return result


def _copy(executor: Any, cross: CrossNodePlan, tx: Transaction | None, targets: dict[str, Borrowed],
          drops: list[tuple[str, str]], timeout: Any) -> None:
    steps = copy_steps(cross, executor.config.runtime)
    reading: Result | None = None
    answer: Any = None
    try:
        while True:
            try:
                step = steps.send(answer)
            except StopIteration:
                return
            answer = None
            if isinstance(step, FetchRows):
                assert reading is not None
                answer = reading.fetchmany(step.size)
            elif isinstance(step, InsertRows):
                for target in targets.values():
                    _on(target, step.sql, step.rows)
            elif isinstance(step, ReadPart):
                if reading is not None:
                    reading.close()
                reading = _read(executor, tx, step, timeout)
                description = reading.description or ()
                answer = ([d[0] for d in description], [d[1] for d in description])
            elif isinstance(step, OnTarget):
                target = targets[step.data_source]
                if step.optional:
                    try:
                        _on(target, step.sql)
                    except Exception:  # noqa: BLE001 - an index only speeds the join up
                        pass
                else:
                    _on(target, step.sql)
                    if step.drop is not None:
                        drops.append((step.data_source, step.drop))
    finally:
        steps.close()
        if reading is not None:
            reading.close()


def _read(executor: Any, tx: Transaction | None, step: ReadPart, timeout: Any) -> Result:
    """A part's rows: inside the caller's transaction (its own writes count), else streamed."""
    if tx is not None:
        return tx.execute_plan(executor.router.route(step.sql, step.params), timeout=timeout)
    return executor.execute_plan(executor.router.route(step.sql, step.params), timeout=timeout, stream=True)


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


def _drop(targets: dict[str, Borrowed], drops: list[tuple[str, str]], session: Transaction) -> None:
    """Drop the copies; where that fails, the connection's session is reset (or it is discarded) at the end."""
    failure: Exception | None = None
    for ds, sql in reversed(drops):
        try:
            _on(targets[ds], sql)
        except Exception as exc:
            session.mark_dirty(ds)
            failure = failure or exc
    if failure is not None:
        raise failure
