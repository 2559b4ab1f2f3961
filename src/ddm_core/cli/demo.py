"""``ddm demo``: a sharded order service built, loaded and queried end to end, no server needed.

The demo builds ``t_order`` and its bound ``t_order_item`` sharded by ``user_id``
(SLOTS, 1024 slots, one table per shard) plus the broadcast dictionary table
``t_dict_region`` over 4 SQLite files (or 4 MariaDB / MySQL databases with
``--mysql URL``), loads 100 000 orders through the PEP 249 facade's
``executemany`` (multi-row INSERT batches routed by the router's batch path,
``order_id`` filled with gene ids that carry the user's slot, ``item_id`` with
snowflake ids), and then runs — printing each plan, its timing and its rows —

* a point lookup by ``user_id`` and one by ``order_id`` (both single shard: the
  gene bits of the id name the shard without the user id),
* a cross-shard page ``ORDER BY create_time DESC LIMIT 20 OFFSET 40`` (heap merge),
* a ``GROUP BY`` report with ``COUNT/SUM/AVG/MIN/MAX`` (re-aggregated across shards),
* a join with the broadcast dictionary table, and a binding join orders ⨝ items.

The configuration is built in code (:func:`demo_config`); with ``--dir`` or
``--keep`` it is also written as ``demo.yaml`` next to the SQLite files, so
``ddm route -c DIR/demo.yaml ...`` works on the loaded data afterwards.
"""

from __future__ import annotations

import random
import re
import shutil
import statistics
import tempfile
import time
import urllib.parse
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import click

from ddm_core.cli.app import cli, render_table
from ddm_core.cli.describe import merge_lines, plan_header, unit_rows
from ddm_core.dialects import dialect_for, find_dialect
from ddm_core.dialects.mysql import MySQL
from ddm_core.errors import DataSourceUnavailableError

__all__ = [
    "demo",
    "demo_config",
    "DEMO_SCHEMA",
    "REGIONS",
    "DemoQuery",
    "demo_queries",
    "parse_mysql_url",
    "mysql_database_names",
]

#: The schema template, written once against the logic tables (MySQL dialect; the
#: DDL generator translates it for SQLite data sources). DROP first: a re-run starts clean.
DEMO_SCHEMA = """
DROP TABLE IF EXISTS t_order_item;
DROP TABLE IF EXISTS t_order;
DROP TABLE IF EXISTS t_dict_region;

CREATE TABLE t_order (
  order_id    BIGINT        NOT NULL COMMENT 'gene id: carries the slot of user_id',
  order_no    VARCHAR(32)   NOT NULL,
  user_id     BIGINT        NOT NULL COMMENT 'shard key',
  region_code VARCHAR(12)   NOT NULL,
  status      TINYINT       NOT NULL,
  amount      DECIMAL(12,2) NOT NULL,
  create_time DATETIME(3)   NOT NULL,
  PRIMARY KEY (order_id),
  KEY idx_user_time (user_id, create_time),
  KEY idx_create_time (create_time)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE t_order_item (
  item_id     BIGINT        NOT NULL COMMENT 'snowflake id',
  order_id    BIGINT        NOT NULL,
  user_id     BIGINT        NOT NULL COMMENT 'shard key, bound to t_order',
  sku_id      INT           NOT NULL,
  quantity    INT           NOT NULL,
  price       DECIMAL(12,2) NOT NULL,
  PRIMARY KEY (item_id),
  KEY idx_order (order_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE t_dict_region (
  region_code VARCHAR(12)   NOT NULL,
  name        VARCHAR(64)   NOT NULL,
  PRIMARY KEY (region_code)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
"""

#: The broadcast dictionary: region code → name (copied to every data source).
REGIONS: tuple[tuple[str, str], ...] = (
    ("CN-BJ", "Beijing"),
    ("CN-SH", "Shanghai"),
    ("CN-GD", "Guangdong"),
    ("CN-ZJ", "Zhejiang"),
    ("CN-JS", "Jiangsu"),
    ("CN-SC", "Sichuan"),
    ("CN-HB", "Hubei"),
    ("CN-FJ", "Fujian"),
    ("CN-SD", "Shandong"),
    ("CN-HN", "Henan"),
    ("CN-SN", "Shaanxi"),
    ("CN-TJ", "Tianjin"),
)
# Order statuses and how often they occur: created, paid, shipped, completed, cancelled.
_STATUS_WEIGHTS = (5, 15, 20, 50, 10)
_START = datetime(2025, 1, 1)
_STEP_MS = 25_000  # one order every ~25 s: 100 000 orders span about 29 days

