"""The proxy process's own work per point select: interpreted instructions (deterministic) and CPU time.

Wall-clock figures of ``test_bench_proxy.py`` move by ±30 % on this shared
2-core machine; what the proxy process itself executes per statement does
much less. One PyMySQL client (this script) sends ``N`` point selects, values
in the text, to a ``ddm proxy`` subprocess over ``t_order`` (2 data sources ×
4 tables, 2000 rows); ``perf stat -e instructions:u,task-clock -p PID`` counts
the proxy's CPU time (and user-space instructions where the machine has
hardware counters) over exactly those statements, after a warm-up (plans
cached, the one-unit path on), and /proc its user and system time.
``--threads`` prints each proxy thread's share.

``--perf-record`` also samples the proxy with ``perf record`` (``/tmp/proxy.perf``;
``perf report --sort dso`` splits interpreter, kernel and compiled modules).

Usage (MariaDB on 127.0.0.1:3306, perf allowed for the user's own processes)::

    python benchmarks/proxy_cpu.py [N] [--opcodes | --callgrind | --strace] [--perf-record] [--threads] [--hop] [--prepared | --binary] [--src DIR]

``--strace``: instead, the proxy's system calls per statement (``strace -c``, every thread; the client's
statements slow down under it, the counts do not). ``--callgrind``: instead, the proxy runs under valgrind's callgrind and the machine instructions it
executes per statement are printed (interpreter, compiled modules, C libraries; not the kernel) —
deterministic like the opcodes, and counting what the opcodes do not (uvloop, mimic's mypyc code, the
``_fast`` units). ``--opcodes``: instead, the proxy runs traced (``sys.settrace`` with ``f_trace_opcodes``) and
the interpreted opcodes per statement are printed by part and by function (the top 40, or ``DDM_OPCODES_TOP``) — deterministic,
the figure to compare before / after. ``--hop``: the proxy with ``inlineStatements: false``
(every statement on a worker thread). ``--binary``: a raw-socket client executes a prepared statement as
libmariadb (sysbench's client) does: parameter types on the first execute only, no query attributes, no
COM_STMT_RESET. ``--prepared``: the client prepares the statement
(mysql-connector's C extension, ``prepared=True``: COM_STMT_EXECUTE, binary rows). ``--src DIR``: the proxy imports ``ddm_core`` from
``DIR`` (a copy of another version's ``src/``), to compare two versions in one session.
"""

from __future__ import annotations

import collections
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from services import fresh_mariadb_databases  # noqa: E402
from test_execute_support import ORDER_DDL  # noqa: E402
from test_proxy_support import ProxyProcess, connect, proxy_config, write_config  # noqa: E402

from ddm_core import load_config  # noqa: E402
from ddm_core.execute import Executor  # noqa: E402

ROWS = 2000
POINT = "SELECT order_id, amount FROM t_order WHERE user_id = %s AND order_id = %s"

def client(port: int, count: int) -> None:
    if "--prepared" in sys.argv:  # COM_STMT_EXECUTE and the binary protocol, as sysbench's C client
        return _prepared_client(port, count)
    if "--binary" in sys.argv:
        return _binary_client(port, count)
    conn = connect(port, autocommit=True)
    cur = conn.cursor()
    for i in range(count):
        key = i % ROWS + 1
        cur.execute(POINT, (key, key))
        cur.fetchall()
    conn.close()


def _binary_client(port: int, count: int) -> None:
    from raw_mysql import COM_STMT_EXECUTE, RawClient, execute_payload, longlong
    from test_proxy_support import PASSWORD, USER

    with RawClient(port) as client:
        client.login(USER, PASSWORD, database="logic_db")
        stmt_id = client.prepare(POINT.replace("%s", "?"))
        for i in range(count):
            key = i % ROWS + 1
            client.command(COM_STMT_EXECUTE, execute_payload(stmt_id, [longlong(key), longlong(key)], types=i == 0))
            client.response()


