"""The execute layer: pools per data source, bounded fan-out, deadlines, local transactions.

* :class:`Executor` — ``Executor(config_or_router).execute(sql, params)`` → :class:`Result`.
* :class:`Result` — rows (streamed, merged) or row counts; close it, exhaust it or use ``with``.
* :class:`Transaction` — ``with executor.transaction() as tx:``: one pinned connection per
  data source, writes to one data source only.
* :class:`PoolStats` — ``executor.pool_stats()``: idle / borrowed per data source.

The PEP 249 facade over all of this is :mod:`ddm_core.dbapi`.
"""

from ddm_core.execute.executor import DEFAULT, Executor
from ddm_core.execute.pools import PoolStats
from ddm_core.execute.result import Result, UnitResult
from ddm_core.execute.transaction import Transaction

__all__ = ["Executor", "Result", "UnitResult", "Transaction", "PoolStats", "DEFAULT"]
