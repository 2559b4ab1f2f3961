"""Reading a workflow's state (``ddm_cutover``) after 10, 10 k and 1 M history rows.

Each table holds one cut-over: its phase rows up to ``live``, then ``N``
position rows of four sync scans (what days of ``ddm cutover sync`` append),
filled by the server with ``INSERT ... SELECT`` from a sequence; then a
checkpoint (its one-time cost is the upgrade of an older table, and is
reported), then ``TAIL`` more rows as a running sync adds them.

=====================  ===================================================  ===================================
case                   measured                                             baseline (same run)
=====================  ===================================================  ===================================
state, N rows          ``CutoverLog.state()``: the last checkpoint and the  ``state()`` of the 10-row table
                       rows after it, folded
full fold, N rows      ``fold(events())``: every row read and folded (the   ``state()`` of the same table
                       read before checkpoints)
=====================  ===================================================  ===================================

Medians of interleaved rounds; nothing here asserts a speed.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from services import fresh_mariadb_databases, mariadb_connect  # noqa: E402

from ddm_core.cutover.state import CutoverLog  # noqa: E402

SIZES = (10, 10_000, 1_000_000)
TAIL = 30
ROUNDS = 15


def _fill(database: str, name: str, rows: int, first: int) -> None:
    """``rows`` position rows of four scans, numbered from ``first``, written by the server."""
    conn = mariadb_connect(database=database)
    with conn.cursor() as cur:
        cur.execute("INSERT INTO ddm_cutover (migration, seq, event, phase, high_water, rows_copied, detail) "
                    f"SELECT %s, seq + %s, 'scan', 'live', CONCAT('[\"b.000001\", ', seq, ']'), seq, "
                    f"CONCAT('{{\"scan\": \"forward:s', MOD(seq, 4), '\"}}') FROM seq_1_to_{rows}", (name, first - 1))
    conn.close()


@pytest.fixture(scope="module")
def logs() -> Iterator[dict[int, tuple[CutoverLog, float]]]:
    """Per size: the cut-over's log and how long its first checkpoint took."""
    with fresh_mariadb_databases(1) as names:
        database = names[0]
        out: dict[int, tuple[CutoverLog, float]] = {}
        for rows in SIZES:
            log = CutoverLog(lambda: mariadb_connect(database=database), f"w{rows}")
            log.create_table()
            log.enter(_phase("prepare"), detail={"buckets": 16, "table": "t"})
            for phase in ("prepare", "copy", "replay"):
                if phase != "prepare":
                    log.enter(_phase(phase))
                log.complete(_phase(phase))
            log.enter(_phase("live"))
            _fill(database, log.name, rows, log.state().seq + 1)
            began = time.perf_counter()
            state = log.checkpoint()
            first = time.perf_counter() - began
            _fill(database, log.name, TAIL, state.seq + 1)
            out[rows] = (log, first)
        yield out
        for log, _ in out.values():
            log.close()


def _phase(value: str) -> Any:
    from ddm_core.cutover.phases import CutoverPhase

    return CutoverPhase(value)


def _median(fn: Callable[[], Any], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        began = time.perf_counter()
        fn()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def test_reading_the_state_costs_the_same_after_1m_rows(logs: dict[int, tuple[CutoverLog, float]],
                                                        benchmark: Any) -> None:
    for log, _ in logs.values():  # the checkpointed read equals the fold of every row
        assert log.state() == log.fold(log.events())
    reads = {rows: [] for rows in SIZES}  # type: dict[int, list[float]]
    for round_ in range(ROUNDS):  # interleaved, the order turned each round: a busy moment slows every size alike
        for rows in SIZES[round_ % len(SIZES):] + SIZES[:round_ % len(SIZES)]:
            reads[rows].append(_median(logs[rows][0].state, 1))
    state = {rows: statistics.median(times) for rows, times in reads.items()}
    full = {rows: _median(lambda log=logs[rows][0]: log.fold(log.events()), 1 if rows > 10_000 else 5)
            for rows in SIZES}
    base = state[SIZES[0]]
    lines = ["| history rows | state() ms | ratio to 10 rows | full fold ms | full / state() | first checkpoint s |",
             "|---:|---:|---:|---:|---:|---:|"]
    for rows in SIZES:
        lines.append(f"| {rows:,} | {state[rows] * 1e3:.2f} | {state[rows] / base:.2f} | {full[rows] * 1e3:.1f} | "
                     f"{full[rows] / state[rows]:.1f} | {logs[rows][1]:.2f} |")
    print("\n" + "\n".join(lines))
    benchmark.group = "workflow log read"
    benchmark.extra_info.update(case="state after 1 M rows", items=1, unit="read",
                                state_ms={r: state[r] * 1e3 for r in SIZES}, full_fold_ms={r: full[r] * 1e3 for r in SIZES},
                                first_checkpoint_s={r: logs[r][1] for r in SIZES})
    benchmark.pedantic(logs[SIZES[-1]][0].state, rounds=ROUNDS, warmup_rounds=1, iterations=1)