def _prepared_client(port: int, count: int) -> None:
    from mysql import connector
    from test_proxy_support import PASSWORD, USER

    conn = connector.connect(host="127.0.0.1", port=port, user=USER, password=PASSWORD, database="logic_db",
                             use_pure=False, autocommit=True, ssl_disabled=True)  # fmt: skip
    cur = conn.cursor(prepared=True)
    sql = POINT.replace("%s", "?")
    for i in range(count):
        key = i % ROWS + 1
        cur.execute(sql, (key, key))
        cur.fetchall()
    conn.close()


def perf_count(pid: int, port: int, count: int) -> dict[str, float]:
    perf = subprocess.Popen(["perf", "stat", "-x", ",", "-e", "instructions:u,task-clock", "-p", str(pid)],
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    time.sleep(0.3)  # perf attached
    before = _user_system(pid)
    start = time.perf_counter()
    client(port, count)
    wall = time.perf_counter() - start
    user, system = (b - a for a, b in zip(before, _user_system(pid)))
    perf.send_signal(2)
    _, err = perf.communicate()
    values = {}
    for line in err.splitlines():
        fields = line.split(",")
        if len(fields) > 3:
            values[fields[2]] = float(fields[0]) if fields[0][:1].isdigit() else float("nan")  # no PMU: <not supported>
    # perf's window includes ~0.3 s idle before the client: the idle loop costs next to nothing
    return {"instructions": values["instructions:u"] / count, "cpu_us": values["task-clock"] * 1000 / count,
            "wall_us": wall * 1e6 / count, "user_us": user * 1e6 / count, "system_us": system * 1e6 / count}  # fmt: skip


def _user_system(pid: int) -> tuple[float, float]:
    """The process's user and system CPU seconds so far (/proc, clock ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def _per_thread(pid: int, run: Callable[[], None], what: str) -> None:
    """CPU clock ticks of each of the proxy's threads over ``run`` (which thread does the work)."""

    def ticks() -> dict[str, int]:
        out = {}
        for task in Path(f"/proc/{pid}/task").iterdir():
            stat = (task / "stat").read_text()
            name = stat[stat.index("(") + 1 : stat.rindex(")")]
            fields = stat.rpartition(")")[2].split()
            out[f"{name}/{task.name}"] = int(fields[11]) + int(fields[12])
        return out

    before = ticks()
    run()
    after = ticks()
    print(what, {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)})


def serve_traced(config: str, out: str) -> None:
    """``ddm proxy`` in this process, counting interpreted opcodes per function between SIGUSR1 and SIGUSR2."""
    import json
    import signal

    from ddm_core.cli.app import main as cli_main
    from ddm_core.proxy import session

    session.INLINE_SECONDS = 1e9  # traced statements are slow; keep them on the one-unit path
    counts: collections.Counter[Any] = collections.Counter()

    def local(frame: Any, event: str, arg: Any) -> Any:
        if event == "opcode":
            counts[frame.f_code] += 1
        return local

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        return local

    on = [False]

    def threads_tracer(frame: Any, event: str, arg: Any) -> Any:  # worker threads: traced from their start
        return tracer(frame, event, arg) if on[0] else threads_tracer

    def start(*_: Any) -> None:
        counts.clear()
        on[0] = True
        sys.settrace(tracer)

    def stop(*_: Any) -> None:
        on[0] = False
        sys.settrace(None)
        rows = {f"{c.co_filename}:{c.co_firstlineno}:{c.co_qualname}": n for c, n in counts.items()}
        Path(out).write_text(json.dumps(rows))

    import threading

    threading.settrace(threads_tracer)
    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    sys.argv = ["ddm", "proxy", "-c", config, "--port", "0"]
    cli_main()


