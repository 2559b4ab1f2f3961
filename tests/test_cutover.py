"""The gray cut-over on real MariaDB: a legacy server, a shard server, writers the whole time.

Two private ``mariadbd --log-bin --binlog-format=ROW``: one holds the legacy
``t_order``, the other the 4 shard databases (2 tables each). The application
is a set of writer threads (tests/migrate_live_support.Writers) through one
``Executor(ConfigHolder(...))`` watching the config table, each keeping its
own reference of its keys and retrying writes a transition paused. A second
:class:`Cutover` object runs the sync in a thread, as ``ddm cutover sync``
would, while the test advances and rolls buckets back; both take the
cut-over's lock. Afterwards both sides are read behind ddm-core's back.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Iterator

import pytest

from ddm_core import load_config
from ddm_core.cutover import Cutover, CutoverPhase
from ddm_core.errors import CutoverError, CutoverFencedError
from ddm_core.metadata.cutover import BucketState
from ddm_core.migrate import config_table_source
from cutover_support import LagProbe, Row, fill_legacy, layout, misplaced, read_side, shard_tables
from cutover_support import servers  # noqa: F401 (a fixture)
from migrate_live_support import Writers
from services import fresh_mariadb_databases, require_module
from test_execute_support import PrivateMariaDB

require_module("pymysqlreplication", "the cut-over tests")

FENCE, POLL, BUCKETS = 1.0, 0.3, 20


@pytest.fixture()
def setup(servers: tuple[PrivateMariaDB, PrivateMariaDB]) -> Iterator[dict[str, Any]]:
    legacy, shards = servers
    with fresh_mariadb_databases(1, connect=legacy.raw) as legacy_db, \
            fresh_mariadb_databases(4, connect=shards.raw) as shard_dbs:
        doc, spec = layout(shard_dbs, shards.port, legacy_db[0], legacy.port)
        yield {"doc": doc, "legacy": spec, "legacy_db": legacy_db[0], "shard_dbs": shard_dbs,
               "legacy_server": legacy, "shard_server": shards}


def _cutover(s: dict[str, Any], **kw: Any) -> Cutover:
    return Cutover(load_config(s["doc"]), name="orders-go", table="t_order", legacy=s["legacy"], state_on="ds_0",
                   config_source="ds_0", buckets=BUCKETS, fence_after_s=FENCE, poll_s=POLL, batch=1000, **kw)


def _publish_normal(s: dict[str, Any], cut: Cutover) -> None:
    """Version 1: the all-normal cut-over version, what the application serves before the cut-over starts."""
    with config_table_source(load_config(s["doc"]), "ds_0", create=True) as source:
        source.publish(cut.document((BucketState.NORMAL,) * BUCKETS))


def _compare(s: dict[str, Any], ref: dict[int, Row]) -> dict[str, int]:
    legacy = read_side(s["legacy_server"].port, [(s["legacy_db"], "t_order")])
    shards = read_side(s["shard_server"].port, shard_tables(s["shard_dbs"]))
    out = {"misplaced": misplaced(shards, s["shard_dbs"])}
    for side, found in (("legacy", legacy), ("shards", shards)):
        out[f"{side} lost"] = sum(1 for k in ref if k not in found)
        out[f"{side} extra"] = sum(1 for k in found if k not in ref)
        out[f"{side} duplicated"] = sum(len(v) - 1 for v in found.values())
        out[f"{side} differing"] = sum(1 for k, v in found.items() if k in ref and v[0][0] != ref[k])
    return out


def test_buckets_advance_and_roll_back_under_writers(setup: dict[str, Any]) -> None:
    s = setup
    ref = fill_legacy(s["legacy_server"].raw(), s["legacy_db"], 6000)
    with _cutover(s) as cut, _cutover(s) as daemon:
        _publish_normal(s, cut)
        app = Writers(s["doc"], ref, threads=3, watch=POLL, retry=(CutoverFencedError,)).start()
        stop = threading.Event()
        errors: list[BaseException] = []

        def sync() -> None:  # started before the copy: it waits until the cut-over is live
            try:
                daemon.run_sync(stop=stop.is_set, interval=0.05, check_every_s=1.0, sample=200)
            except BaseException as exc:  # the test fails on it below
                errors.append(exc)

        syncer = threading.Thread(target=sync, daemon=True)
        syncer.start()
        probe = LagProbe(app, s["legacy_server"].port, s["legacy_db"], s["shard_server"].port, s["shard_dbs"],
                         buckets=BUCKETS)
        try:
            status = cut.start()
            assert status.phase is CutoverPhase.LIVE and status.copy_done
            probe.label = "steady"  # no transition: the sync's own pace
            probe.thread.start()
            time.sleep(4.0)
            probe.label = ""
            cut.hold_s = 0.5
            cut.advance(range(0, 2))                       # 10 %: pre_gray
            assert cut.status().buckets_in(BucketState.PRE_GRAY) == (0, 1)
            cut.advance(range(0, 2))                       # gray
            cut.advance(range(2, 10))                      # 50 %: pre_gray
            cut.advance(range(2, 10))                      # gray
            time.sleep(0.5)
            cut.rollback([0, 3, 4])                        # back on the legacy table
            assert set(cut.status().buckets_in(BucketState.ROLLBACK)) == {0, 3, 4}
            time.sleep(0.5)
            cut.advance(range(0, BUCKETS))                 # rollback -> gray, normal -> pre_gray
            cut.advance(range(0, BUCKETS))                 # 100 %: every bucket gray
            assert cut.status().buckets_in(BucketState.GRAY) == tuple(range(BUCKETS))
            probe.label = "steady"
            time.sleep(4.0)
        finally:
            probed = probe.finish()
            final = app.finish()
            stop.set()
            syncer.join(timeout=60)
        final.update(probed)
        print(f"\nsync lag under 3 writers, the sync never killed: {probe.summary()}")
        assert not errors, errors
        assert probe.errors == [], probe.errors
        assert not app.errors, app.errors[:5]
        cut.sync_once()
        cut.sync_once()
        report = cut.check(sample=2000)
        assert report.consistent, report.summary()
        assert sum(app.stale_reads) == 0 and sum(app.missed) == 0
        found = _compare(s, final)
        assert set(found.values()) == {0}, found
        assert sum(app.ops) > 500
        with pytest.raises(CutoverError, match="are gray; roll them back"):
            cut.abort()
        assert cut.finish().phase is CutoverPhase.FINISHED


_WATCHER = """
import json, sys, time
from ddm_core import ConfigHolder, Router, load_config
from ddm_core.errors import CutoverFencedError
from ddm_core.migrate import config_table_source
doc, user = json.loads(sys.argv[1]), int(sys.argv[2])
holder = ConfigHolder(config_table_source(load_config(doc), "ds_0"))
holder.watch(%(poll)s)
router = Router(holder)
seen = None
end = time.time() + 60
while time.time() < end:
    try:
        plan = router.route("UPDATE t_order SET amount = 1 WHERE user_id = %%s", (user,))
        where = [[u.data_source for u in plan.units], [u.data_source for u in plan.dual]]
    except CutoverFencedError:
        where = [["paused"], []]
    if where != seen:
        print(json.dumps({"at": time.time(), "units": where[0], "dual": where[1]}), flush=True)
        seen = where
    time.sleep(0.005)
