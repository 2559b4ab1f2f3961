"""A cut-over's state writer for the checkpoint crash test (tests/test_workflow_checkpoint.py), killed at random.

``python workflow_log_writer.py DATABASE NAME SEED``: resumes the cut-over
``NAME`` in ``DATABASE``'s ``ddm_cutover`` table from its recorded state and
appends forever: the same few scan positions moved again and again (the rows
the state keeps only the last of), bucket transitions begun and ended,
findings, stops, and now and then a prune into ``ddm_cutover_archive``.
Checkpoints every 5 rows, so a kill lands in the middle of them often.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from services import mariadb_connect  # noqa: E402

from ddm_core.cutover.phases import CutoverPhase  # noqa: E402
from ddm_core.cutover.state import CutoverLog, Transition  # noqa: E402
from ddm_core.metadata.cutover import BucketState  # noqa: E402
from ddm_core.migrate.prune import prune  # noqa: E402

BUCKETS = 8
HOT_SCANS = ("forward:legacy", "reverse:s1", "reverse:s2")
ARCHIVE = "ddm_cutover_archive"


def main(database: str, name: str, seed: int) -> None:
    rng = random.Random(seed)
    log = CutoverLog(lambda: mariadb_connect(database=database), name, checkpoint_every=5)
    log.create_table()
    print("ready", flush=True)  # the test kills after this, at a random point of the appends
    state = log.state()
    if state.phase is None:
        log.enter(CutoverPhase.PREPARE, detail={"buckets": BUCKETS, "table": "t"})
        log.complete(CutoverPhase.PREPARE)
        log.enter(CutoverPhase.COPY, detail={"binlog": {"legacy": ["b.000001", 4]}})
        log.complete(CutoverPhase.COPY)
        log.enter(CutoverPhase.REPLAY)
        log.complete(CutoverPhase.REPLAY)
        log.enter(CutoverPhase.LIVE)
    position = rng.randrange(1_000_000)
    while True:
        state = log.state()
        if state.stopped is not None:
            log.enter(CutoverPhase.LIVE)
            continue
        if state.pending is not None:
            log.end_transition(state.pending, {"legacy": {"legacy": ["b.000001", position]}} if rng.random() < 0.5
                               else None)
            continue
        roll = rng.random()
        position += rng.randrange(1, 500)
        if roll < 0.6:
            scan = rng.choice(HOT_SCANS)
            log.record_scan(scan, ["b.000001", position], rng.randrange(10_000), "", phase=CutoverPhase.LIVE)
        elif roll < 0.75:
            buckets = tuple(sorted(rng.sample(range(BUCKETS), rng.randrange(1, 4))))
            log.begin_transition(Transition(state.next_transition, buckets, rng.choice(list(BucketState))))
        elif roll < 0.9:
            log.record_finding({"sampled": 100, "differences": rng.randrange(3), "rows": [], "at": position})
        elif roll < 0.95:
            log.stop(CutoverPhase.LIVE, {"why": f"stop at {position}"})
        elif log.tail()[0].event == "checkpoint":
            prune(log, archive=ARCHIVE, batch=7)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