#: Opcode counts by file -> the part of a statement.
FILE_PARTS = [
    ("backend read (PyMySQL, execute/pymysql_results)", re.compile(r"pymysql")),
    ("executor (execute/)", re.compile(r"ddm_core/execute/")),
    ("routing (route/, plan cache)", re.compile(r"ddm_core/route/|ddm_core/(hashing|slots|ids)")),
    ("literals.parameterize", re.compile(r"proxy/literals")),
    ("session + runtime (proxy/session, statements, runtime)", re.compile(r"proxy/(session|statements|runtime)")),
    ("columns (proxy/columns)", re.compile(r"proxy/columns")),
    ("proxy connection (proxy/connection)", re.compile(r"proxy/connection")),
    ("mimic connection.py (dispatch, write_text_resultset)", re.compile(r"mysql_mimic/")),
    ("asyncio (streams, loop, transports)", re.compile(r"asyncio/|selectors")),
    ("threads (concurrent.futures, threading)", re.compile(r"concurrent/|threading")),
]


def _listening(command: list[str]) -> tuple[subprocess.Popen[str], int]:
    """A proxy started by ``command`` and the port it listens on (read from its log)."""
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.stderr is not None
    for line in proc.stderr:
        m = re.search(r"listening on \S+:(\d+)", line)
        if m:
            return proc, int(m.group(1))
    raise AssertionError(f"the proxy exited before it listened: {proc.stderr.read()[-2000:]}")


def opcodes(config_path: Path, count: int) -> None:
    import json
    import signal

    out = Path(tempfile.mkdtemp()) / "opcodes.json"
    proc, port = _listening([sys.executable, __file__, "--serve-traced", str(config_path), str(out)])
    try:
        client(port, 500)
        proc.send_signal(signal.SIGUSR1)
        time.sleep(0.2)
        client(port, count)
        proc.send_signal(signal.SIGUSR2)
        while not out.exists():
            time.sleep(0.1)
        time.sleep(0.3)
        rows: dict[str, int] = json.loads(out.read_text())
    finally:
        proc.terminate()
        proc.wait()
    parts: collections.Counter[str] = collections.Counter()
    for name, n in rows.items():
        part = next((p for p, pattern in FILE_PARTS if pattern.search(name.split(":")[0])), "other")
        parts[part] += n
    total = sum(parts.values())
    print(f"interpreted opcodes per statement (proxy process): {total / count:.0f}")
    for part, n in parts.most_common():
        print(f"  {part:55s} {n / count:7.0f}  {100 * n / total:5.1f} %")
    print("top functions:")
    top = int(os.environ.get("DDM_OPCODES_TOP", "40"))  # how many functions are listed
    for name, n in collections.Counter(rows).most_common(top):
        print(f"  {n / count:7.1f}  {name.replace(str(Path(sys.executable).parents[1]), '.venv')}")


def system_calls(pid: int, port: int, count: int) -> None:
    """System calls of the proxy process (all its threads) per statement, by ``strace -c`` over ``count`` statements."""
    out = Path(tempfile.mkdtemp()) / "strace.txt"
    strace = subprocess.Popen(["strace", "-c", "-f", "-o", str(out), "-p", str(pid)], stderr=subprocess.DEVNULL)
    time.sleep(0.5)  # attached
    client(port, count)
    strace.send_signal(2)
    strace.wait()
    print(f"system calls per statement (proxy process, strace -c over {count}):")
    for line in out.read_text().splitlines():
        fields = line.split()
        if len(fields) >= 5 and fields[3].isdigit():
            print(f"  {fields[-1]:20s} {int(fields[3]) / count:6.2f}")


