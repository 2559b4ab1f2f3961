"""The proxy process's own work per multi-unit range read (sysbench ``oltp_read_only``'s four ranges).

``sbtest1`` sharded by ``id`` over 2 data sources × 2 tables (slots), as ``test_bench_proxy.py``'s sysbench
fixture; each range of 100 ids spans all 4 tables. One client sends ``N`` reads of one kind, then the
proxy's cost per read is printed: ``--callgrind`` (machine instructions, valgrind; the default) or
``--opcodes`` (interpreted opcodes by part and function, proxy_cpu.py's tracer).

Usage (MariaDB on 127.0.0.1:3306)::

    python benchmarks/range_cpu.py [N] [--kind simple|sum|order|distinct] [--prepared] [--tx | --pinned | --oltp | --sysbench [--skip-trx]] [--per-table] [--opcodes | --strace] [--src DIR]

``--prepared``: mysql-connector's C extension, prepared (COM_STMT_EXECUTE, binary rows, as sysbench);
else PyMySQL (text). ``--tx``: each read inside BEGIN … COMMIT (sysbench's default; the transaction's
statements counted too, divide by hand), else autocommit (sysbench ``--skip_trx``). ``--pinned``: every read
inside one transaction whose first statements (point selects) pinned both data sources, as sysbench's point
selects do before its range reads (BEGIN, the pins and COMMIT are counted once per ``N`` reads). ``--oltp``:
each of the ``N`` is a whole ``oltp_read_only`` transaction instead (BEGIN, 10 point selects, its 4 range reads
— simple, sum, order, distinct —, COMMIT): the figure is per transaction. ``--sysbench [--skip-trx]``: the
``N`` transactions are sysbench's own (``oltp_read_only``, one thread; statements prepared once per connection,
as sysbench's benchmark runs them, where mysql-connector's cursor prepares a statement again whenever its
text changes): the figure is per transaction. ``--strace``: the proxy's system calls per read (``strace -c``, proxy_cpu.py's). ``--per-table``: the proxy sends
one unit per physical table (``runtime.oneUnitPerDataSource: false``) instead of one UNION ALL per data
source. ``--src DIR``: the proxy imports
``ddm_core`` from ``DIR`` (a copy of another version's ``src/``), as proxy_cpu.py's; the ``--callgrind`` run
prints the proxy's stop line too (what ran on the loop, warm-up included).
"""

from __future__ import annotations

import random
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import proxy_cpu  # noqa: E402
from services import fresh_mariadb_databases  # noqa: E402
from test_proxy_support import PASSWORD, USER, connect, proxy_config, write_config  # noqa: E402

from ddm_core import load_config  # noqa: E402
from ddm_core.execute import Executor  # noqa: E402

ROWS = 10_000
RANGE = 100
DDL = ("CREATE TABLE sbtest1 (id INTEGER NOT NULL, k INTEGER DEFAULT '0' NOT NULL, c CHAR(120) DEFAULT '' NOT NULL, "
       "pad CHAR(60) DEFAULT '' NOT NULL, PRIMARY KEY (id), KEY k_1 (k))")  # fmt: skip
KINDS = {
    "simple": "SELECT c FROM sbtest1 WHERE id BETWEEN %s AND %s",
    "sum": "SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN %s AND %s",
    "order": "SELECT c FROM sbtest1 WHERE id BETWEEN %s AND %s ORDER BY c",
    "distinct": "SELECT DISTINCT c FROM sbtest1 WHERE id BETWEEN %s AND %s ORDER BY c",
    "point": "SELECT c FROM sbtest1 WHERE id = %s",
}
SYSBENCH_RANGES = ("simple", "sum", "order", "distinct")  # oltp_read_only's range reads, in its order


def sbtest_config(databases: list[str]) -> dict[str, Any]:
    config = proxy_config(databases, workers=16, batchRows=500)
    config["pool"] = {"maxSize": 12, "minIdle": 4, "acquireTimeoutMs": 3000}
    config["tables"].append({"logicTable": "sbtest1", "shardKey": "id", "algorithm": "slots", "slotCount": 1024,
                             "shardCount": 2, "tablePerShard": 2, "databases": ["ds_0", "ds_1"], "tableKey": "id"})
    config["runtime"] = {"allowFullRoute": True, "allowDmlFullRoute": False, "fullRouteThreshold": 64}
    if "--per-table" in sys.argv:  # one unit per physical table, not one UNION ALL per data source
        config["runtime"]["oneUnitPerDataSource"] = False
    return config


def fill(config: dict[str, Any]) -> None:
    rows = [(i, (i * 7919) % ROWS + 1, f"{i % 997:0>11}-" * 10, f"{i:0>11}-" * 5) for i in range(1, ROWS + 1)]
    with Executor(load_config(config), load_schema=False) as ex:
        ex.execute(DDL).close()
        for start in range(0, ROWS, 2000):
            chunk = rows[start:start + 2000]
            ex.execute("INSERT INTO sbtest1 (id, k, c, pad) VALUES " + ", ".join(["(%s, %s, %s, %s)"] * len(chunk)),
                       [v for row in chunk for v in row]).close()  # fmt: skip


