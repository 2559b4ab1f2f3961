"""The asyncio runner of cross-node statements: awaited answers to the same steps as :mod:`.threads`.

Copies live on the connections of the caller's :class:`~ddm_core.aio.transaction.AsyncTransaction`
or of a local one opened for the statement. A broadcast copy's statement runs
merged across units, and the merge may have to ask a server for string
collations over a connection of its own, which would not see the copies: the
asyncio runner gathers every part on the gathering node instead
(docs/cross-node-queries.md#connections).
"""

from __future__ import annotations

import logging

from typing import Any, Sequence

from ddm_core.aio.result import AsyncResult
from ddm_core.aio.transaction import AsyncTransaction
from ddm_core.crossnode.client_join import explained, join_rows
from ddm_core.crossnode.copy import FetchRows, Held, InsertRows, Meter, ReadPart, Sessions, Step, copy_steps
from ddm_core.crossnode.insert_select import chunks, needs_xa, values_of
from ddm_core.errors import DdmError
from ddm_core.execute.driver_errors import map_driver_error
from ddm_core.execute.result import Result
from ddm_core.execute.steps import drive_async
from ddm_core.route.crossnode import CrossNodePlan, ExplainPlan, params_for
from ddm_core.route.crossnode.insert_select import BATCH_ROWS, InsertSelectPlan
from ddm_core.route.plan import RoutePlan

log = logging.getLogger(__name__)

__all__ = ["run_asyncio"]

#: Most values in one statement: SQLite's limit on host parameters, which MySQL's packets exceed anyway.
_MAX_VALUES = 32_000


async def run_asyncio(executor: Any, plan: RoutePlan, tx: AsyncTransaction | None, timeout: Any) -> AsyncResult:
    """Run a ``RouteKind.CROSS_NODE`` plan on the event loop."""
    if isinstance(plan.cross_node, InsertSelectPlan):
        return await _insert_select(executor, plan.cross_node, tx, timeout)
    if isinstance(plan.cross_node, ExplainPlan):
        return AsyncResult(explained(plan.cross_node))
    cross: CrossNodePlan = plan.cross_node
    cross = cross.statement.gathered(cross)
    copies = _Copies(tx, executor.transaction)
    try:
        held = await _copy(executor, cross, tx, copies, timeout)
        if held is not None:
            assert cross.local is not None
            description, rows = join_rows(cross.local, held)
            result = AsyncResult(Result.buffered(description, rows))
        else:
            result = await copies.session().execute_plan(cross.final, timeout=timeout)
        await copies.drop()
    except BaseException:
        await copies.abandon()
        raise
    await copies.finish()
    return result


class _Copies(Sessions[AsyncTransaction]):
    """The connections that hold copies, awaited."""

    async def run(self, data_source: str, sql: str, params: Sequence[Any] | None = None) -> None:
        target = await self.session().connection(data_source)
        pool = target.pool
        try:
            await pool.driver.execute(target.raw, sql, params)
        except DdmError:
            raise
        except Exception as exc:
            raise map_driver_error(exc, data_source=pool.data_source, endpoint=pool.endpoint.name, sql=sql) from exc

    async def insert(self, data_source: str, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """``sql`` inserts one row (``VALUES (...)``): sent as multi-row INSERTs."""
        head, _, row = sql.partition(" VALUES ")
        per = max(1, _MAX_VALUES // max(1, len(rows[0])))
        for start in range(0, len(rows), per):
            batch = rows[start:start + per]
            await self.run(data_source, f"{head} VALUES {', '.join([row] * len(batch))}",
                           [v for r in batch for v in r])

    async def drop(self) -> None:
        failure: Exception | None = None
        drops, self.drops = self.drops, []
        for ds, sql in reversed(drops):
            try:
                await self.run(ds, sql)
            except Exception as exc:
                self.session().mark_dirty(ds)
                failure = failure or exc
        if failure is not None:
            raise failure

    async def abandon(self) -> None:
        try:
            await self.drop()
        except Exception as exc:  # noqa: BLE001 - the statement's own failure is the one raised
            log.warning("dropping a cross-node statement's copies failed (%s); their sessions are reset", exc)
        finally:
            if self.own is not None:
                await self.own.rollback()

    async def finish(self) -> None:
        if self.own is not None:
            await self.own.commit()


async def _copy(executor: Any, cross: CrossNodePlan, tx: AsyncTransaction | None, copies: _Copies,
                timeout: Any) -> Held | None:
    """Answer the copy steps with awaits; the parts held for a client join, if any."""
    reading: list[AsyncResult] = []  # the part being read (one at a time)

    async def answer(step: Step) -> Any:
        if isinstance(step, FetchRows):
            return await reading[-1].fetchmany(step.size)
        if isinstance(step, InsertRows):
            for ds in cross.targets:
                await copies.insert(ds, step.sql, step.rows)
        elif isinstance(step, ReadPart):
            while reading:
                await reading.pop().aclose()
            reading.append(await _read(executor, tx, step.sql, step.params, step.stream, timeout))
            return list(reading[-1].description or ())
        else:
            await copies.run(step.data_source, step.sql)
            if step.drop is not None:
                copies.drops.append((step.data_source, step.drop))
        return None

    try:
        return await drive_async(copy_steps(cross, executor.config.runtime), answer)
    finally:
        for result in reading:
            await result.aclose()


async def _read(executor: Any, tx: AsyncTransaction | None, sql: str, params: Any, stream: bool | None,
                timeout: Any) -> AsyncResult:
    """A statement's rows: inside the caller's transaction (its own writes count), else on the executor."""
    plan = await executor.route(sql, params)
    if tx is not None:
        return await tx.execute_plan(plan, timeout=timeout)
    return await executor.execute_plan(plan, timeout=timeout, stream=stream)  # type: ignore[no-any-return]


async def _insert_select(executor: Any, cross: InsertSelectPlan, tx: AsyncTransaction | None,
                         timeout: Any) -> AsyncResult:
    s = cross.statement
    own = executor.transaction("xa") if tx is None and needs_xa(executor.config, s) else None
    writer = tx or own
    meter = Meter(executor.config.runtime)
    total, keys = 0, list[Any]()
    try:
        source = await _read(executor, tx, s.select, params_for(s.select, cross.params), None, timeout)
        try:
            while rows := await source.fetchmany(BATCH_ROWS):
                meter.add(s.target, rows)
                for chunk in chunks(rows):
                    sql, params = s.insert(len(chunk), len(chunk[0])), values_of(cross.params, chunk)
                    written = await (writer.execute(sql, params, timeout=timeout) if writer is not None
                                     else executor.execute(sql, params, timeout=timeout))
                    total += max(written.rowcount, 0)
                    keys.extend(written.generated_keys)
                    await written.aclose()
        finally:
            await source.aclose()
    except BaseException:
        if own is not None:
            await own.rollback()
        raise
    if own is not None:
        await own.commit()
    return AsyncResult(Result.counted(total, keys[0] if keys else None, tuple(keys), "insert"))