def callgrind(config_path: Path, count: int) -> None:
    """Machine instructions the proxy process executes per statement, counted by valgrind (load-independent).

    The proxy runs under callgrind with instrumentation off; after a warm-up it is switched on
    (``callgrind_control -i on``) for ``count`` statements, then off, and the total is divided by ``count``.
    """
    import signal

    out = Path(tempfile.mkdtemp()) / "callgrind.out"
    proc, port = _listening(["valgrind", "--tool=callgrind", "--instr-atstart=no", "--dump-instr=no",
                             f"--callgrind-out-file={out}",
                             sys.executable, "-m", "ddm_core.cli", "proxy", "-c", str(config_path), "--port", "0"])
    try:
        client(port, 300)
        subprocess.run(["callgrind_control", "-i", "on", str(proc.pid)], check=True, capture_output=True)
        client(port, count)
        subprocess.run(["callgrind_control", "-i", "off", str(proc.pid)], check=True, capture_output=True)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)
    total = sum(int(m.group(1)) for m in re.finditer(r"^totals:\s+(\d+)", out.read_text(), re.M))
    print(f"machine instructions per statement (proxy process, callgrind): {total / count:.0f}")
    print(f"(callgrind_annotate {out} splits them by function)")
    stopped = re.search(r"ddm proxy stopped: (.*)", proc.stderr.read() if proc.stderr is not None else "")
    if stopped:  # what ran on the loop, warm-up included: a path that fell back to the workers shows here
        print(f"stop line: {stopped.group(1)}")


def take_src() -> None:
    """``--src DIR``: the proxy (a subprocess) imports another copy of ddm_core, for a before / after comparison."""
    if "--src" in sys.argv:
        where = sys.argv.index("--src")
        os.environ["PYTHONPATH"] = sys.argv.pop(where + 1)
        sys.argv.pop(where)


def main() -> None:
    if sys.argv[1:2] == ["--serve-traced"]:
        serve_traced(sys.argv[2], sys.argv[3])
        return
    take_src()
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    count = int(args[0]) if args else 3000
    with fresh_mariadb_databases(2) as databases:
        config = proxy_config(databases, workers=16, batchRows=500, inlineStatements="--hop" not in sys.argv)
        with Executor(load_config(config), load_schema=False) as ex:
            ex.execute(ORDER_DDL).close()
            ex.execute("INSERT INTO t_order (order_id, user_id, amount) VALUES "
                       + ", ".join(f"({i}, {i}, {i % 97})" for i in range(1, ROWS + 1))).close()  # fmt: skip
        path = write_config(config, Path(tempfile.mkdtemp(prefix="ddm_proxy_cpu_")) / "proxy.yaml")
        proxy = ProxyProcess(path).start()
        try:
            assert proxy.proc is not None
            if "--opcodes" in sys.argv:
                opcodes(path, count)
                return
            if "--callgrind" in sys.argv:
                callgrind(path, count)
                return
            client(proxy.port, 500)  # warm-up: plans cached, the one-unit path on
            if "--strace" in sys.argv:
                system_calls(proxy.proc.pid, proxy.port, count)
                return
            if "--threads" in sys.argv:
                _per_thread(proxy.proc.pid, lambda: time.sleep(2), "idle 2 s")
                _per_thread(proxy.proc.pid, lambda: client(proxy.port, count), f"{count} statements")
            for _ in range(3):
                r = perf_count(proxy.proc.pid, proxy.port, count)
                counted = "" if r["instructions"] != r["instructions"] else f"{r['instructions'] / 1000:.0f} k instructions, "
                print(f"proxy per statement: {counted}"  # no hardware counters on a VM: CPU time only
                      f"{r['cpu_us']:.0f} µs CPU (user {r['user_us']:.0f}, system {r['system_us']:.0f}), "
                      f"{r['wall_us']:.0f} µs wall at the client")
            if "--perf-record" in sys.argv:
                rec = subprocess.Popen(["perf", "record", "-e", "cpu-clock", "-F", "4000", "-g", "-o", "/tmp/proxy.perf",
                                        "-p", str(proxy.proc.pid)], stderr=subprocess.DEVNULL)  # fmt: skip
                time.sleep(0.5)
                client(proxy.port, count)
                rec.send_signal(2)
                rec.wait()
        finally:
            proxy.stop()


if __name__ == "__main__":
    main()
