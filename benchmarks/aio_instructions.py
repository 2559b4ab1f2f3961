"""Instructions per point select on the ``AsyncExecutor`` vs direct asyncmy, counted by valgrind (noise-free).

As ``instructions.py`` does for the thread facade: each case runs twice under callgrind, with 0
and with ``N`` statements after the same set-up, and the difference divided by ``N`` is the client
cost of one statement (set-up, imports and interpreter start-up cancelled out). Both the one-task
and the 64-task cases of ``test_bench_aio.py`` are counted, so what a statement costs only under
concurrency (pool waits, wake-ups, the loop's select calls with many sockets ready) shows up as the
difference between the two.

Cases (SLOTS 4×4 layout, 3 columns, 1 row, ``PYTHONHASHSEED=0``, ``runtime.slowSqlMs`` 0: see ``_run``):

* ``direct`` — one task, an asyncmy cursor on the routed physical SQL (routing done while
  preparing the list);
* ``ddm`` — one task, ``await ex.execute(POINT, (k,))`` + ``await r.fetchall()``;
* ``direct64`` / ``ddm64`` — 64 tasks, task *t* reading keys of data source *t* mod 4 (the
  baseline with one asyncmy connection per task; the executor with pools of 16 per data source).

Usage (MariaDB on 127.0.0.1:3306, valgrind installed)::

    python benchmarks/aio_instructions.py [N] [--uvloop] [--cases ddm,ddm64] [--callgrind-dir DIR]

``--callgrind-dir`` keeps the callgrind files (for ``callgrind_annotate``).
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

CASES = {
    "direct": "direct asyncmy, 1 task",
    "ddm": "AsyncExecutor, 1 task",
    "direct64": "direct asyncmy, 64 tasks (a connection each)",
    "ddm64": "AsyncExecutor, 64 tasks (pools of 16)",
}
TASKS = 64
POOL = {"maxSize": 16, "minIdle": 16, "acquireTimeoutMs": 3000}


async def _run(mode: str, n: int, tag: str) -> None:
    import asyncmy

    from ddm_core.aio import AsyncExecutor
    from test_bench_executor import POINT, slots_config

    names = [f"ddm_insn_{tag}_{i}" for i in range(4)]
    config = slots_config(names, pool=POOL)
    # Under valgrind 64 tasks make each statement wait past runtime.slowSqlMs (200 ms) for its turn, and the
    # slow-SQL log's warning would be counted as a statement's cost; off (0) the check itself still runs.
    config = replace(config, runtime=replace(config.runtime, slow_sql_ms=0))
    # A deadline is armed as usual, long enough never to fire under valgrind's slowdown on a busy machine.
    ex = AsyncExecutor(config, load_schema=False, timeout=120.0, replica_monitor=False, instance_role=None)
    await ex.warm_up()
    tasks = TASKS if mode.endswith("64") else 1
    by_source: dict[str, list[int]] = {}
    for k in range(1, 3001):
        by_source.setdefault(ex.router.route(POINT, (k,)).units[0].data_source, []).append(k)
    sources = sorted(by_source)
    rnd = random.Random(1)
    per_task = -(-n // tasks) + 20  # 20 warm-up statements per task in both runs
    task_keys = [[rnd.choice(by_source[sources[t % 4] if tasks > 1 else "ds_0"]) for _ in range(per_task)]
                 for t in range(tasks)]  # fmt: skip
    conns: list[Any] = []

    async def direct_task(keys: list[int], database: str) -> None:
        conn = await asyncmy.connect(host="127.0.0.1", port=3306, user="root", password="", database=database,
                                     autocommit=True, charset="utf8mb4")  # fmt: skip
        conns.append(conn)
        cur = conn.cursor()
        statements = [ex.router.route(POINT, (k,)).units[0] for k in keys]
        await started.wait()
        for unit in statements:
            await cur.execute(unit.sql, unit.params)
            await cur.fetchall()

    async def ddm_task(keys: list[int]) -> None:
        await started.wait()
        for k in keys:
            r = await ex.execute(POINT, (k,))
            await r.fetchall()

    started = asyncio.Event()
    if mode.startswith("direct"):
        work = [direct_task(keys, names[int((sources[t % 4] if tasks > 1 else "ds_0")[3:])])
                for t, keys in enumerate(task_keys)]  # fmt: skip
    else:
        work = [ddm_task(keys) for keys in task_keys]
    running = [asyncio.ensure_future(w) for w in work]
    await asyncio.sleep(0.5 if mode.startswith("direct") else 0)  # the direct connections open first
    while mode.startswith("direct") and len(conns) < tasks:
        await asyncio.sleep(0.05)
    started.set()
    await asyncio.gather(*running)
    for conn in conns:
        await conn.ensure_closed()
    await ex.close()


def _child(mode: str, n: int, tag: str, loop_kind: str) -> None:
    if loop_kind == "uvloop":
        import uvloop

        uvloop.run(_run(mode, n, tag))
    else:
        asyncio.run(_run(mode, n, tag))


def _count(mode: str, n: int, tag: str, out: Path, loop_kind: str) -> int:
    # OpenBLAS (numpy, imported by ddm_core._fast) spins idle threads whose instructions callgrind counts too:
    # one thread, so that a slower run does not count more of them.
    env = {**os.environ, "PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1"}
    # Once without valgrind first: the bytecode caches are written then, not in one of the two counted runs.
    subprocess.run([sys.executable, __file__, "--child", mode, "0", tag, loop_kind], check=True, env=env,
                   capture_output=True)  # fmt: skip
    proc = subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out / f'{mode}.{loop_kind}.{n}.out'}",
         sys.executable, __file__, "--child", mode, str(n), tag, loop_kind],
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    found = re.search(r"refs:\s*([\d,]+)", proc.stderr)
    if proc.returncode or found is None:
        raise RuntimeError(f"{mode} under callgrind failed:\n{proc.stderr[-3000:]}")
    return int(found.group(1).replace(",", ""))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5])
        return
    from instructions import _databases, _load  # the same 4 databases of 3 000 orders

    args = sys.argv[1:]
    loop_kind = "uvloop" if "--uvloop" in args else "asyncio"
    cases = list(CASES)
    keep: Path | None = None
    positional = []
    i = 0
    while i < len(args):
        if args[i] == "--cases":
            cases = args[i + 1].split(",")
            i += 1
        elif args[i] == "--callgrind-dir":
            keep = Path(args[i + 1])
            i += 1
        elif not args[i].startswith("--"):
            positional.append(args[i])
        i += 1
    n = int(positional[0]) if positional else 1280
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is needed (apt-get install -y valgrind)")
    tag = uuid.uuid4().hex[:8]
    _load(tag)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            out = keep or Path(tmp)
            out.mkdir(parents=True, exist_ok=True)
            per = {}
            for m in cases:
                tasks = TASKS if m.endswith("64") else 1
                done = tasks * -(-n // tasks)
                per[m] = (_count(m, n, tag, out, loop_kind) - _count(m, 0, tag, out, loop_kind)) / done
                print(f"{m}: {per[m] / 1000:,.1f} k", file=sys.stderr, flush=True)
    finally:
        _databases(tag, "DROP DATABASE IF EXISTS")
    print(f"| point select, {n} statements, {loop_kind} (callgrind) | instructions/statement |")
    print("| --- | ---: |")
    for mode in cases:
        print(f"| {CASES[mode]} | {per[mode] / 1000:,.1f} k |")


if __name__ == "__main__":
    main()
