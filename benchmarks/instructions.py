"""Instructions per point select, ddm-core vs direct PyMySQL, counted by valgrind (noise-free).

Wall-clock ratios on a shared 2-core machine move by ±20 % with whatever
else runs; instruction counts do not (callgrind counts what the client process
executes, not how long it waited). Each case runs twice under callgrind, with
0 and with ``N`` statements after the same set-up; the difference divided by
``N`` is the cost of one statement, set-up and interpreter start-up cancelled out.

Cases (one data source's point selects, SLOTS 4×4 layout, 3 columns, 1 row):

* ``direct`` — PyMySQL's own connection and cursor, the routed physical SQL
  (its routing, done while preparing the list, is left in the figure: ~10 k
  instructions, so the comparison favours direct slightly);
* ``ddm`` — ``ddm_core.connect(executor=...)`` cursor: route, pool, deadline, result;
* ``ddm, pure twins`` — the same with ``DDM_NO_EXTENSIONS=1`` (the result reader's
  pure-Python twin, ``_fast/wire_py.py``);
* ``ddm, stock PyMySQL reading`` — the same, with stock PyMySQL reading the results
  (no column-description cache, no ``wire`` reader: ``execute/pymysql_results.py`` off).

Usage (MariaDB on 127.0.0.1:3306, valgrind installed)::

    python benchmarks/instructions.py [N] [--update | --route] [--cases ddm,direct]

``--update`` counts ``UPDATE ... WHERE user_id = %s`` (no result columns: ddm-core's own
path without the result reading) instead of the point select. ``--route`` counts ``Router.route``
of the cached point select alone (no database): the compiled point path (``_fast/point``), its
pure twin, and the general path it hands calls to (the compiled path switched off).
"""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

CASES = {
    "direct": "direct PyMySQL",
    "ddm": "ddm-core facade",
    "ddm_pure": "ddm-core facade, pure twins",
    "ddm_stock": "ddm-core, stock PyMySQL reading",
}
ROUTE_CASES = {
    "general": "Router.route, general path",
    "compiled": "Router.route, compiled point path",
    "compiled_pure": "Router.route, point path's pure twin",
}


def _route_child(mode: str, n: int) -> None:
    from ddm_core.route import Router
    from test_bench_executor import POINT, slots_config

    router = Router(slots_config([f"ddm_insn_route_{i}" for i in range(4)]))
    if mode == "general":
        router._point_route = lambda sql, params: None  # type: ignore[method-assign]
    rnd = random.Random(1)
    for k in range(1, 3000):  # every node's parts built, as in a warm process
        router.route(POINT, (k,))
    for k in [rnd.randrange(1, 3000) for _ in range(n)]:
        router.route(POINT, (k,))


def _child(mode: str, n: int, tag: str, statement: str) -> None:
    if statement == "route":
        _route_child(mode, n)
        return
    import pymysql

    from ddm_core import dbapi
    from ddm_core.execute import Executor
    from test_bench_executor import POINT, UPDATE, slots_config

    sql = UPDATE if statement == "update" else POINT

    if mode == "ddm_stock":
        import ddm_core.execute.pymysql_results as results

        results.connection_class = lambda module: module.connections.Connection  # type: ignore[assignment]
    names = [f"ddm_insn_{tag}_{i}" for i in range(4)]
    # A deadline is armed as usual, long enough never to fire under valgrind's 50x slowdown on a busy machine.
    ex = Executor(slots_config(names), load_schema=False, timeout=120.0)
    keys = [k for k in range(1, 3000) if ex.router.route(POINT, (k,)).units[0].data_source == "ds_0"]
    rnd = random.Random(1)
    keys = [rnd.choice(keys) for _ in range(n + 50)]  # 50 warm-up statements in both runs
    if mode == "direct":
        cur = pymysql.connect(host="127.0.0.1", user="root", password="", database=names[0], autocommit=True).cursor()
        for unit in [ex.router.route(sql, (k,)).units[0] for k in keys]:
            cur.execute(unit.sql, unit.params)
            if sql is POINT:
                cur.fetchall()
    else:
        facade = dbapi.connect(executor=ex, autocommit=True).cursor()
        for k in keys:
            facade.execute(sql, (k,))
            if sql is POINT:
                facade.fetchall()
    ex.close()


def _databases(tag: str, statement: str) -> None:
    """``statement`` (``CREATE DATABASE`` / ``DROP DATABASE IF EXISTS``) for each of the 4 databases."""
    import pymysql

    admin = pymysql.connect(host="127.0.0.1", user="root", password="", autocommit=True)
    try:
        with admin.cursor() as cur:
            for i in range(4):
                cur.execute(f"{statement} ddm_insn_{tag}_{i}")
    finally:
        admin.close()


def _load(tag: str) -> None:
    from ddm_core import dbapi
    from ddm_core.execute import Executor
    from test_bench_executor import DDL, INSERT, make_rows, slots_config

    _databases(tag, "CREATE DATABASE")
    with Executor(slots_config([f"ddm_insn_{tag}_{i}" for i in range(4)])) as ex:
        ex.execute(DDL.format(table="t_order")).close()
        dbapi.connect(executor=ex, autocommit=True).cursor().executemany(INSERT, make_rows(1, 3000, 7))


def _count(mode: str, n: int, tag: str, out: Path, statement: str) -> int:
    env = {**os.environ, **({"DDM_NO_EXTENSIONS": "1"} if mode in ("ddm_pure", "compiled_pure") else {})}
    proc = subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out / f'{mode}.{n}.out'}",
         sys.executable, __file__, "--child", mode, str(n), tag, statement],
        capture_output=True, text=True, check=True, env=env,
    )
    found = re.search(r"refs:\s*([\d,]+)", proc.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count in valgrind's output:\n{proc.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5])
        return
    chosen = sys.argv[sys.argv.index("--cases") + 1].split(",") if "--cases" in sys.argv else None
    args = [a for a in sys.argv[1:] if a not in ("--update", "--route", "--cases") and a.isdigit()]
    statement = "update" if "--update" in sys.argv[1:] else "route" if "--route" in sys.argv[1:] else "point select"
    n = int(args[0]) if args else 1000
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is needed (apt-get install -y valgrind)")
    tag = uuid.uuid4().hex[:8]
    cases = ROUTE_CASES if statement == "route" else CASES
    if chosen is not None:  # some cases only (ratios need their baseline among them)
        cases = {m: label for m, label in cases.items() if m in chosen}
    if statement != "route":
        _load(tag)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            per = {m: (_count(m, n, tag, Path(tmp), statement) - _count(m, 0, tag, Path(tmp), statement)) / n
                   for m in cases}
    finally:
        if statement != "route":
            _databases(tag, "DROP DATABASE IF EXISTS")
    if statement == "route":
        print(f"| route of a cached point select, {n} calls (callgrind) | instructions/call | vs general |")
        print("| --- | ---: | ---: |")
        for mode, label in cases.items():
            ratio = f"{per[mode] / per['general']:.2f}×" if "general" in per else "—"
            print(f"| {label} | {per[mode]:,.0f} | {ratio} |")
        return
    print(f"| {statement}, {n} statements (callgrind) | instructions/statement | vs direct |")
    print("| --- | ---: | ---: |")
    for mode, label in cases.items():
        ratio = f"{per[mode] / per['direct']:.2f}×" if "direct" in per else "—"
        print(f"| {label} | {per[mode] / 1000:,.1f} k | {ratio} |")


if __name__ == "__main__":
    main()
