"""Running an INSERT ... SELECT whose rows leave their nodes (the plan: :mod:`ddm_core.route.crossnode.insert_select`).

The SELECT's rows are read (in the caller's transaction, else streamed) and
inserted in batches through the router in one transaction: the caller's, or an
XA transaction opened for the statement when every data source has XA. Without
either, the statement is refused unless ``runtime.insertSelectAutocommit``
allows batches that commit on their own (docs/cross-node-queries.md#insert-select).
"""

from __future__ import annotations

from typing import Any, Iterator, Sequence

from ddm_core.crossnode.copy import Meter
from ddm_core.dialects import dialect_for
from ddm_core.errors import UnsupportedSQLError
from ddm_core.execute.result import Result
from ddm_core.execute.transaction import Transaction
from ddm_core.metadata.model import ShardingConfig
from ddm_core.route.crossnode import params_for
from ddm_core.route.crossnode.insert_select import BATCH_ROWS, InsertSelectPlan, InsertSelectStatement
from ddm_core.route.plan import RoutePlan

__all__ = ["run_insert_select", "needs_xa", "values_of", "chunks"]


def run_insert_select(executor: Any, plan: RoutePlan, tx: Transaction | None, timeout: Any) -> Result:
    cross: InsertSelectPlan = plan.cross_node
    s = cross.statement
    config = executor.config
    own = executor.transaction("xa") if tx is None and needs_xa(config, s) else None
    writer = tx or own
    meter = Meter(config.runtime)
    total, keys = 0, list[Any]()
    try:
        select_params = params_for(s.select, cross.params)
        source = (tx.execute(s.select, select_params, timeout=timeout) if tx is not None
                  else executor.execute(s.select, select_params, timeout=timeout, stream=None))
        with source:
            while rows := source.fetchmany(BATCH_ROWS):
                meter.add(s.target, rows)
                for chunk in chunks(rows):
                    sql, params = s.insert(len(chunk), len(chunk[0])), values_of(cross.params, chunk)
                    with (writer.execute(sql, params, timeout=timeout) if writer is not None
                          else executor.execute(sql, params, timeout=timeout)) as written:
                        total += max(written.rowcount, 0)
                        keys.extend(written.generated_keys)
    except BaseException:
        if own is not None:
            own.rollback()
        raise
    if own is not None:
        own.commit()
    return Result.counted(total, keys[0] if keys else None, tuple(keys), "insert")


def needs_xa(config: ShardingConfig, s: InsertSelectStatement) -> bool:
    """With no caller transaction: ``True`` when an XA transaction can hold the statement, ``False`` when
    ``runtime.insertSelectAutocommit`` lets batches commit on their own; else the statement is refused.

    Raises:
        UnsupportedSQLError: no XA, and autocommit batches not allowed.
    """
    if all(dialect_for(ds.primary.dialect).supports_xa for ds in config.data_sources.values()):
        return True
    if not config.runtime.insert_select_autocommit:
        raise UnsupportedSQLError(
            f"INSERT ... SELECT into {s.target!r} routes each row it reads to its own shard, so it writes "
            "to several data sources; with no transaction open and data sources without XA nothing would "
            "make that atomic. Run it inside a transaction, or set runtime.insertSelectAutocommit: true "
            "to let each batch commit on its own",
            construct="INSERT ... SELECT", table=s.target)
    return False


def values_of(params: dict[str, Any], rows: Sequence[Sequence[Any]]) -> dict[str, Any]:
    """The statement's own parameters and the rows' values as ``vN``, for :meth:`InsertSelectStatement.insert`."""
    out = dict(params)
    out.update((f"v{i}", v) for i, v in enumerate(v for row in rows for v in row))
    return out


def chunks(rows: Sequence[Any]) -> Iterator[Sequence[Any]]:
    """Full batches, then the rest in powers of two: few distinct INSERT texts reach the plan cache."""
    start = 0
    while start < len(rows):
        size = BATCH_ROWS
        while size > len(rows) - start:
            size //= 2
        yield rows[start:start + size]
        start += size