INSERT_ORDER = (
    "INSERT INTO t_order (order_no, user_id, region_code, status, amount, create_time) "
    "VALUES (%s, %s, %s, %s, %s, %s)"
)
INSERT_ITEM = "INSERT INTO t_order_item (order_id, user_id, sku_id, quantity, price) VALUES (%s, %s, %s, %s, %s)"
_LOAD_CHUNK = 5000  # rows per executemany call (its multi-row batches are 1000 rows): one progress step


# -- configuration ------------------------------------------------------------------------------


def demo_config(sources: Mapping[str, Any]) -> dict[str, Any]:
    """The demo's configuration (a dict for :func:`~ddm_core.load_config`).

    Args:
        sources: Data source name → URL (or ``{url, username, password}``), in shard order.
    """
    names = list(sources)
    return {
        "name": "ddm-demo",
        "dataSources": dict(sources),
        "pool": {"maxSize": 8, "minIdle": 1, "acquireTimeoutMs": 3000},
        "tables": [
            {
                "logicTable": "t_order",
                "shardKey": "user_id",
                "algorithm": "slots",
                "slotCount": 1024,
                "shardCount": len(names),
                "tablePerShard": 1,  # one table per shard: a gene id finds its table too
                "databases": names,
                "keyGenerator": {"column": "order_id", "type": "gene", "shardColumn": "user_id"},
            },
            {"logicTable": "t_order_item", "bindTo": "t_order", "keyGenerator": {"column": "item_id", "type": "snowflake"}},
        ],
        "broadcastTables": ["t_dict_region"],
        "defaultDataSource": names[0],
        "runtime": {
            "allowFullRoute": True,  # the cross-shard report queries read every shard
            "allowDmlFullRoute": False,
            "fullRouteThreshold": 8,
            "maxOffset": 10000,
            "sqlComment": False,
        },
    }


def sqlite_sources(directory: Path, shards: int) -> dict[str, str]:
    return {f"ds_{i}": f"sqlite:///{(directory / f'ds_{i}.db').resolve()}" for i in range(shards)}


_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,50}$")


@dataclass(frozen=True)
class MySQLServer:
    """Where ``--mysql URL`` points."""

    host: str
    port: int
    user: str
    password: str

    def url(self, database: str) -> str:
        return f"mysql://{self.host}:{self.port}/{database}"

    def connect(self) -> Any:
        """A server-level connection (no database) by the executor's own recipe."""
        from ddm_core.execute.mysql_connect import open_mysql, pymysql_module

        pymysql = pymysql_module()
        try:
            return open_mysql(
                host=self.host, port=self.port, user=self.user, password=self.password, database=None,
                connect_timeout=5.0, where="--mysql",
            )
        except pymysql.MySQLError as exc:
            raise DataSourceUnavailableError(
                f"cannot connect to {self.user}@{self.host}:{self.port}: {exc}", data_source="--mysql"
            ) from exc


def parse_mysql_url(url: str) -> MySQLServer:
    """``mysql://user:password@host:port`` (``mariadb://`` too; a path is ignored)."""
    parts = urllib.parse.urlsplit(url)
    backend = find_dialect(parts.scheme) if parts.scheme else None
    if not isinstance(backend, MySQL) or not parts.hostname:  # MariaDB is a MySQL
        raise click.BadParameter(f"expected mysql://user[:password]@host[:port], got {url!r}", param_hint="--mysql")
    try:
        port = parts.port or backend.default_port
    except ValueError as exc:
        raise click.BadParameter(f"bad port in {url!r}: {exc}", param_hint="--mysql") from exc
    return MySQLServer(
        host=parts.hostname,
        port=port,
        user=urllib.parse.unquote(parts.username or "root"),
        password=urllib.parse.unquote(parts.password or ""),
    )


