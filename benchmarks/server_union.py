"""The MariaDB server's CPU per range read of 100 ids, on one table and on the same rows split over two.

What sharding costs the server itself, whatever the proxy does: sysbench's ``oltp_read_only`` range read
(``SELECT c FROM … WHERE id BETWEEN ? AND ?+99``) run by sysbench's C client (a Lua script of its own, text
statements) straight on MariaDB, in three forms over the same 2 000 rows:

* ``one``: one table holding them all (the direct baseline's read);
* ``union``: two tables holding half each, read in one ``(SELECT …) UNION ALL (SELECT …)`` (what the proxy sends
  a data source holding two of a read's tables);
* ``two``: the same two tables read by two statements, one after the other (one unit per table).

The server's CPU per read (/proc, the process ``@@pid_file`` names) is printed per form
(docs/proxy.md#what-a-read-only-transaction-costs-the-machine-2026-12-07-afternoon).

Usage (MariaDB on 127.0.0.1:3306, sysbench installed)::

    python benchmarks/server_union.py [THREADS]
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import test_bench_proxy as bench  # noqa: E402
from services import fresh_mariadb_databases  # noqa: E402

SECONDS = 5
#: Each event one range read in the form the environment's FORM names.
SCRIPT = """
function thread_init() con = sysbench.sql.driver():connect() end
local form = os.getenv("FORM")
function event()
  local a = math.random(1, 1900)
  local b = a + 99
  if form == "union" then
    con:query(string.format("(SELECT c FROM t0 WHERE id BETWEEN %d AND %d) UNION ALL "
                            .. "(SELECT c FROM t1 WHERE id BETWEEN %d AND %d)", a, b, a, b))
  elseif form == "two" then
    con:query(string.format("SELECT c FROM t0 WHERE id BETWEEN %d AND %d", a, b))
    con:query(string.format("SELECT c FROM t1 WHERE id BETWEEN %d AND %d", a, b))
  else
    con:query(string.format("SELECT c FROM sbtest1 WHERE id BETWEEN %d AND %d", a, b))
  end
end
"""


def _split(database: str) -> None:
    """``t0`` and ``t1``: ``sbtest1``'s even and odd ids."""
    import pymysql

    conn = pymysql.connect(host="127.0.0.1", port=3306, user="root", password="", database=database, autocommit=True)
    try:
        with conn.cursor() as cur:
            for table, parity in (("t0", 0), ("t1", 1)):
                cur.execute(f"CREATE TABLE {table} LIKE sbtest1")
                cur.execute(f"INSERT INTO {table} SELECT * FROM sbtest1 WHERE id % 2 = {parity}")
    finally:
        conn.close()


def main(threads: int) -> None:
    server = bench._mariadb_pid()
    if server is None:
        raise SystemExit("the MariaDB server's process cannot be read here (@@pid_file, /proc)")
    script = Path(tempfile.mkdtemp(prefix="ddm_server_union_")) / "range.lua"
    script.write_text(SCRIPT)
    with fresh_mariadb_databases(1) as (database,):
        bench.fill_plain(database, bench.sb_rows())
        _split(database)
        print(f"{'form':>6} {'reads/s':>9} {'server CPU/read':>16}")
        for form in ("one", "union", "two", "one", "union", "two"):
            before = bench._cpu_seconds(server)
            done = subprocess.run(
                ["sysbench", str(script), "--db-driver=mysql", "--mysql-host=127.0.0.1", "--mysql-user=root",
                 f"--mysql-db={database}", f"--threads={threads}", f"--time={SECONDS}", "run"],
                capture_output=True, text=True, check=True, env={**os.environ, "FORM": form},
            )  # fmt: skip
            spent = bench._cpu_seconds(server) - before
            found = re.search(r"total number of events:\s+(\d+)", done.stdout)
            assert found is not None, done.stdout
            reads = int(found.group(1))
            print(f"{form:>6} {reads / SECONDS:>9,.0f} {spent * 1e6 / max(reads, 1):>13.1f} µs")


if __name__ == "__main__":
    main(int(sys.argv[1]) if sys.argv[1:] else 8)
