"""``ddm proxy``: a point select through the proxy vs straight to MariaDB, from PyMySQL clients.

A real ``ddm proxy`` subprocess (tests/test_proxy_support.py) serves
``t_order`` over 2 data sources × 4 tables on the machine's MariaDB, 2000 rows.
The direct baseline sends the statement the router would send (the physical
table, the same key) to the right database over PyMySQL. Each timed round of
a case follows one round of its baseline (pytest-benchmark ``setup``), so both
see the same load; every statement's latency is kept, and ``extra_info``
carries p50 / p99 (µs) and statements per second of both, and their ratios.
Nothing here asserts a speed (docs/proxy.md#measured-costs reads them).

=============================  =========================================  ================================
case                           measured                                   baseline
=============================  =========================================  ================================
point select, N threads        ``SELECT ... WHERE user_id = %s AND        the physical statement on
                               order_id = %s`` through the proxy          MariaDB directly
point select, thread hop       the same through a second proxy with       the same
                               ``inlineStatements: false``
point select, asyncio loop     the same through a proxy on asyncio's      the same
                               own loop (``--loop asyncio``)
probe, 1 thread                ``SELECT @@version`` (answered by the      point select directly
                               proxy: protocol + session, no backend)
executor in-process, 1 thread  the same point select on ddm-core's        point select directly
                               Executor (route + pool + driver)
sysbench oltp_point_select,    sysbench's C client (prepared statements)  the same on an unsharded
oltp_read_write, 1/8 threads   on ``sbtest1`` (2 x 2 tables) via the      ``sbtest1`` on MariaDB
                               proxy (read_write with ``--skip_trx=on``)
sysbench oltp_read_write with  the same, its transactions through a       the same, with its (local)
transactions, 1/8 threads      proxy with ``transactionMode: xa``         transactions, on MariaDB
sysbench oltp_point_select     the unsharded ``sbtest1`` through          the same on MariaDB
through a byte pipe, 1/8       benchmarks/byte_pipe.py (copies bytes,     directly
threads                        reads nothing): a hop's ceiling here
=============================  =========================================  ================================
"""

from __future__ import annotations

import contextlib
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

pytest.importorskip("mysql_mimic")  # the proxy extra

from services import fresh_mariadb_databases  # noqa: E402
from test_execute_support import ORDER_DDL  # noqa: E402
from test_proxy_support import ProxyProcess, connect, proxy_config, write_config  # noqa: E402

from ddm_core import Router, load_config  # noqa: E402
from ddm_core.execute import Executor  # noqa: E402

GROUP = "proxy"
ROWS = 2000
CALLS = 400  # statements per thread per round
POINT = "SELECT order_id, amount FROM t_order WHERE user_id = %s AND order_id = %s"
_OPEN: list[Any] = []  # client connections of the workers, closed with the module's proxy


class Setup:
    @classmethod
    def on_port(cls, other: Setup, port: int) -> Setup:
        """``other`` with clients pointed at another proxy on ``port``."""
        copy = cls.__new__(cls)
        copy.__dict__.update(other.__dict__)
        copy.proxy = _Port(port)  # type: ignore[assignment]
        return copy

    def __init__(self, proxy: ProxyProcess, config: dict[str, Any], databases: list[str],
                 hopping: ProxyProcess | None = None) -> None:  # fmt: skip
        self.proxy = proxy
        self.hopping = hopping  # the same proxy with inlineStatements: false (every statement on a worker)
        self.config = config
        self.databases = databases
        router = Router(load_config(config))
        # key -> (database, physical SQL): what the router sends, for the direct baseline
        self.direct: dict[int, tuple[str, str]] = {}
        for key in range(1, ROWS + 1):
            unit = router.route(POINT, (key, key)).units[0]
            self.direct[key] = (databases[int(unit.data_source.split("_")[1])], unit.sql)


@pytest.fixture(scope="module")
def setup() -> Iterator[Setup]:
    import pymysql

    with fresh_mariadb_databases(2) as databases:
        config = proxy_config(databases, workers=16, batchRows=500)
        config["pool"] = {"maxSize": 12, "minIdle": 4, "acquireTimeoutMs": 3000}
        with Executor(load_config(config), load_schema=False) as ex:
            ex.execute(ORDER_DDL).close()
            ex.execute("INSERT INTO t_order (order_id, user_id, amount) VALUES "
                       + ", ".join(f"({i}, {i}, {i % 97})" for i in range(1, ROWS + 1))).close()  # fmt: skip
        base = Path(tempfile.mkdtemp(prefix="ddm_bench_proxy_"))
        path = write_config(config, base / "proxy.yaml")
        hop_config = {**config, "proxy": {**config["proxy"], "inlineStatements": False}}
        proxy = ProxyProcess(path).start()
        hopping = ProxyProcess(write_config(hop_config, base / "hopping.yaml")).start()
        try:
            yield Setup(proxy, config, databases, hopping)
        finally:
            for conn in _OPEN:
                try:
                    conn.close()
                except pymysql.MySQLError:
                    pass
            _OPEN.clear()
            proxy.stop()
            hopping.stop()