def mysql_database_names(prefix: str, shards: int) -> list[str]:
    return [f"{prefix}_{i}" for i in range(shards)]


# -- data ---------------------------------------------------------------------------------------


def generate_orders(count: int, users: int, seed: int) -> list[tuple[Any, ...]]:
    """Order rows (order_no, user_id, region_code, status, amount, create_time), deterministic.

    Amounts and times are passed as text ('123.45', '2025-01-01 00:00:12.345'): exact for
    DECIMAL / DATETIME(3) on MySQL, and what SQLite stores anyway (its sqlite3 driver
    accepts neither ``Decimal`` nor — from Python 3.12 on without a warning — ``datetime``).
    """
    rng = random.Random(seed)
    codes = [code for code, _ in REGIONS]
    statuses = list(range(len(_STATUS_WEIGHTS)))
    out = []
    for i in range(count):
        when = _START + timedelta(milliseconds=i * _STEP_MS + rng.randrange(_STEP_MS))
        cents = int(rng.lognormvariate(9.0, 1.0)) % 10_000_000 + 100  # 1.00 .. 100 000.99, skewed
        out.append(
            (
                f"NO{i + 1:010d}",
                rng.randint(1, users),
                rng.choice(codes),
                rng.choices(statuses, _STATUS_WEIGHTS)[0],
                f"{cents // 100}.{cents % 100:02d}",
                when.strftime("%Y-%m-%d %H:%M:%S.") + f"{when.microsecond // 1000:03d}",
            )
        )
    return out


def generate_items(orders: Sequence[tuple[Any, ...]], keys: Sequence[int], seed: int) -> list[tuple[Any, ...]]:
    """Items (order_id, user_id, sku_id, quantity, price) for every fifth order, 1–3 each."""
    rng = random.Random(seed + 1)
    out = []
    for i in range(0, len(orders), 5):
        user = orders[i][1]
        for _ in range(rng.randint(1, 3)):
            cents = rng.randint(199, 99_999)
            out.append((keys[i], user, rng.randint(1000, 1999), rng.randint(1, 5), f"{cents // 100}.{cents % 100:02d}"))
    return out


# -- queries ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DemoQuery:
    """One query the demo runs: a title, the SQL against logic tables, its params."""

    title: str
    sql: str
    params: tuple[Any, ...] = ()
    note: str = ""


def demo_queries(user_id: int, order_id: int) -> list[DemoQuery]:
    """The demo's queries, for a user and an order that exist."""
    return [
        DemoQuery(
            "point lookup by user_id (shard key)",
            "SELECT order_id, order_no, status, amount, create_time FROM t_order "
            "WHERE user_id = %s ORDER BY create_time DESC LIMIT 5",
            (user_id,),
            "the user's slot names one shard",
        ),
        DemoQuery(
            "point lookup by order_id (gene id, no user_id)",
            "SELECT order_id, user_id, region_code, status, amount, create_time FROM t_order WHERE order_id = %s",
            (order_id,),
            "the id's low 10 bits are the user's slot: one shard without the user id",
        ),
        DemoQuery(
            "cross-shard page: latest orders, page 3",
            "SELECT order_id, user_id, amount, create_time FROM t_order "
            "ORDER BY create_time DESC LIMIT 20 OFFSET 40",
            (),
            "each shard returns its first 60 rows; the heap merge skips 40 and returns 20",
        ),
        DemoQuery(
            "GROUP BY report with AVG",
            "SELECT status, COUNT(*) AS orders, SUM(amount) AS total, AVG(amount) AS avg_amount, "
            "MIN(amount) AS min_amount, MAX(amount) AS max_amount FROM t_order GROUP BY status ORDER BY status",
            (),
            "AVG runs as SUM and COUNT on each shard and is divided after merging",
        ),
        DemoQuery(
            "join with the broadcast dictionary table",
            "SELECT r.name AS region, COUNT(*) AS orders, SUM(o.amount) AS total FROM t_order o "
            "JOIN t_dict_region r ON o.region_code = r.region_code "
            "WHERE o.status = %s GROUP BY r.name ORDER BY total DESC LIMIT 5",
            (3,),
            "every shard holds a copy of t_dict_region: each joins locally",
        ),
        DemoQuery(
            "binding join t_order ⨝ t_order_item of one user",
            "SELECT o.order_id, o.create_time, i.sku_id, i.quantity, i.price FROM t_order o "
            "JOIN t_order_item i ON o.user_id = i.user_id AND o.order_id = i.order_id "
            "WHERE o.user_id = %s ORDER BY o.create_time DESC, i.sku_id",
            (user_id,),
            "bound tables share their sharding: the join stays on one shard",
        ),
        DemoQuery(
            "check: every order is there",
            "SELECT COUNT(*) AS orders, COUNT(DISTINCT user_id) AS users, SUM(amount) AS total FROM t_order",
            (),
        ),
    ]


