"""Run the benchmarks once and print the key figures as a markdown table.

Usage (from the repository root, with the extensions built in place)::

    PYTHONPATH=src python benchmarks/report.py [--json PATH] [--quiet] [-- PYTEST_ARGS...]

pytest-benchmark's own tables (one per group, ratios to the fastest entry in
parentheses) are printed first unless ``--quiet``; the markdown summary last.
Figures come from the **median** round of each benchmark (wall clock,
``time.perf_counter``); the merge ratio is also given from the best rounds.
Nothing here asserts a speed: the targets are read, not enforced, and the
exit status is pytest's.

Paired benchmarks (``extra_info`` has ``direct_median``: the executor's cases
against direct PyMySQL, rounds interleaved) get their own table: both
medians, the ratio from the medians and from the best rounds, and the issue's
target for it. A paired case that names its ``table`` in ``extra_info`` goes
into a table of that name (the ``AsyncExecutor`` cases: one table per event
loop, their baseline named in the case). A case whose ``extra_info`` has
``correctness`` (side -> what it returned, checked against an oracle) also
gets a row per side in the correctness table.

Other processes on the machine slow some rounds: the load average before and
after the run is printed with the table (with a warning when it nears the core
count), so a noisy run can be recognised and repeated. ``-- --benchmark-timer=
time.thread_time`` counts CPU time only, for the unpaired cases (wrong for
``next_id``, whose waits for the next millisecond partly sleep). It gives the
paired cases no ratio: their baselines are timed with ``time.perf_counter``
inside the tests, so a ratio would set CPU time against wall-clock time, and the
CPU time of one thread leaves out the server's work (the asyncio cases) and the
worker threads' (the thread executor's fan-outs). On a busy machine compare
those by instruction counts instead (``benchmarks/instructions.py``,
``benchmarks/aio_instructions.py``).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib.util
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

#: (case, label) of the compiled-vs-twin rows, in table order.
UNIT_ROWS = [
    ("slot_of", "`slot_of(int)`"),
    ("slots_of", "`slots_of` (1 M int64 array)"),
    ("route", "`SlotMap.route(int)`"),
    ("route_many", "`SlotMap.route_many` (1 M int64 array)"),
    ("next_id", "`Snowflake.next_id()`"),
    ("next_id_clock", "`Snowflake(clock=...).next_id()`"),
    ("next_ids", "`Snowflake.next_ids(200 000)`"),
]
MERGE_KS = (4, 16, 64)
#: The paired table of cases that name none (the thread executor's, against direct PyMySQL).
PAIRED_TABLE = "ddm-core vs direct PyMySQL (interleaved rounds)"


class Fig:
    """One benchmark's median and best round, per item."""

    def __init__(self, bench: dict[str, Any]) -> None:
        info = bench["extra_info"]
        self.case: str = info["case"]
        self.impl: str | None = info.get("impl")
        self.k: int | None = info.get("k")
        self.items: int = info["items"]
        self.unit: str = info["unit"]
        self.median: float = bench["stats"]["median"]
        self.min: float = bench["stats"]["min"]
        self.rounds: int = bench["stats"]["rounds"]
        # Paired cases: the direct counterpart's rounds, and the target for the ratio.
        self.direct_median: float | None = info.get("direct_median")
        self.direct_min: float | None = info.get("direct_min")
        self.target: str = info.get("target") or ""
        self.higher_is_better: bool = bool(info.get("higher_is_better"))
        self.table: str = info.get("table") or PAIRED_TABLE
        #: pytest-benchmark's timer of this case's rounds (a paired baseline is always timed with perf_counter).
        self.timer: str = str(bench.get("options", {}).get("timer", "perf_counter"))

    def ns_per_item(self, stat: str = "median") -> float:
        return float(getattr(self, stat)) * 1e9 / self.items

    def per_second(self, stat: str = "median") -> float:
        return self.items / float(getattr(self, stat))

    def fmt(self, like: Fig | None = None) -> str:
        """Time per call (or per slow item), else M items per second; ``like``: same form as that figure."""
        ns = self.ns_per_item()
        timed = (like or self).unit == "call" or (like or self).ns_per_item() >= 1000
        if timed:
            for scale, name in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")):
                if ns >= scale:
                    return f"{ns / scale:.2f} {name}/{self.unit}"
            return f"{ns:.1f} ns/{self.unit}"
        return f"{self.per_second() / 1e6:.2f} M {self.unit}s/s"