def _direct_connections(s: Setup) -> dict[str, Any]:
    import pymysql

    return {db: pymysql.connect(host="127.0.0.1", port=3306, user="root", password="", database=db, autocommit=True)
            for db in s.databases}  # fmt: skip


class _Port:
    def __init__(self, port: int) -> None:
        self.port = port


class Latencies:
    """Per-statement seconds of every round after the warm-up ones."""

    def __init__(self, warmup_rounds: int) -> None:
        self.rounds: list[list[float]] = []
        self.walls: list[float] = []
        self.warmup = warmup_rounds

    def add(self, samples: list[float], wall: float) -> None:
        self.rounds.append(samples)
        self.walls.append(wall)

    def summary(self, statements: int) -> dict[str, float]:
        kept = [x for r in self.rounds[self.warmup :] for x in r]
        kept.sort()
        walls = self.walls[self.warmup :]
        return {
            "p50_us": kept[len(kept) // 2] * 1e6,
            "p99_us": kept[min(len(kept) - 1, int(len(kept) * 0.99))] * 1e6,
            "qps": statements / statistics.median(walls),
        }


def _threaded(make_worker: Callable[[int], Callable[[list[float]], None]], threads: int, into: Latencies) -> Callable[[], None]:
    """A round: ``threads`` workers (each with its own connection), all latencies into ``into``."""
    workers = [make_worker(t) for t in range(threads)]

    def run() -> None:
        samples: list[list[float]] = [[] for _ in range(threads)]
        pool = [threading.Thread(target=w, args=(samples[i],)) for i, w in enumerate(workers)]
        start = time.perf_counter()
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        into.add([x for part in samples for x in part], time.perf_counter() - start)

    return run


def _proxy_worker(s: Setup, sql: str | None = None) -> Callable[[int], Callable[[list[float]], None]]:
    def make(offset: int) -> Callable[[list[float]], None]:
        conn = connect(s.proxy.port, autocommit=True)
        _OPEN.append(conn)
        cur = conn.cursor()

        def work(out: list[float]) -> None:
            clock = time.perf_counter
            for i in range(CALLS):
                key = (offset * CALLS + i) % ROWS + 1
                t0 = clock()
                if sql is None:
                    cur.execute(POINT, (key, key))
                else:
                    cur.execute(sql)
                cur.fetchall()
                out.append(clock() - t0)

        return work

    return make


def _direct_worker(s: Setup) -> Callable[[int], Callable[[list[float]], None]]:
    def make(offset: int) -> Callable[[list[float]], None]:
        conns = _direct_connections(s)
        _OPEN.extend(conns.values())
        cursors = {db: c.cursor() for db, c in conns.items()}

        def work(out: list[float]) -> None:
            clock = time.perf_counter
            for i in range(CALLS):
                key = (offset * CALLS + i) % ROWS + 1
                db, sql = s.direct[key]
                t0 = clock()
                cursors[db].execute(sql, (key, key))
                cursors[db].fetchall()
                out.append(clock() - t0)

        return work

    return make


def _executor_worker(ex: Executor) -> Callable[[int], Callable[[list[float]], None]]:
    def make(offset: int) -> Callable[[list[float]], None]:
        def work(out: list[float]) -> None:
            clock = time.perf_counter
            for i in range(CALLS):
                key = (offset * CALLS + i) % ROWS + 1
                t0 = clock()
                with ex.execute(POINT, (key, key)) as result:
                    result.fetchall()
                out.append(clock() - t0)

        return work

    return make


def _paired(benchmark: Any, case: str, threads: int, case_make: Any, base_make: Any, rounds: int = 8) -> None:
    warmup = 2
    mine, base = Latencies(warmup), Latencies(warmup)
    case_round = _threaded(case_make, threads, mine)
    base_round = _threaded(base_make, threads, base)

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        start = time.perf_counter()
        base_round()
        base_seconds.append(time.perf_counter() - start)
        return (), {}

    base_seconds: list[float] = []
    benchmark.group = GROUP
    benchmark.extra_info.update(case=case, items=threads * CALLS, unit="statement", higher_is_better=False)
    benchmark.pedantic(case_round, setup=setup, rounds=rounds, warmup_rounds=warmup, iterations=1)
    statements = threads * CALLS
    a, b = mine.summary(statements), base.summary(statements)
    benchmark.extra_info.update(
        direct_median=statistics.median(base_seconds[warmup:]), direct_min=min(base_seconds[warmup:]),
        p50_us=a["p50_us"], p99_us=a["p99_us"], qps=a["qps"],
        direct_p50_us=b["p50_us"], direct_p99_us=b["p99_us"], direct_qps=b["qps"],
        added_p50_us=a["p50_us"] - b["p50_us"], qps_ratio=a["qps"] / b["qps"],
    )  # fmt: skip


@pytest.mark.parametrize("threads", [1, 8])
def test_point_select_through_the_proxy_vs_direct(benchmark: Any, setup: Setup, threads: int) -> None:
    _paired(benchmark, f"point select, {threads} thread(s): proxy vs direct", threads,
            _proxy_worker(setup), _direct_worker(setup))  # fmt: skip


@pytest.mark.parametrize("threads", [1, 8])
def test_point_select_with_the_thread_hop_vs_direct(benchmark: Any, setup: Setup, threads: int) -> None:
    assert setup.hopping is not None
    _paired(benchmark, f"point select, {threads} thread(s): proxy with inlineStatements false vs direct", threads,
            _proxy_worker(Setup.on_port(setup, setup.hopping.port)), _direct_worker(setup))  # fmt: skip


@contextlib.contextmanager
def _another_proxy(setup: Setup, *args: str, processes: int = 1) -> Iterator[Setup]:
    """The module's configuration served by one more ``ddm proxy`` started with ``args``."""
    other = ProxyProcess(setup.proxy.config_path, *args).start()
    try:
        for _ in range(400):  # every process listening before the first round
            if other.stderr.count("ddm proxy listening on") >= processes:
                break
            time.sleep(0.05)
        yield Setup.on_port(setup, other.port)
    finally:
        for conn in _OPEN:
            try:
                conn.close()
            except Exception:  # noqa: S110 - the proxy may have ended it
                pass
        _OPEN.clear()
        other.stop()


def test_point_select_8_threads_through_two_proxy_processes(benchmark: Any, setup: Setup) -> None:
    with _another_proxy(setup, "--processes", "2", processes=2) as two:
        _paired(benchmark, "point select, 8 threads: 2 proxy processes vs direct", 8,
                _proxy_worker(two), _direct_worker(setup))  # fmt: skip


@pytest.mark.parametrize("threads", [1, 8])
def test_point_select_on_the_asyncio_loop(benchmark: Any, setup: Setup, threads: int) -> None:
    with _another_proxy(setup, "--loop", "asyncio") as plain:
        _paired(benchmark, f"point select, {threads} thread(s): proxy on asyncio's own loop vs direct", threads,
                _proxy_worker(plain), _direct_worker(setup))  # fmt: skip


def test_probe_answered_by_the_proxy_vs_direct_point_select(benchmark: Any, setup: Setup) -> None:
    _paired(benchmark, "SELECT @@version via proxy vs direct point select", 1,
            _proxy_worker(setup, "SELECT @@version"), _direct_worker(setup))  # fmt: skip


def test_executor_in_process_vs_direct(benchmark: Any, setup: Setup) -> None:
    with Executor(load_config(setup.config), load_schema=False) as ex:
        _paired(benchmark, "point select, Executor in-process vs direct", 1,
                _executor_worker(ex), _direct_worker(setup))  # fmt: skip


# -- sysbench ---------------------------------------------------------------------------------------------
#
# sysbench's C client (libmariadb, prepared statements) against ``sbtest1`` sharded by ``id`` over
# 2 data sources x 2 tables through the proxy, and against the same table unsharded on MariaDB.
# ``oltp_read_write`` runs with ``--skip_trx=on`` on the default proxy: its transactions write random
# ids, so a local transaction reaches a second data source and is refused (1235). With its
# transactions it runs through a second proxy with ``transactionMode: xa`` (two-phase commit when a
# transaction wrote to both data sources). Skipped without sysbench.

SB_ROWS = 2000
SB_SECONDS = 10
SB_DDL = ("CREATE TABLE sbtest1 (id INTEGER NOT NULL, k INTEGER DEFAULT '0' NOT NULL, c CHAR(120) DEFAULT '' NOT NULL, "
          "pad CHAR(60) DEFAULT '' NOT NULL, PRIMARY KEY (id), KEY k_1 (k))")  # fmt: skip


def _sysbench(test: str, port: int, user: str, password: str, database: str, threads: int, *extra: str) -> dict[str, float]:
    import re
    import shutil
    import subprocess

    binary = shutil.which("sysbench")
    if binary is None:
        pytest.skip("sysbench is not installed (apt-get install sysbench)")
    done = subprocess.run(
        [binary, test, "--db-driver=mysql", "--mysql-host=127.0.0.1", f"--mysql-port={port}", f"--mysql-user={user}",
         f"--mysql-password={password}", f"--mysql-db={database}", "--mysql-ssl=off", "--tables=1",
         f"--table-size={SB_ROWS}", f"--threads={threads}", f"--time={SB_SECONDS}", "--percentile=99", "--histogram=on",
         *extra, "run"],
        capture_output=True, text=True, timeout=SB_SECONDS * 6, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    out = done.stdout

    def number(pattern: str) -> float:
        m = re.search(pattern, out)
        assert m is not None, out
        return float(m.group(1))

    # sysbench prints one percentile; the median is read off its latency histogram (value in ms | bar count)
    histogram = [(float(v), int(n)) for v, n in re.findall(r"^\s+([\d.]+) \|\**\s+(\d+)$", out, re.M)]
    half, seen, p50 = sum(n for _, n in histogram) / 2, 0, float("nan")
    for value, count in histogram:
        seen += count
        if seen >= half:
            p50 = value
            break
    return {"qps": number(r"queries:\s+\d+\s+\(([\d.]+) per sec"), "tps": number(r"transactions:\s+\d+\s+\(([\d.]+) per sec"),
            "avg_ms": number(r"avg:\s+([\d.]+)"), "p50_ms": p50, "p99_ms": number(r"99th percentile:\s+([\d.]+)"),
            "errors": number(r"ignored errors:\s+(\d+)")}  # fmt: skip


def sb_rows() -> list[tuple[int, int, str, str]]:
    """sysbench's ``sbtest1`` rows (``SB_ROWS`` of them), as its ``prepare`` makes them."""
    return [(i, (i * 7919) % SB_ROWS + 1, f"{i:0>11}-" * 10, f"{i:0>11}-" * 5) for i in range(1, SB_ROWS + 1)]


def fill_plain(database: str, rows: list[tuple[int, int, str, str]]) -> None:
    """An unsharded ``sbtest1`` holding ``rows`` in ``database`` on MariaDB (the direct side of every case)."""
    import pymysql

    values = ", ".join(["(%s, %s, %s, %s)"] * len(rows))
    direct = pymysql.connect(host="127.0.0.1", port=3306, user="root", password="", database=database, autocommit=True)
    try:
        with direct.cursor() as cur:
            cur.execute(SB_DDL)
            cur.execute("INSERT INTO sbtest1 (id, k, c, pad) VALUES " + values, [v for row in rows for v in row])
    finally:
        direct.close()


@pytest.fixture(scope="module")
def sbtest() -> Iterator[tuple[ProxyProcess, str, ProxyProcess]]:
    """A proxy over a sharded ``sbtest1`` and a plain ``sbtest1`` database on MariaDB, same rows; an XA proxy too."""
    with sharded_sbtest() as made:
        yield made


@contextlib.contextmanager
def sharded_sbtest() -> Iterator[tuple[ProxyProcess, str, ProxyProcess]]:
    """:func:`sbtest`'s proxies and plain database (benchmarks/proxy_ab.py runs them outside pytest)."""
    rows = sb_rows()
    with fresh_mariadb_databases(3) as databases:
        config = proxy_config(databases[:2], workers=16, batchRows=500)
        config["pool"] = {"maxSize": 12, "minIdle": 4, "acquireTimeoutMs": 3000}
        config["tables"].append({"logicTable": "sbtest1", "shardKey": "id", "algorithm": "slots", "slotCount": 1024,
                                 "shardCount": 2, "tablePerShard": 2, "databases": ["ds_0", "ds_1"], "tableKey": "id"})
        config["runtime"] = {"allowFullRoute": True, "allowDmlFullRoute": False, "fullRouteThreshold": 64}
        values = ", ".join(["(%s, %s, %s, %s)"] * len(rows))
        flat = [v for row in rows for v in row]
        with Executor(load_config(config), load_schema=False) as ex:
            ex.execute(SB_DDL).close()
            ex.execute("INSERT INTO sbtest1 (id, k, c, pad) VALUES " + values, flat).close()
        fill_plain(databases[2], rows)
        folder = Path(tempfile.mkdtemp(prefix="ddm_bench_sysbench_"))
        proxy = ProxyProcess(write_config(config, folder / "proxy.yaml")).start()
        two = ProxyProcess(folder / "proxy.yaml", "--processes", "2").start()
        SB_PROXIES["--processes 2"] = two
        config["proxy"]["transactionMode"] = "xa"
        xa = ProxyProcess(write_config(config, folder / "xa.yaml")).start()
        try:
            yield proxy, databases[2], xa
        finally:
            proxy.stop()
            two.stop()
            xa.stop()
            SB_PROXIES.clear()


#: (test, sysbench options): the point select, the read-only mix with its transactions and without them
#: (``--skip_trx=on``: each statement in autocommit), the read-write mix without transactions.
SB_CASES = {
    "oltp_point_select": ("oltp_point_select", ()),
    "oltp_read_only": ("oltp_read_only", ()),
    "oltp_read_only --skip_trx": ("oltp_read_only", ("--skip_trx=on",)),
    # sysbench's own default (1213 deadlock, 1020, 1205 lock wait) plus 1062: an autocommit DELETE and
    # INSERT of one id race between threads, on MariaDB directly too
    "oltp_read_write --skip_trx": ("oltp_read_write", ("--skip_trx=on", "--mysql-ignore-errors=1062,1213,1020,1205")),
}


#: Other proxies over the same tables (``sbtest``): ``--processes 2`` (SO_REUSEPORT, one event loop each).
SB_PROXIES: dict[str, ProxyProcess] = {}


@pytest.mark.parametrize(("case", "threads"), [("oltp_point_select", 1), ("oltp_point_select", 8), ("oltp_read_only", 8)])
def test_sysbench_through_two_proxy_processes(benchmark: Any, sbtest: tuple[ProxyProcess, str, ProxyProcess],
                                              case: str, threads: int) -> None:  # fmt: skip
    test, extra = SB_CASES[case]
    _sysbench_case(benchmark, f"sysbench {case}, {threads} thread(s): proxy --processes 2 vs direct",
                   test, SB_PROXIES["--processes 2"], sbtest[1], threads, extra)  # fmt: skip


@pytest.mark.parametrize(("case", "threads"), [
    *(("oltp_point_select", t) for t in (1, 2, 4, 8)),
    *((case, t) for case in ("oltp_read_only", "oltp_read_only --skip_trx", "oltp_read_write --skip_trx")
      for t in (1, 8)),
])  # fmt: skip
def test_sysbench_through_the_proxy_vs_direct(benchmark: Any, sbtest: tuple[ProxyProcess, str, ProxyProcess],
                                              case: str, threads: int) -> None:  # fmt: skip
    proxy, direct_db, _ = sbtest
    test, extra = SB_CASES[case]
    _sysbench_case(benchmark, f"sysbench {case}, {threads} thread(s): proxy vs direct", test, proxy, direct_db,
                   threads, extra)  # fmt: skip


@pytest.mark.parametrize("threads", [1, 8])
def test_sysbench_read_write_transactions_through_an_xa_proxy_vs_direct(
    benchmark: Any, sbtest: tuple[ProxyProcess, str, ProxyProcess], threads: int
) -> None:
    # Its transactions as written: BEGIN, 18 statements, COMMIT; a transaction whose writes reached both
    # data sources commits in two phases. Ignored (sysbench starts the transaction again): 1213, a
    # deadlock on one server rolled the XA transaction back; 3024, a statement's deadline (3 s) ended a
    # lock wait — a deadlock across the two servers, which neither sees, ends only so.
    _, direct_db, xa = sbtest
    _sysbench_case(benchmark, f"sysbench oltp_read_write with transactions, {threads} thread(s): XA proxy vs direct",
                   "oltp_read_write", xa, direct_db, threads, ("--mysql-ignore-errors=1062,1213,3024",))  # fmt: skip


@pytest.fixture(scope="module")
def byte_pipe() -> Iterator[tuple[int, int]]:
    """benchmarks/byte_pipe.py in a subprocess: (its port, its pid)."""
    import subprocess

    pipe = subprocess.Popen([sys.executable, str(Path(__file__).with_name("byte_pipe.py")), "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    try:
        assert pipe.stdout is not None
        line = pipe.stdout.readline()  # a bound on start-up: a pipe that never listens ends with its error
        assert line.startswith("listening on "), line + pipe.stdout.read()
        yield int(line.split()[-1]), pipe.pid
    finally:
        pipe.terminate()
        pipe.wait(30)


@pytest.mark.parametrize("threads", [1, 8])
def test_sysbench_point_select_through_a_byte_pipe_vs_direct(benchmark: Any, sbtest: tuple[ProxyProcess, str, ProxyProcess],
                                                            byte_pipe: tuple[int, int], threads: int) -> None:  # fmt: skip
    # The ceiling of any proxy here: the same unsharded sbtest1 as the direct run, through a hop that only copies bytes
    direct_db = sbtest[1]
    port, pid = byte_pipe
    _sysbench_case(benchmark, f"sysbench oltp_point_select, {threads} thread(s): byte pipe vs direct", "oltp_point_select",
                   _Side(port, "root", "", direct_db, pid), direct_db, threads, ())  # fmt: skip


class _Side:
    """Where sysbench's measured run connects (a port and its login) and the process whose CPU it counts."""

    def __init__(self, port: int, user: str, password: str, database: str, pid: int | None) -> None:
        self.port, self.user, self.password, self.database, self.pid = port, user, password, database, pid

    @classmethod
    def of(cls, proxy: ProxyProcess) -> _Side:
        """A ``ddm proxy``'s logic database; its CPU counted unless it forks (its children's is not the parent's)."""
        from test_proxy_support import PASSWORD, USER

        assert proxy.proc is not None
        return cls(proxy.port, USER, PASSWORD, "logic_db", None if "--processes" in proxy.extra_args else proxy.proc.pid)

    def cpu_seconds(self) -> float:
        """User + system CPU seconds of the process so far (/proc; its threads included)."""
        assert self.pid is not None
        return _cpu_seconds(self.pid)


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (/proc; its threads included)."""
    import os

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _mariadb_pid() -> int | None:
    """The MariaDB server's process on this machine (its pid file), or ``None`` where it cannot be read."""
    import pymysql

    conn = pymysql.connect(host="127.0.0.1", port=3306, user="root", password="")
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT @@pid_file")
            (pid_file,) = cur.fetchone()
        pid = int(Path(pid_file).read_text().split()[0])
        _cpu_seconds(pid)
        return pid
    except (OSError, ValueError, IndexError):
        return None
    finally:
        conn.close()


def _sysbench_case(benchmark: Any, case: str, test: str, proxy: ProxyProcess | _Side, direct_db: str, threads: int,
                   extra: tuple[str, ...]) -> None:  # fmt: skip
    side = proxy if isinstance(proxy, _Side) else _Side.of(proxy)
    figures: dict[str, dict[str, float]] = {}

    server = _mariadb_pid()

    def measured(name: str, port: int, user: str, password: str, database: str, pid: int | None) -> None:
        """One sysbench run; per transaction the CPU of the process ``pid`` (``None``: not counted) and, where it
        can be read, the MariaDB server's: what a shared machine's load moves much less than the QPS."""
        cpu = 0.0 if pid is None else _cpu_seconds(pid)
        backend = 0.0 if server is None else _cpu_seconds(server)
        figures[name] = got = _sysbench(test, port, user, password, database, threads, *extra)
        transactions = max(got["tps"] * SB_SECONDS, 1)
        if pid is not None:
            got["cpu_us_per_tx"] = (_cpu_seconds(pid) - cpu) * 1e6 / transactions
        if server is not None:  # a statement through a proxy costs the server more: its threads wait longer
            got["mariadb_cpu_us_per_tx"] = (_cpu_seconds(server) - backend) * 1e6 / transactions

    def run() -> None:  # one sysbench run each, proxy then direct, in the same minute
        measured("proxy", side.port, side.user, side.password, side.database, side.pid)
        measured("direct", 3306, "root", "", direct_db, None)

    benchmark.group = GROUP + " sysbench"
    benchmark.extra_info.update(case=case, items=1, unit="run", higher_is_better=False)
    benchmark.pedantic(run, rounds=1, iterations=1)
    for side_name, f in figures.items():
        benchmark.extra_info.update({f"{side_name}_{k}": v for k, v in f.items()})
    benchmark.extra_info["qps_ratio"] = figures["proxy"]["qps"] / figures["direct"]["qps"]