# -- output helpers -----------------------------------------------------------------------------


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, float):
        return f"{value:.2f}" if abs(value) < 1e15 else repr(value)
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat(" ", timespec="milliseconds")
    if isinstance(value, date):
        return value.isoformat()
    return str(value)


def _ms(seconds: float) -> str:
    ms = seconds * 1000
    return f"{ms:.2f} ms" if ms < 100 else f"{ms:,.0f} ms"


class _Progress:
    """A rich progress bar on stderr (or nothing with ``--no-progress``)."""

    def __init__(self, enabled: bool) -> None:
        self._progress: Any = None
        if enabled:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TaskProgressColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TaskProgressColumn(),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=Console(stderr=True),
            )

    def __enter__(self) -> _Progress:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def task(self, description: str, total: int) -> Callable[[int], None]:
        if self._progress is None:
            return lambda n: None
        task_id = self._progress.add_task(description, total=total)
        return lambda n: self._progress.advance(task_id, n)


# -- the command --------------------------------------------------------------------------------


@cli.command()
@click.option("--orders", "order_count", type=click.IntRange(1, 10_000_000), default=100_000, show_default=True,
              help="Orders to load.")
@click.option("--users", type=click.IntRange(1), default=None,
              help="Distinct user ids the orders belong to (default: orders / 10).")
@click.option("--shards", type=click.IntRange(2, 16), default=4, show_default=True,
              help="Data sources (SQLite files or MySQL databases), one table each.")
@click.option("--dir", "directory", type=click.Path(file_okay=False),
              help="Put the SQLite files (and demo.yaml) here and keep them (default: a temp dir, removed).")
@click.option("--mysql", "mysql_url", metavar="URL",
              help="Use MariaDB / MySQL instead: mysql://user[:password]@host[:port]; "
                   "creates databases PREFIX_0..N-1.")
@click.option("--prefix", default="ddm_demo", show_default=True, help="With --mysql: database name prefix.")
@click.option("--keep", is_flag=True, help="Keep the data (temp dir / MySQL databases) after the demo.")
@click.option("--drop", "drop_only", is_flag=True,
              help="With --mysql: only drop the demo databases a --keep run left behind, then exit.")
@click.option("--seed", type=int, default=2024, show_default=True, help="Seed of the generated data.")
@click.option("--repeat", type=click.IntRange(0, 1000), default=5, show_default=True,
              help="Warm runs per query after the first (their median is shown).")