def make_client(kind: str) -> Any:
    sql = KINDS[kind]
    tx = "--tx" in sys.argv
    pinned = "--pinned" in sys.argv
    oltp = "--oltp" in sys.argv

    def client(port: int, count: int) -> None:
        if "--sysbench" in sys.argv:
            sysbench(port, count)
            return
        rnd = random.Random(7)
        if "--prepared" in sys.argv:
            from mysql import connector

            conn = connector.connect(host="127.0.0.1", port=port, user=USER, password=PASSWORD, database="logic_db",
                                     use_pure=False, autocommit=True, ssl_disabled=True)  # fmt: skip
            cur = conn.cursor(prepared=True)
            text = sql.replace("%s", "?")
        else:
            conn = connect(port, autocommit=True)
            cur = conn.cursor()
            text = sql
        if pinned:  # ids 1..8 land on both data sources (slots over 2 x 2 tables)
            cur.execute("BEGIN")
            for i in range(1, 9):
                cur.execute(KINDS["point"] if text is sql else KINDS["point"].replace("%s", "?"), (i,))
                cur.fetchall()
        point = KINDS["point"] if text is sql else KINDS["point"].replace("%s", "?")
        for _ in range(count):
            low = rnd.randint(1, ROWS - RANGE)
            if tx or oltp:
                cur.execute("BEGIN")
            for _ in range(10 if oltp else 0):  # oltp_read_only's point selects, then its range reads
                cur.execute(point, (rnd.randint(1, ROWS),))
                cur.fetchall()
            for ranged in ([KINDS[k] if text is sql else KINDS[k].replace("%s", "?") for k in SYSBENCH_RANGES] if oltp
                           else [text]):  # fmt: skip
                cur.execute(ranged, (low, low + RANGE - 1)[: ranged.count("%s") + ranged.count("?")])
                cur.fetchall()
            if tx or oltp:
                cur.execute("COMMIT")
        if pinned:
            cur.execute("COMMIT")
        conn.close()

    return client


def sysbench(port: int, count: int) -> None:
    """``count`` of sysbench's own ``oltp_read_only`` transactions on one thread (its C client: statements
    prepared once per connection, BEGIN and COMMIT included, as the sysbench benchmark sends them)."""
    import subprocess

    extra = ["--skip_trx=on"] if "--skip-trx" in sys.argv else []
    subprocess.run(["sysbench", "oltp_read_only", "--db-driver=mysql", "--mysql-host=127.0.0.1", f"--mysql-port={port}",
                    f"--mysql-user={USER}", f"--mysql-password={PASSWORD}", "--mysql-db=logic_db", "--mysql-ssl=off",
                    "--tables=1", f"--table-size={ROWS}", "--threads=1", "--time=0", f"--events={count}", *extra, "run"],
                   check=True, capture_output=True, timeout=3600)  # fmt: skip


def main() -> None:
    proxy_cpu.take_src()  # --src DIR, as proxy_cpu.py takes it
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    kind = sys.argv[sys.argv.index("--kind") + 1] if "--kind" in sys.argv else "simple"
    args = [a for a in args if a != kind]
    count = int(args[0]) if args else 200
    with fresh_mariadb_databases(2) as databases:
        config = sbtest_config(databases)
        fill(config)
        path = write_config(config, Path(tempfile.mkdtemp(prefix="ddm_range_cpu_")) / "proxy.yaml")
        proxy_cpu.client = make_client(kind)  # proxy_cpu's drivers call its module-level client
        print(f"{kind} ({'binary' if '--prepared' in sys.argv else 'text'}, {'in BEGIN/COMMIT' if '--tx' in sys.argv else 'on pins' if '--pinned' in sys.argv else 'oltp_read_only transactions' if '--oltp' in sys.argv else 'sysbench oltp_read_only transactions' if '--sysbench' in sys.argv else 'autocommit'}):")
        if "--opcodes" in sys.argv:
            proxy_cpu.opcodes(path, count)
        elif "--strace" in sys.argv:
            _system_calls(path, count)
        else:
            proxy_cpu.callgrind(path, count)


def _system_calls(config_path: Path, count: int) -> None:
    """``--strace``: the proxy's system calls per read (or transaction), after a warm-up (proxy_cpu.py's)."""
    proxy = proxy_cpu.ProxyProcess(config_path).start()
    try:
        assert proxy.proc is not None
        proxy_cpu.client(proxy.port, 50)
        proxy_cpu.system_calls(proxy.proc.pid, proxy.port, count)
    finally:
        proxy.stop()


if __name__ == "__main__":
    main()
