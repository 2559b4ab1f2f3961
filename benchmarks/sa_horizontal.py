"""``sqlalchemy.ext.horizontal_shard`` over ddm-core's 16 physical tables: the harness of test_bench_sqlalchemy.py.

horizontal_shard picks an *engine* per shard and sends the statement as the
mapper compiled it, so every shard sees ``FROM t_order``; it has no notion of a
physical table per shard. The 16 tables ``t_order_<db>_<table>`` in 4
databases are covered thus:

* one ``mysql+pymysql`` engine (one pool) per database;
* 16 shards, each ``engine.execution_options(ddm_bench_table="t_order_<db>_<table>")``
  of its database's engine — an ``OptionEngine`` that shares that engine's pool;
* a ``before_cursor_execute`` listener (``retval=True``) on each database engine
  that rewrites the identifier ``t_order`` in the statement text to the shard's
  table named by that option. ``schema_translate_map`` cannot do this: it
  renames schemas, not tables; one mapped class per table would give 16
  classes, which is not what horizontal_shard is for.

The choosers use ddm-core's own placement (the configured SLOTS database
algorithm and HASH_MOD table algorithm, as compiled scalars), so both sides put
a user's orders in the same physical table and read the same data:

* ``shard_chooser``: the instance's ``user_id``;
* ``identity_chooser``: the ``user_id`` of the primary key ``(user_id, order_id)``;
* ``execute_chooser``: a ``user_id = value`` comparison in the WHERE clause (a
  bound value, or the parameter ``session.get`` passes), as SQLAlchemy's own
  sharding example reads its criteria; otherwise all 16 shards, whose results
  horizontal_shard concatenates in shard order.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterable

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.ext.horizontal_shard import ShardedSession
from sqlalchemy.orm import ORMExecuteState
from sqlalchemy.sql import operators, visitors
from sqlalchemy.sql.elements import BinaryExpression, BindParameter, ColumnElement

from ddm_core.metadata.model import ShardingConfig

__all__ = ["HorizontalShards", "mysql_engine"]

#: The execution option naming a shard engine's physical table.
TABLE_OPTION = "ddm_bench_table"
_LOGIC = re.compile(r"\bt_order\b")


def mysql_engine(database: str, **kw: Any) -> Engine:
    """A ``mysql+pymysql`` engine on the local MariaDB's ``database`` (root, no password, utf8mb4)."""
    return create_engine(f"mysql+pymysql://root@127.0.0.1:3306/{database}?charset=utf8mb4", **kw)


def _to_physical(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any,
                 executemany: bool) -> tuple[str, Any]:
    table = conn.get_execution_options().get(TABLE_OPTION)
    return (statement if table is None else _LOGIC.sub(table, statement)), parameters


class HorizontalShards:
    """16 shard engines over ``config``'s ``t_order`` nodes, and ``ShardedSession``s over them.

    Args:
        config: ddm-core's configuration of the same tables (data sources, algorithms).
    """

    def __init__(self, config: ShardingConfig) -> None:
        table = config.table("t_order")
        assert table is not None
        self.engines: list[Engine] = []
        self.shards: dict[str, Any] = {}
        for ds in table.data_sources:
            engine = mysql_engine(str(config.data_sources[ds].primary.database), pool_size=4)
            event.listen(engine, "before_cursor_execute", _to_physical, retval=True)
            self.engines.append(engine)
            for physical in table.tables_by_source[ds]:
                self.shards[physical] = engine.execution_options(**{TABLE_OPTION: physical})
        self.all = list(self.shards)
        sources = list(table.data_sources)
        db_of = _scalar(table.database_strategy, sources)
        table_of = {ds: _scalar(table.table_strategy, list(table.tables_by_source[ds])) for ds in sources}

        def shard_of(user_id: Any) -> str:
            ds = sources[db_of(user_id)]
            return table.tables_by_source[ds][table_of[ds](user_id)]

        self.shard_of = shard_of

    def session(self) -> ShardedSession:
        return ShardedSession(shard_chooser=self._shard_chooser, identity_chooser=self._identity_chooser,
                              execute_chooser=self._execute_chooser, shards=self.shards)

    def _shard_chooser(self, mapper: Any, instance: Any, clause: Any = None) -> str:
        if instance is None:
            raise ValueError("horizontal_shard harness: a statement without an instance names no shard")
        return self.shard_of(instance.user_id)

    def _identity_chooser(self, mapper: Any, primary_key: Any, *, lazy_loaded_from: Any, **kw: Any) -> list[str]:
        if lazy_loaded_from is not None:
            return [lazy_loaded_from.identity_token]
        return [self.shard_of(primary_key[0])]  # (user_id, order_id)

    def _execute_chooser(self, context: ORMExecuteState) -> Iterable[str]:
        if context.lazy_loaded_from is not None:
            return [context.lazy_loaded_from.identity_token]
        user_id = _user_id_in(context.statement, context.parameters)
        return self.all if user_id is None else [self.shard_of(user_id)]

    def close(self) -> None:
        for engine in self.engines:
            engine.dispose()


def _scalar(strategy: Any, targets: list[str]) -> Callable[[Any], int]:
    """The strategy's algorithm as ``value -> index into targets`` (ddm-core's compiled scalar)."""
    return strategy.algorithm.algorithm.scalar(targets, strategy.columns[0])  # type: ignore[no-any-return]


def _user_id_in(statement: Any, parameters: Any) -> Any:
    """The value of a ``user_id = value`` comparison in ``statement``'s WHERE clause, else ``None``."""
    where = getattr(statement, "whereclause", None)
    if where is None:
        return None
    for node in visitors.iterate(where):
        if (isinstance(node, BinaryExpression) and node.operator is operators.eq
                and isinstance(node.left, ColumnElement) and getattr(node.left, "key", None) == "user_id"
                and isinstance(node.right, BindParameter)):
            bound = node.right
            if isinstance(parameters, dict) and bound.key in parameters:
                return parameters[bound.key]
            return bound.effective_value
    return None
