"""Connections a migration uses: one per data source primary, opened by the executor's driver adapter.

A migration reads and writes physical tables directly (``SHOW CREATE TABLE``,
the state table, batches in primary-key order), so it talks to each data
source's primary over its own connection, never through the router. The
connections come from :func:`ddm_core.execute.drivers.driver_for` — the same
recipe the executor's pools and ``ddm ddl --execute`` use (utf8mb4,
autocommit, bounded timeouts). Only MySQL and MariaDB data sources can take
part: the state table, the schema comparison and the checksums are written
in their SQL.
"""

from __future__ import annotations

from typing import Any, Callable

from ddm_core import dialects
from ddm_core.errors import DataSourceUnavailableError, DdmError, MigrationError
from ddm_core.execute.drivers import driver_for
from ddm_core.metadata.model import Endpoint, ShardingConfig
from ddm_core.metadata.sources.table import DEFAULT_TABLE, TableSource

__all__ = ["Connections", "connector", "config_table_source"]

DEFAULT_CONNECT_TIMEOUT = 5.0


def _endpoint(config: ShardingConfig, data_source: str) -> Endpoint:
    ds = config.data_sources.get(data_source)
    if ds is None:
        raise MigrationError(
            f"data source {data_source!r} is not in the configuration (it has {', '.join(config.data_sources)})",
            data_source=data_source,
        )
    ep = ds.primary
    if not dialects.dialect_for(ep.dialect).has_binlog:  # the catch-up replays the binary log
        raise MigrationError(
            f"data source {data_source!r} is {ep.dialect}; migrations run on "
            f"{dialects.titles(lambda d: d.has_binlog, 'and')} data sources only",
            data_source=data_source,
        )
    return ep


def connector(
    config: ShardingConfig, data_source: str, *, connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
) -> Callable[[], Any]:
    """A function opening a new autocommit connection to ``data_source``'s primary.

    Raises:
        MigrationError: the data source is unknown or not MySQL / MariaDB.
    """
    ep = _endpoint(config, data_source)
    driver = driver_for(ep.dialect)

    def connect() -> Any:
        try:
            return driver.connect(ep, connect_timeout)
        except DdmError:  # a password variable that is not set names itself
            raise
        except Exception as exc:  # driver errors have no common base
            raise DataSourceUnavailableError(
                f"data source {data_source!r} ({ep.url}): cannot connect: {exc}", data_source=data_source
            ) from exc

    return connect


def config_table_source(
    config: ShardingConfig, data_source: str, *, table: str = DEFAULT_TABLE, create: bool = False
) -> TableSource:
    """A :class:`~ddm_core.metadata.sources.table.TableSource` on a data source of ``config``.

    Point an application at it with ``ConfigHolder(config_table_source(config, "ds_0"))`` and
    ``holder.watch(1.0)``.

    Args:
        create: Create the table if it does not exist.
    """
    source = TableSource(connector(config, data_source), table=table, name=f"data source {data_source!r}")
    if create:
        source.create_table()
    return source


class Connections:
    """One kept connection per data source (opened on first use); close them at the end.

    Args:
        config: The configuration whose data sources are reached.
        more: Further configurations (a migration's new one) for data sources
            ``config`` lacks; a name both have means the same database (a
            configuration reload refuses to repoint a data source name).
    """

    def __init__(
        self, config: ShardingConfig, *more: ShardingConfig, connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    ) -> None:
        self.config = config
        self.configs = (config, *more)
        self.connect_timeout = connect_timeout
        self._open: dict[str, Any] = {}

    def twin(self) -> "Connections":
        """Connections to the same data sources, opened anew on use (one set per thread)."""
        return Connections(self.config, *self.configs[1:], connect_timeout=self.connect_timeout)

    def config_of(self, data_source: str) -> ShardingConfig:
        """The first configuration naming ``data_source``."""
        for config in self.configs:
            if data_source in config.data_sources:
                return config
        return self.config  # connector() names the data source as unknown

    def dialect(self, data_source: str) -> dialects.Dialect:
        return dialects.dialect_for(self.config_of(data_source).data_sources[data_source].primary.dialect)

    def get(self, data_source: str) -> Any:
        """The connection to ``data_source``'s primary."""
        conn = self._open.get(data_source)
        if conn is None:
            conn = self._open[data_source] = connector(
                self.config_of(data_source), data_source, connect_timeout=self.connect_timeout
            )()
        return conn

    def execute_many(self, data_source: str, sql: str, rows: Any) -> None:
        """``executemany`` of ``sql`` on ``data_source`` (PyMySQL sends one multi-row INSERT)."""
        self.query(data_source, sql, rows, many=True)

    def send(self, data_source: str, statement: bytes, what: str) -> None:
        """Run one statement already spelled in full (no parameters); a failure names ``what``, not the
        statement (a batch INSERT is megabytes)."""
        cur = self.get(data_source).cursor()
        try:
            cur.execute(statement)
        except DdmError:
            raise
        except Exception as exc:  # driver errors have no common base
            raise MigrationError(f"data source {data_source!r}: {what}: {exc}", data_source=data_source) from exc
        finally:
            cur.close()

    def query(self, data_source: str, sql: str, params: Any = None, *, many: bool = False) -> list[tuple[Any, ...]]:
        """Every row of ``sql`` on ``data_source`` (names the data source and statement on failure)."""
        cur = self.get(data_source).cursor()
        try:
            if many:
                cur.executemany(sql, params)
                return []
            cur.execute(sql, params)
            return list(cur.fetchall())
        except DdmError:
            raise
        except Exception as exc:  # driver errors have no common base
            raise MigrationError(
                f"data source {data_source!r}: {exc}\n  statement: {sql}", data_source=data_source, statement=sql
            ) from exc
        finally:
            cur.close()

    def close(self) -> None:
        conns, self._open = list(self._open.values()), {}
        for conn in conns:
            try:
                conn.close()
            except Exception:  # closing must not hide an earlier failure
                pass

    def __enter__(self) -> "Connections":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