@click.option("--no-progress", is_flag=True, help="No progress bar while loading.")
def demo(
    order_count: int,
    users: int | None,
    shards: int,
    directory: str | None,
    mysql_url: str | None,
    prefix: str,
    keep: bool,
    drop_only: bool,
    seed: int,
    repeat: int,
    no_progress: bool,
) -> None:
    """Build a sharded order schema, load ORDERS orders, run typical queries and time them.

    \b
      ddm demo                                    # 4 SQLite files in a temp dir
      ddm demo --dir ./demo-data                  # keep them (and demo.yaml) there
      ddm demo --mysql mysql://root@127.0.0.1:3306 --orders 20000
      ddm demo --mysql mysql://root@127.0.0.1:3306 --drop   # remove a --keep run's databases

    t_order and t_order_item are sharded by user_id (SLOTS, 1024 slots) and bound;
    t_dict_region is broadcast. order_id is a gene id: it carries the user's slot, so
    a lookup by order_id alone finds its shard. Every plan (data source + SQL) is printed.
    """
    if mysql_url is None and (drop_only or prefix != "ddm_demo"):
        raise click.UsageError("--drop and --prefix go with --mysql")
    if mysql_url is not None and directory is not None:
        raise click.UsageError("--dir is for SQLite files; --mysql creates databases instead")
    if not _IDENT.match(prefix):
        raise click.BadParameter(f"not a plain identifier: {prefix!r}", param_hint="--prefix")
    server = parse_mysql_url(mysql_url) if mysql_url is not None else None
    if server is not None and drop_only:
        dropped = _drop_databases(server, mysql_database_names(prefix, shards))
        click.echo(f"dropped {dropped} demo database{'s' if dropped != 1 else ''} "
                   f"({prefix}_0..{shards - 1}) on {server.host}:{server.port}")
        return
    users = users or max(1, order_count // 10)

    cleanup: list[Callable[[], None]] = []
    try:
        if server is not None:
            names = mysql_database_names(prefix, shards)
            _create_databases(server, names)
            if not keep:
                cleanup.append(lambda: None if _drop_databases(server, names) else None)
            sources: dict[str, Any] = {
                f"ds_{i}": {"url": server.url(db), "username": server.user, "password": server.password}
                for i, db in enumerate(names)
            }
            where = f"{shards} MariaDB/MySQL databases {names[0]}..{names[-1]} on {server.host}:{server.port}"
            yaml_dir = None
        else:
            if directory is not None:
                base = Path(directory)
                base.mkdir(parents=True, exist_ok=True)
            else:
                base = Path(tempfile.mkdtemp(prefix="ddm-demo-"))
                if not keep:
                    cleanup.append(lambda: shutil.rmtree(base, ignore_errors=True))
            sources = sqlite_sources(base, shards)
            where = f"{shards} SQLite files in {base.resolve()}"
            yaml_dir = base if (directory is not None or keep) else None
        _run(sources, where, yaml_dir, order_count, users, seed, repeat, not no_progress)
        if server is not None and keep:
            shown = f"mysql://{server.user}{':***' if server.password else ''}@{server.host}:{server.port}"
            click.echo(f"\nkept the databases; drop them with: ddm demo --mysql {shown} --drop"
                       + (f" --prefix {prefix}" if prefix != "ddm_demo" else "")
                       + (f" --shards {shards}" if shards != 4 else ""))
    finally:
        for step in reversed(cleanup):
            step()


def _create_databases(server: MySQLServer, names: Sequence[str]) -> None:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            for name in names:
                cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
                cur.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
    finally:
        conn.close()


def _drop_databases(server: MySQLServer, names: Sequence[str]) -> int:
    """Drop those of ``names`` that exist; returns how many did."""
    conn = server.connect()
    dropped = 0
    try:
        with conn.cursor() as cur:
            for name in names:
                cur.execute("SELECT 1 FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = %s", (name,))
                if cur.fetchone() is not None:
                    cur.execute(f"DROP DATABASE `{name}`")
                    dropped += 1
    finally:
        conn.close()
    return dropped


def _run(
    sources: dict[str, Any],
    where: str,
    yaml_dir: Path | None,
    order_count: int,
    users: int,
    seed: int,
    repeat: int,
    progress: bool,
) -> None:
    import ddm_core.dbapi as dbapi
    from ddm_core.ddl import execute_ddl, physical_ddl
    from ddm_core.execute import Executor
    from ddm_core.metadata import load_config
    from ddm_core.metadata.dump import dump_native

    config = load_config(demo_config(sources))
    click.echo(f"ddm demo: {where}")
    click.echo("  t_order, t_order_item: sharded by user_id (SLOTS, 1024 slots), bound; "
               "t_dict_region: broadcast; order_id: gene ids")
    if yaml_dir is not None:
        path = yaml_dir / "demo.yaml"
        path.write_text(dump_native(config), encoding="utf-8")
        click.echo(f"  configuration: {path.resolve()}  (try: ddm route -c {path} \"SELECT ...\")")

    started = time.perf_counter()
    statements = physical_ddl(config, DEMO_SCHEMA)
    execute_ddl(config, statements)
    click.echo(f"\nschema: {len(statements)} statements on {len(sources)} data sources "
               f"({_ms(time.perf_counter() - started)})")

    with Executor(config, timeout=30.0) as executor:
        conn = dbapi.connect(executor=executor, autocommit=True)  # bulk load: no transaction pinning shards
        try:
            with conn.cursor() as cur:
                cur.executemany("INSERT INTO t_dict_region (region_code, name) VALUES (%s, %s)", REGIONS)
                click.echo(f"dictionary: {len(REGIONS)} regions copied to every data source "
                           f"({cur.rowcount} rows written)")
            orders = generate_orders(order_count, users, seed)
            keys, items = _load(conn, orders, seed, progress)
        finally:
            conn.close()

        # Fresh index statistics: right after a bulk load MariaDB may still pick a full scan
        # + filesort for ORDER BY create_time LIMIT n (the router does not route ANALYZE: it is
        # sent to each data source's physical tables directly, like the schema).
        started = time.perf_counter()
        analyze = [
            (name, dialect_for(ds.primary.dialect).analyze_statement(("t_order", "t_order_item")))
            for name, ds in config.data_sources.items()
        ]
        execute_ddl(config, analyze)
        click.echo(f"statistics: ANALYZE on every data source ({_ms(time.perf_counter() - started)})")

        for query in demo_queries(orders[0][1], keys[len(keys) // 2]):
            _show_query(executor, query, repeat)
        click.echo(f"\nconnections still borrowed from the pools: {executor.borrowed()}")


def _load(conn: Any, orders: list[tuple[Any, ...]], seed: int, progress: bool) -> tuple[list[int], list[Any]]:
    keys: list[int] = []
    with _Progress(progress) as bar:
        advance = bar.task("loading t_order", len(orders))
        started = time.perf_counter()
        with conn.cursor() as cur:
            for start in range(0, len(orders), _LOAD_CHUNK):
                chunk = orders[start : start + _LOAD_CHUNK]
                cur.executemany(INSERT_ORDER, chunk)
                keys.extend(cur.generated_keys)
                advance(len(chunk))
        order_seconds = time.perf_counter() - started
        items = generate_items(orders, keys, seed)
        advance = bar.task("loading t_order_item", len(items))
        started = time.perf_counter()
        with conn.cursor() as cur:
            for start in range(0, len(items), _LOAD_CHUNK):
                chunk = items[start : start + _LOAD_CHUNK]
                cur.executemany(INSERT_ITEM, chunk)
                advance(len(chunk))
        item_seconds = time.perf_counter() - started
    click.echo(
        f"loaded {len(orders):,} orders in {order_seconds:.2f} s ({len(orders) / order_seconds:,.0f} rows/s) "
        f"and {len(items):,} items in {item_seconds:.2f} s — executemany, multi-row INSERTs of 1000 rows "
        f"split per shard; {len(set(keys)):,} distinct gene ids generated"
    )
    return keys, items


def _show_query(executor: Any, query: DemoQuery, repeat: int) -> None:
    click.echo(f"\n== {query.title} ==")
    click.echo(f"SQL:    {query.sql}")
    if query.params:
        click.echo(f"params: {list(query.params)}")
    started = time.perf_counter()
    with executor.execute(query.sql, query.params) as result:
        rows = result.fetchall()
        description = result.description
    first = time.perf_counter() - started
    warm = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        with executor.execute(query.sql, query.params) as result:
            result.fetchall()
        warm.append(time.perf_counter() - t0)
    plan = executor.router.route(query.sql, query.params)
    for line in plan_header(plan):
        click.echo(line)
    for line in render_table(("#", "data source", "SQL", "params"), unit_rows(plan), right=(0,)):
        click.echo("  " + line)
    for line in merge_lines(plan):
        click.echo(line)
    if query.note:
        click.echo(f"note: {query.note}")
    timing = f"time: {_ms(first)} first run (parse, route, run, merge)"
    if warm:
        timing += f", {_ms(statistics.median(warm))} warm (median of {len(warm)}, plan cached)"
    click.echo(timing)
    headers = [d[0] for d in description] if description else []
    shown = rows[:10]
    click.echo(f"rows: {len(rows)}" + (f" (first {len(shown)} shown)" if len(shown) < len(rows) else ""))
    if shown:
        for line in render_table(headers, [[_cell(v) for v in row] for row in shown]):
            click.echo("  " + line)