def run_pytest(json_path: Path, quiet: bool, extra: list[str]) -> int:
    """Run the benchmarks; the skipped cases and why go to ``<json>.skipped.xml`` (see :func:`skipped_cases`)."""
    env = dict(os.environ)
    if importlib.util.find_spec("ddm_core") is None:  # not installed: use the in-place build
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        *([] if any(a.endswith(".py") or "::" in a for a in extra) else [str(HERE)]),  # named files: only those
        "-p",
        "no:cacheprovider",
        "-q",
        f"--benchmark-json={json_path}",
        f"--junitxml={_skips_path(json_path)}",
        "-rs",  # each skip's reason in pytest's summary too
        "--benchmark-columns=min,median,mean,stddev,rounds",
        *extra,
    ]
    out = subprocess.DEVNULL if quiet else None
    return subprocess.run(cmd, cwd=ROOT, env=env, stdout=out).returncode


def _skips_path(json_path: Path) -> Path:
    return json_path.with_suffix(".skipped.xml")


def skipped_cases(json_path: Path) -> list[tuple[str, str]]:
    """``(test, reason)`` of every case the last run skipped (a case that could not run on this machine now, e.g.
    the 64-task asyncio case when the shared server has too few free connections): they have no row in the
    tables, so they are listed, not left out silently."""
    import xml.etree.ElementTree as ElementTree

    try:
        tree = ElementTree.parse(_skips_path(json_path))
    except (OSError, ElementTree.ParseError):
        return []
    out = []
    for case in tree.iter("testcase"):
        skipped = case.find("skipped")
        if skipped is not None:
            out.append((case.get("name", "?"), skipped.get("message", "")))
    return out


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.1f}×" if b else "–"


def _paired_rows(figs: list[Fig]) -> list[str]:
    """The executor-vs-direct tables: one per ``table`` named, one row per paired case."""
    tables: dict[str, list[Fig]] = {}
    for f in figs:
        if f.direct_median:
            tables.setdefault(f.table, []).append(f)
    lines: list[str] = []
    for title, paired in tables.items():
        lines += _paired_table(title, paired)
    return lines


def _paired_table(title: str, paired: list[Fig]) -> list[str]:
    baseline = "direct" if title == PAIRED_TABLE else "baseline"
    lines = [
        "",
        f"| {title} | ddm-core | {baseline} | ratio (medians) | ratio (best rounds) | target | met |",
        "| --- | ---: | ---: | ---: | ---: | ---: | :---: |",
    ]
    other_timers = sorted({f.timer for f in paired if f.timer != "perf_counter"})
    for f in paired:
        direct_median, direct_min = f.direct_median or 0.0, f.direct_min or 0.0
        if f.timer != "perf_counter":  # CPU time against the baseline's wall clock: no ratio (module docstring)
            lines.append(f"| {f.case} | {_figure(f.median, f)} | {_figure(direct_median, f)} | – | – "
                         f"| {f.target.replace('<=', '≤').replace('>=', '≥') or '–'} | – |")
            continue
        if f.higher_is_better:  # throughput: items per second, ratio ddm / direct
            ratio, best = direct_median / f.median, direct_min / f.min
        else:
            ratio, best = f.median / direct_median, f.min / direct_min
        met = "–"
        if f.target:
            op, _, bound = f.target.partition(" ")
            met = "yes" if (ratio <= float(bound) if op == "<=" else ratio >= float(bound)) else "**no**"
        lines.append(
            f"| {f.case} | {_figure(f.median, f)} | {_figure(direct_median, f)} | {ratio:.2f}× | {best:.2f}× "
            f"| {f.target.replace('<=', '≤').replace('>=', '≥') or '–'} | {met} |"
        )
    if other_timers:
        lines += [
            "",
            f"No ratio where ddm-core's rounds were timed with {', '.join(other_timers)}: the baselines are timed "
            "with time.perf_counter inside the tests, and one thread's CPU time leaves out the server's (asyncio) "
            "and the worker threads' work. Compare instruction counts instead (benchmarks/instructions.py, "
            "benchmarks/aio_instructions.py).",
        ]
    return lines


def _correctness_rows(benchmarks: list[dict[str, Any]]) -> list[str]:
    """What each side of a case returned against its oracle (``extra_info["correctness"]``)."""
    rows = [
        f"| {b['extra_info'].get('case', b['name'])} | {side} | {verdict} |"
        for b in benchmarks
        for side, verdict in (b.get("extra_info", {}).get("correctness") or {}).items()
    ]
    if not rows:
        return []
    return ["", "| correctness (against the oracle) | side | returned |", "| --- | --- | --- |", *rows]