"""


def test_two_application_processes_follow_every_state_change(setup: dict[str, Any]) -> None:
    """Two application processes route a key of bucket b; each state change reaches both.

    How long it took is printed (the issue's 2 s figure is read from here, not asserted: a timed
    assertion on two noisy cores would test the machine)."""
    import json
    import subprocess
    import sys

    from ddm_core.cutover.placement import Buckets

    s = setup
    fill_legacy(s["legacy_server"].raw(), s["legacy_db"], 200)
    with _cutover(s, hold_s=0.0) as cut:
        _publish_normal(s, cut)
        cut.start()
        user = 424242
        bucket = int(Buckets(cut.sync.table, BUCKETS).of([user])[0])
        code = _WATCHER % {"poll": POLL}
        children = [subprocess.Popen([sys.executable, "-c", code, json.dumps(s["doc"]), str(user)],
                                     stdout=subprocess.PIPE, text=True) for _ in range(2)]
        try:
            for child in children:  # both started on the all-normal version: the legacy table only
                assert child.stdout is not None
                assert json.loads(child.stdout.readline()) | {"at": 0} == {"at": 0, "units": ["legacy"], "dual": []}
            delays: list[float] = []
            for to, units, dual in ((BucketState.PRE_GRAY, ["legacy"], True), (BucketState.GRAY, None, False)):
                cut.advance([bucket], to)
                state = cut.log.state()
                step = f"t{state.next_transition - 1}"
                published = cut.publisher.published_at(step)
                assert published is not None
                for child in children:
                    assert child.stdout is not None
                    line = json.loads(child.stdout.readline())
                    if to is BucketState.GRAY:  # the paused version shows first
                        while line["units"] == ["paused"]:
                            line = json.loads(child.stdout.readline())
                        assert line["units"][0].startswith("ds_") and line["dual"] == []
                    else:
                        assert line["units"] == units and len(line["dual"]) == 1 and line["dual"][0].startswith("ds_")
                    delays.append(line["at"] - published)
            assert len(delays) == 4
            print(f"\nstate change -> both instances: {', '.join(f'{d:.2f}' for d in delays)} s (poll {POLL} s)")
        finally:
            for child in children:
                child.kill()
                child.communicate(timeout=30)


def test_the_cli_plans_starts_shows_moves_and_aborts(setup: dict[str, Any], tmp_path: Any) -> None:
    import yaml
    from click.testing import CliRunner

    from ddm_core.cli import cli

    s = setup
    fill_legacy(s["legacy_server"].raw(), s["legacy_db"], 3000)
    path = tmp_path / "sharded.yaml"
    path.write_text(yaml.safe_dump(s["doc"]))
    common = ["--config", str(path), "--table", "t_order", "--legacy", s["legacy"]["url"], "--name", "cli",
              "--bucket-count", "20", "--fence-after-s", "0.5", "--poll-s", "0.2", "--hold-s", "0", "--no-progress"]
    runner = CliRunner()

    def run(*args: str) -> str:
        result = runner.invoke(cli, ["cutover", *args, *common], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result.output

    plan = run("plan")
    assert "3,000 rows" in plan and "20 buckets" in plan and "8 shard tables" in plan
    started = run("start")
    assert "phase live" in started and "3,000 rows (done)" in started
    moved = run("advance", "--buckets", "0-3")
    assert "buckets 0-3 are pre_gray" in moved and _row(moved, "pre_gray") == ["4", "0-3", "legacy", "legacy + shards"]
    status = run("status")
    assert _row(status, "normal") == ["16", "4-19", "legacy", "legacy"]
    assert _row(status, "forward sync behind") == ["0 B"] and _row(status, "reverse sync behind") == ["not reading"]
    checked = run("check", "--sample", "500")
    assert "500 rows in legacy.t_order, 500 in the shards of t_order: 0 missing, 0 extra" in checked
    back = run("rollback", "--buckets", "0-3")
    assert _row(back, "normal") == ["20", "0-19", "legacy", "legacy"]
    assert _row(back, "last check") == ["500 keys sampled, 0 differ (0 by datetime precision only)"]
    assert "phase rolled_back" in run("abort")
    refused = runner.invoke(cli, ["cutover", "advance", "--buckets", "0", *common])
    assert refused.exit_code == 2 and "rolled_back" in refused.output


def _row(output: str, first: str) -> list[str]:
    """The cells after ``first`` of the rich table row starting with it."""
    for line in output.splitlines():
        cells = [c.strip() for c in line.strip("│┃ ").split("│")]
        if cells and cells[0] == first:
            return cells[1:]
    raise AssertionError(f"no row {first!r} in:\n{output}")


def test_a_step_with_another_bucket_count_is_refused(setup: dict[str, Any]) -> None:
    s = setup
    fill_legacy(s["legacy_server"].raw(), s["legacy_db"], 100)
    with _cutover(s, hold_s=0.0) as cut:
        _publish_normal(s, cut)
        cut.start()
    with Cutover(load_config(s["doc"]), name="orders-go", table="t_order", legacy=s["legacy"], state_on="ds_0",
                 config_source="ds_0", buckets=BUCKETS * 2) as other:
        with pytest.raises(CutoverError, match=f"started for table 't_order' with {BUCKETS} buckets, not 't_order' "
                                               f"with {BUCKETS * 2}"):
            other.status()


def test_the_comparison_schedule_survives_a_restarted_sync(setup: dict[str, Any]) -> None:
    """A sync restarted more often than ``check_every_s`` still compares: the schedule is read from the log."""
    s = setup
    fill_legacy(s["legacy_server"].raw(), s["legacy_db"], 300)
    now = [time.time()]
    with _cutover(s, hold_s=0.0, wall=lambda: now[0]) as cut:
        _publish_normal(s, cut)
        cut.start()

        def one_life() -> int:  # one process's life: a single pass, then it is stopped
            passes: list[object] = []
            cut.run_sync(stop=lambda: bool(passes), interval=0.01, check_every_s=600.0, sample=50,
                         on_pass=passes.append)
            return len(cut.log.state().findings)

        assert one_life() == 1          # never compared: compared after its first pass
        now[0] += 599.0
        assert one_life() == 1          # the last comparison is 599 s old: not due
        now[0] += 2.0
        assert one_life() == 2          # 601 s: due, though no process lived that long
        last = cut.log.state().findings[-1]
        assert last["differences"] == 0 and last["sampled"] == 50 and last["at"] == now[0]