def _figure(seconds: float, f: Fig) -> str:
    """A round's seconds as throughput (``higher_is_better``) or time per item."""
    if f.higher_is_better:
        return f"{f.items / seconds:,.0f} {f.unit}s/s"
    us = seconds * 1e6 / f.items
    return f"{us / 1000:.2f} ms/{f.unit}" if us >= 1000 else f"{us:.1f} µs/{f.unit}"


def render(data: dict[str, Any], load_before: tuple[float, ...], load_after: tuple[float, ...]) -> str:
    figs = [Fig(b) for b in data["benchmarks"] if "case" in b.get("extra_info", {})]

    def get(case: str, impl: str | None = None, k: int | None = None) -> Fig | None:
        for f in figs:
            if f.case == case and (impl is None or f.impl == impl) and (k is None or f.k == k):
                return f
        return None

    mi = data["machine_info"]
    timers = sorted({str(b.get("options", {}).get("timer", "?")) for b in data["benchmarks"]})
    clock = "wall clock" if timers == ["perf_counter"] else "timer " + ", ".join(timers)
    lines = [
        f"### ddm-core benchmarks, {data['datetime'][:19]}Z",
        "",
        f"Python {mi['python_version']} ({mi['python_implementation']}), {platform.machine()}, "
        f"{os.cpu_count()} CPUs, {mi.get('cpu', {}).get('brand_raw', 'cpu ?')}; "
        f"load average before/after: {load_before[0]:.2f} / {load_after[0]:.2f}. "
        f"Medians of rounds ({clock}).",
        "",
    ]
    busy = max(load_before[0], load_after[0])
    if busy == busy and busy > (os.cpu_count() or 1) - 0.5:  # (nan-safe)
        lines += [
            f"**Warning: the load average ({busy:.1f}) was near or above the core count: other processes "
            "took CPU time from these rounds and the figures are low. Repeat on a quiet machine. For the "
            "unpaired cases `-- --benchmark-timer=time.thread_time` counts CPU time only; the paired ones "
            "(ddm-core against a baseline, the asyncio cases among them) get no ratio under it — compare their "
            "instruction counts instead (benchmarks/instructions.py, benchmarks/aio_instructions.py).**",
            "",
        ]
    unit_lines = []
    for case, label in UNIT_ROWS:
        c, py = get(case, "cython"), get(case, "python")
        if c is None and py is None:
            continue
        speedup = _ratio(py.median, c.median) if c and py else "–"
        unit_lines.append(f"| {label} | {c.fmt() if c else '–'} | {py.fmt(c) if py else '–'} | {speedup} |")
    for k in MERGE_KS:
        c, py = get("heap_merge", "cython", k), get("heap_merge", "python", k)
        if c is None and py is None:
            continue
        speedup = _ratio(py.median, c.median) if c and py else "–"
        unit_lines.append(
            f"| `heap_merge` k={k} (1 M rows) | {c.fmt() if c else '–'} | {py.fmt(c) if py else '–'} | {speedup} |"
        )
    if unit_lines:  # a run of named files may have none
        lines += ["| unit | compiled (c) | pure twin (py) | c vs py |", "| --- | ---: | ---: | ---: |", *unit_lines]

    merge_rows = []
    for k in MERGE_KS:
        hm, hq = get("heap_merge", "cython", k), get("heapq_merge", None, k)
        if hm and hq:
            merge_rows.append((k, hm, hq))
    if merge_rows:
        lines += [
            "",
            "| 1 M rows `(int, int, str)`, key column 0 | `heap_merge` (c) | `heapq.merge(key=itemgetter(0))` "
            "| ratio (medians) | ratio (best rounds) |",
            "| --- | ---: | ---: | ---: | ---: |",
        ]
        for k, hm, hq in merge_rows:
            lines.append(
                f"| k={k} | {hm.per_second() / 1e6:.2f} M rows/s | {hq.per_second() / 1e6:.2f} M rows/s "
                f"| {_ratio(hq.median, hm.median)} | {_ratio(hq.min, hm.min)} |"
            )

    hmi, hqi = get("heap_merge_iter", "cython", 16), get("heapq_merge_iter", None, 16)
    if hmi and hqi:
        if not merge_rows:
            lines += ["", "| 1 M rows, key column 0 | `heap_merge` (c) | `heapq.merge` | ratio (medians) | ratio (best rounds) |",
                      "| --- | ---: | ---: | ---: | ---: |"]
        lines.append(
            f"| k=16, sources behind `iter()` | {hmi.per_second() / 1e6:.2f} M rows/s | {hqi.per_second() / 1e6:.2f} M rows/s "
            f"| {_ratio(hqi.median, hmi.median)} | {_ratio(hqi.min, hmi.min)} |"
        )

    loop, idc = get("floor_loop"), get("floor_id")
    if loop and idc:
        lines += [
            "",
            f"Per-call figures are (median time of a 1000-call `for` loop) / 1000, loop included; "
            f"in the same run the loop alone costs {loop.ns_per_item():.1f} ns/iteration and the loop "
            f"calling the builtin `id(k)` {idc.ns_per_item():.1f} ns/call.",
        ]

    known = {case for case, _ in UNIT_ROWS} | {
        "heap_merge", "heapq_merge", "heap_merge_iter", "heapq_merge_iter", "floor_loop", "floor_id"
    }
    lines += _paired_rows(figs)
    lines += _correctness_rows(data["benchmarks"])
    others = [f for f in figs if f.case not in known and not f.direct_median]
    if others:
        lines += ["", "| other benchmarks in this run | figure |", "| --- | ---: |"]
        for f in others:
            impl = f" [{f.impl}]" if f.impl else ""
            lines.append(f"| {f.case}{impl} | {f.fmt()} |")

    target_lines: list[str] = []

    def target(label: str, fig_text: str, ok: bool | None) -> None:
        target_lines.append(f"| {label} | {fig_text} | {'–' if ok is None else ('yes' if ok else '**no**')} |")

    m16 = next(((hm, hq) for k, hm, hq in merge_rows if k == 16), None)
    if m16:
        hm, hq = m16
        r = hq.median / hm.median
        target("`heap_merge` ≥ 5× `heapq.merge`, k=16, int key", f"{r:.1f}× (best rounds {hq.min / hm.min:.1f}×)", r >= 5)
    route = get("route", "cython")
    if route:
        target("`SlotMap.route` ≤ 60 ns/call", f"{route.ns_per_item():.1f} ns", route.ns_per_item() <= 60)
    many = get("route_many", "cython")
    if many:
        target("`route_many` ≥ 100 M keys/s", f"{many.per_second() / 1e6:.0f} M keys/s", many.per_second() >= 100e6)
    nid = get("next_id", "cython")
    if nid:
        target(
            "`next_id()` ≥ 3.9 M ids/s (layout cap 4.096 M)",
            f"{nid.per_second() / 1e6:.2f} M ids/s",
            nid.per_second() >= 3.9e6,
        )
    if target_lines:
        lines += ["", "| target (read, not asserted) | measured | met |", "| --- | ---: | :---: |", *target_lines]

    if merge_rows:
        lines.append("")
        for k, hm, hq in merge_rows:
            lines.append(
                f"- heap_merge k={k}: {hm.per_second() / 1e6:.2f} M rows/s, heapq.merge "
                f"{hq.per_second() / 1e6:.2f} M rows/s, ratio {hq.median / hm.median:.1f}×"
            )
    return "\n".join(line for i, line in enumerate(lines) if line or i == 0 or lines[i - 1])  # no double blanks


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1 :]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--json", type=Path, default=ROOT / ".benchmarks" / "report-latest.json", help="where pytest-benchmark writes"
    )
    parser.add_argument("--quiet", action="store_true", help="print only the markdown summary")
    parser.add_argument("--from-json", action="store_true", help="re-render an existing --json file, run nothing")
    args = parser.parse_args(argv)

    load_before = os.getloadavg()
    code = 0
    if not args.from_json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        code = run_pytest(args.json, args.quiet, extra)
    load_after = os.getloadavg()
    try:
        data = json.loads(args.json.read_text())
    except (OSError, ValueError):  # missing, or empty when no benchmark ran
        print(f"no results at {args.json}", file=sys.stderr)
        return code or 1
    if args.from_json:
        saved = data.get("load_average", {})
        load_before = tuple(saved.get("before", [float("nan")]))
        load_after = tuple(saved.get("after", [float("nan")]))
    else:  # keep the load beside the figures it explains
        data["load_average"] = {"before": list(load_before), "after": list(load_after)}
        args.json.write_text(json.dumps(data, indent=2))
    print()
    print(render(data, load_before, load_after))
    skipped = skipped_cases(args.json)
    if skipped:
        print("\n| skipped in this run | why |\n| --- | --- |")
        for name, reason in skipped:
            print(f"| {name} | {reason.replace('|', '/')} |")
    print(f"\n(raw results: {args.json}; {_dt.datetime.now():%Y-%m-%d %H:%M})", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
