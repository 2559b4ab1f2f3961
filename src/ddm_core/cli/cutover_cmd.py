"""``ddm cutover``: move a table from a legacy database onto its shards bucket by bucket (docs/cutover.md).

The steps of :class:`ddm_core.cutover.Cutover`: ``plan``, ``start`` (prepare,
full copy, replay), ``sync`` (both directions, until stopped), ``advance``,
``rollback``, ``check``, ``status``, ``finish`` and ``abort``; each resumes
after a crash. ``prune`` trims the state table.
"""

from __future__ import annotations

import contextlib
import json
import signal
import threading
import time
from typing import Any, Mapping

import click
import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ddm_core.cli.app import cli, load, needs_extra
from ddm_core.cli.display import console as make_console
from ddm_core.cli.display import FenceBar, size, spinner
from ddm_core.cli.live import REFRESH_S, DirectionRow, LiveTable, RateMeter, bytes_behind, position_text
from ddm_core.cutover import Cutover, CutoverStatus
from ddm_core.cutover.phases import CutoverPhase
from ddm_core.cutover.placement import Buckets
from ddm_core.cutover.state import CutoverState
from ddm_core.cutover.sync import FORWARD, REVERSE, SyncPass
from ddm_core.metadata.cutover import BucketState, bucket_slots, format_buckets, parse_buckets
from ddm_core.migrate.backfill import BATCH_ROWS, MAX_BATCH_ROWS, ScanReport
from ddm_core.migrate.catchup import CatchUpResult
from ddm_core.migrate.plan import slot_counts
from ddm_core.migrate.tables import table_stats

__all__ = ["cutover"]


@cli.group()
def cutover() -> None:
    """Gray cut-over from a legacy database to the shards (docs/cutover.md).

    plan | start | sync | advance --buckets | rollback --buckets | check | status | finish | abort | prune.
    The steps that read binlogs need the 'migrate' extra: pip install 'ddm-core[migrate]'.
    """


def _options(f: Any) -> Any:
    options = [
        click.option("--config", "-c", "config_path", required=True, type=click.Path(exists=True, dir_okay=False),
                     help="The sharded configuration."),
        click.option("--table", required=True, help="The logic table to cut over."),
        click.option("--legacy", "legacy_url", required=True, help="URL of the legacy database (mysql://...)."),
        click.option("--legacy-user", default="root", show_default=True, help="User on the legacy database."),
        click.option("--legacy-password-env", help="Variable holding that user's password."),
        click.option("--legacy-table", help="The legacy physical table (default: the logic table's name)."),
        click.option("--legacy-name", default="legacy", show_default=True,
                     help="The legacy data source's name in plans and errors."),
        click.option("--name", default="cutover", show_default=True, help="The cut-over's name in ddm_cutover."),
        click.option("--state-on", "state_ds", default="ds_0", show_default=True,
                     help="Data source holding the ddm_cutover table."),
        click.option("--config-on", help="Data source holding the ddm_config table the application watches "
                                         "(default: the state data source)."),
        click.option("--bucket-count", "bucket_count", type=click.IntRange(min=1, max=65536), default=100,
                     show_default=True, help="Slot-aligned buckets of the shard key."),
        click.option("--fence-after-s", type=click.FloatRange(min=0.1, max=3600), default=5.0, show_default=True,
                     help="An instance that did not confirm its version this long refuses writes to the table."),
        click.option("--poll-s", type=click.FloatRange(min=0.05, max=3600), default=1.0, show_default=True,
                     help="How often the application instances poll the ddm_config table."),
        click.option("--fence-timeout-s", type=click.FloatRange(min=0.1, max=86400), default=60.0, show_default=True,
                     help="How long a step waits for every registered instance to take its version "
                          "(docs/operations.md#instance-registry)."),
        click.option("--hold-s", type=click.FloatRange(min=0), default=600.0, show_default=True,
                     help="The gate to gray: forward replay under the lag gate for this long."),
        click.option("--batch", type=click.IntRange(min=1, max=MAX_BATCH_ROWS), default=BATCH_ROWS,
                     show_default=True, help="Rows per copy batch."),
        click.option("--max-rows-per-s", type=click.FloatRange(min=1), help="Ceiling on rows the copy reads per second."),
        click.option("--progress/--no-progress", default=True, help="Show progress on stderr."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


class _Run:
    """A Cutover built from the options, with step lines on stdout and a copy bar on stderr."""

    def __init__(self, opts: dict[str, Any]) -> None:
        self.console = make_console()
        self.progress_on = bool(opts["progress"])
        self.spinner = spinner(self.console, self.progress_on)
        self.fence = FenceBar(self.progress_on)
        self.bar: Progress | None = None
        self.task: Any = None
        legacy: dict[str, Any] = {"name": opts["legacy_name"], "url": opts["legacy_url"],
                                  "username": opts["legacy_user"]}
        if opts["legacy_password_env"]:
            legacy["passwordEnv"] = opts["legacy_password_env"]
        if opts["legacy_table"]:
            legacy["table"] = opts["legacy_table"]
        self.cut = Cutover(
            load(opts["config_path"], check_env=True), name=opts["name"], table=opts["table"], legacy=legacy,
            state_on=opts["state_ds"], config_source=opts["config_on"] or opts["state_ds"],
            buckets=opts["bucket_count"], fence_after_s=opts["fence_after_s"], poll_s=opts["poll_s"],
            hold_s=opts["hold_s"], batch=opts["batch"], max_rows_per_s=opts["max_rows_per_s"], echo=self.echo,
            on_copy=self.copied, fence_timeout_s=opts["fence_timeout_s"],
            on_fence=self.fence)

    def echo(self, line: str) -> None:
        self.spinner.update(line)
        self.console.print(line)

    def copied(self, report: ScanReport) -> None:
        if not self.progress_on:
            return
        if self.bar is None:
            self.spinner.__exit__()
            scan = report.scan
            total = table_stats(self.cut.conns, scan.source, scan.physical).rows
            self.bar = Progress(TextColumn("copy"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                console=Console(stderr=True))
            self.task = self.bar.add_task("copy", total=max(total, 1))
            self.bar.start()
        self.bar.update(self.task, completed=report.rows_read, total=max(report.rows_read, 1) if report.done else None)

    def __enter__(self) -> "_Run":
        self.spinner.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()
        self.fence.close()
        self.spinner.__exit__()
        self.cut.close()


def print_status(console: Console, st: CutoverStatus) -> None:
    """The status view: one line per state with its buckets, then sync and checker figures."""
    done = "completed" if st.completed else ("stopped" if st.stopped is not None else "")
    console.print(f"cut-over {st.name!r} of {st.table} from {st.legacy}: phase {st.phase or 'not started'} {done}")
    buckets = Table(title="buckets")
    for col, justify in (("state", "left"), ("count", "right"), ("buckets", "left"), ("reads", "left"),
                         ("writes", "left")):
        buckets.add_column(col, justify=justify)  # type: ignore[arg-type]
    where = {BucketState.NORMAL: ("legacy", "legacy"), BucketState.PRE_GRAY: ("legacy", "legacy + shards"),
             BucketState.GRAY: ("shards", "shards"), BucketState.ROLLBACK: ("legacy", "legacy + shards")}
    for state in BucketState:
        members = st.buckets_in(state)
        buckets.add_row(state.value, str(len(members)), format_buckets(members) or "-", *where[state])
    console.print(buckets)
    figures = Table(show_header=False)
    figures.add_column("what")
    figures.add_column("value")
    figures.add_row("copy", f"{st.copied:,} rows" + (" (done)" if st.copy_done else ""))
    for direction in ("forward", "reverse"):
        if direction in st.behind:
            gap = st.behind[direction]
            figures.add_row(f"{direction} sync behind", "not reading" if gap is None else size(gap))
    figures.add_row("authority switches", str(st.switches))
    if st.pending is not None:
        figures.add_row("in transition", f"buckets {format_buckets(st.pending.buckets)} -> {st.pending.to.value}")
    if st.findings is not None:
        f = st.findings
        figures.add_row("last check", f"{f.get('sampled', 0):,} keys sampled, {f.get('differences', 0)} differ "
                        f"({f.get('precision', 0)} by datetime precision only)")
        for line in list(f.get("rows") or [])[:5]:
            figures.add_row("", str(line))
    if st.stopped is not None:
        figures.add_row("stopped", str(st.stopped)[:300])
    console.print(figures)


def _bucket_list(text: str, count: int) -> list[int]:
    return sorted(parse_buckets(text, count, "--buckets"))


@cutover.command("plan")
@_options
def plan_cmd(**opts: Any) -> None:
    """Rows per bucket of the legacy table (one scan of its keys) and what start will do."""
    with _Run(opts) as run:
        cut = run.cut
        scan = cut.sync.forward_scan
        buckets = Buckets(cut.sync.table, cut.buckets)
        per_slot = slot_counts(cut.conns, buckets.sharder, buckets.column, scan.source, scan.physical, batch=50_000,
                               progress=lambda rows: run.spinner.update(f"counting: {rows:,} rows"))
        counts = np.bincount(buckets.lookup, weights=per_slot, minlength=cut.buckets).astype(np.int64)
        stats = table_stats(cut.conns, scan.source, scan.physical)
        run.console.print(f"{cut.table}: {int(counts.sum()):,} rows, {size(stats.data_bytes)} in {scan.source}.{scan.physical}; "
                          f"{cut.buckets} buckets of {len(bucket_slots(buckets.slot_count, cut.buckets, 0))} slots "
                          f"onto {len(cut.sync.table.data_nodes)} shard tables")
        table = Table()
        for col, justify in (("buckets", "left"), ("rows", "right"), ("share", "right")):
            table.add_column(col, justify=justify)  # type: ignore[arg-type]
        step = max(1, cut.buckets // 10)
        total = max(int(counts.sum()), 1)
        for lo in range(0, cut.buckets, step):
            part = int(counts[lo: lo + step].sum())
            table.add_row(format_buckets(range(lo, min(lo + step, cut.buckets))), f"{part:,}", f"{part / total:.1%}")
        run.console.print(table)


@cutover.command("start")
@_options
@needs_extra("migrate")
def start_cmd(**opts: Any) -> None:
    """Publish the all-normal version, create and check the shard tables, copy every row, replay (resumable)."""
    with _Run(opts) as run:
        st = run.cut.start()
        if run.bar is not None:
            run.bar.stop()
            run.bar = None
        print_status(run.console, st)
        run.console.print("next: keep `ddm cutover sync` running, then `ddm cutover advance --buckets 0`")


@cutover.command("sync")
@click.option("--seconds", type=click.FloatRange(min=0), help="Stop after this long (default: until stopped).")
@click.option("--check-every-s", type=click.FloatRange(min=1), default=600.0, show_default=True,
              help="A sampled comparison this often.")
@click.option("--sample", type=click.IntRange(min=1), default=1000, show_default=True, help="Keys per comparison.")
@_options
@needs_extra("migrate")
def sync_cmd(seconds: float | None, check_every_s: float, sample: int, **opts: Any) -> None:
    """Sync both ways until stopped (SIGTERM / Ctrl-C) or the cut-over ends; a sampled check on a schedule."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with _Run(opts) as run:
        cut = run.cut
        run.spinner.__exit__()  # the live table takes stderr
        if seconds is not None:
            threading.Timer(seconds, stop.set).start()
        meters = {"forward": RateMeter(), "reverse": RateMeter()}
        figures: dict[str, Any] = {"passes": 0, "forward": None, "reverse": None, "shown": -REFRESH_S}
        live = LiveTable(f"cut-over {cut.name!r}: sync", enabled=run.progress_on)

        def on_pass(done: SyncPass) -> None:
            figures.update(passes=figures["passes"] + 1, forward=done.forward, reverse=done.reverse)
            if run.progress_on and time.monotonic() - figures["shown"] >= REFRESH_S:
                figures["shown"] = time.monotonic()
                state = cut.log.state()
                live.show(_direction_rows(cut, state, done, meters), state.findings[-1] if state.findings else None)

        with live, contextlib.suppress(KeyboardInterrupt):  # Ctrl-C stops it, as SIGTERM does
            cut.run_sync(stop=stop.is_set, check_every_s=check_every_s, sample=sample, on_pass=on_pass)
        applied = sum(r.applied for r in (figures["forward"], figures["reverse"]) if r is not None)
        run.console.print(f"sync stopped: {figures['passes']:,} passes, {applied:,} changes applied")


def _direction_rows(cut: Cutover, state: CutoverState, done: SyncPass | None,
                    meters: Mapping[str, RateMeter] | None = None) -> list[DirectionRow]:
    """One row per direction and server: the recorded position and the bytes to the server's end; the
    direction's rate, lag and changes applied on its first row (when this process runs the sync)."""
    sync = cut.sync
    reading = {"forward": state.phase in (CutoverPhase.REPLAY, CutoverPhase.LIVE),
               "reverse": any(sw.to == "shards" for sw in state.switches)}
    ends = sync.positions() if any(reading.values()) else {}
    start = sync.copy_start(state) if reading["forward"] else {}
    rows: list[DirectionRow] = []
    for direction, prefix, servers in (("forward", FORWARD, [sync.legacy_server]),
                                       ("reverse", REVERSE, sync.shard_servers)):
        if not reading[direction]:
            continue
        result: CatchUpResult | None = getattr(done, direction) if done is not None else None
        for i, server in enumerate(servers):
            at = state.scans.get(prefix + server)
            recorded = at.high_water if at is not None and at.high_water else start.get(server)
            mine = result if i == 0 else None  # the direction's own figures, on its first row
            rows.append(DirectionRow(
                direction, server, position_text(recorded),
                meters[direction].see(mine.applied) if mine is not None and meters is not None else None,
                mine.last_pass if mine is not None else None, bytes_behind(recorded, ends.get(server)),
                mine.applied if mine is not None else 0))
    return rows


@cutover.command("advance")
@click.option("--buckets", "which", required=True, help="Buckets to move on, e.g. 0-9,20.")
@click.option("--to", "to", type=click.Choice([s.value for s in BucketState]), help="The state to go to.")
@_options
@needs_extra("migrate")
def advance_cmd(which: str, to: str | None, **opts: Any) -> None:
    """Move buckets one state on: normal -> pre_gray -> gray (rollback -> gray)."""
    with _Run(opts) as run:
        st = run.cut.advance(_bucket_list(which, opts["bucket_count"]), BucketState(to) if to else None)
        print_status(run.console, st)


@cutover.command("rollback")
@click.option("--buckets", "which", required=True, help="Buckets to send back, e.g. 0-9.")
@_options
@needs_extra("migrate")
def rollback_cmd(which: str, **opts: Any) -> None:
    """Send buckets back to the legacy table (gray -> rollback, pre_gray -> normal)."""
    with _Run(opts) as run:
        print_status(run.console, run.cut.rollback(_bucket_list(which, opts["bucket_count"])))


@cutover.command("check")
@click.option("--sample", type=click.IntRange(min=1), default=1000, show_default=True, help="Keys to compare.")
@_options
@needs_extra("migrate")
def check_cmd(sample: int, **opts: Any) -> None:
    """Compare random legacy keys field by field with the shards (recorded; exit 1 on a difference)."""
    with _Run(opts) as run:
        report = run.cut.check(sample)
        run.console.print(report.summary())
        for d in report.differences[:20]:
            for line in d.lines():
                run.console.print(f"  {line}")
        if not report.consistent:
            raise SystemExit(1)


@cutover.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print the status as one JSON document (for scripts).")
@_options
def status_cmd(as_json: bool, **opts: Any) -> None:
    """Buckets per state, sync lag both ways per server (binlog position, bytes behind), the last check."""
    if as_json:
        opts["progress"] = False
    with _Run(opts) as run:
        st = run.cut.status()
        if not as_json:
            print_status(run.console, st)
            return
        state = run.cut.log.state()
        click.echo(json.dumps(status_json(st, _direction_rows(run.cut, state, None)), default=str, indent=2))


def status_json(st: CutoverStatus, directions: list[DirectionRow]) -> dict[str, Any]:
    """What ``ddm cutover status --json`` prints."""
    return {
        "name": st.name, "table": st.table, "legacy": st.legacy,
        "phase": st.phase.value if st.phase is not None else None, "completed": st.completed, "stopped": st.stopped,
        "buckets": {state.value: list(st.buckets_in(state)) for state in BucketState},
        "pending": st.pending.to_json() if st.pending is not None else None,
        "copy": {"rows": st.copied, "done": st.copy_done}, "behind_bytes": dict(st.behind),
        "directions": [d.to_json() for d in directions], "last_check": st.findings,
        "authority_switches": st.switches,
    }


@cutover.command("prune")
@click.option("--archive", help="Copy the pruned rows into this table first (same layout, created if missing).")
@click.option("--checkpoint", is_flag=True,
              help="Write a checkpoint covering every row first (only while no ddm cutover process runs).")
@_options
def prune_cmd(archive: str | None, checkpoint: bool, **opts: Any) -> None:
    """Delete (or archive) the ddm_cutover rows before the last checkpoint; the state is unchanged."""
    from ddm_core.migrate.prune import prune

    with _Run(opts) as run:
        report = prune(run.cut.log, archive=archive, checkpoint=checkpoint,
                       progress=lambda n: run.spinner.update(f"pruning: {n:,} rows"))
        run.console.print(f"cut-over {report.workflow!r}: {report.deleted:,} rows before step {report.checkpoint} "
                          + (f"moved to {archive}" if archive else "deleted") + f"; {report.kept} rows kept")


@cutover.command("finish")
@_options
def finish_cmd(**opts: Any) -> None:
    """With every bucket gray: publish the plain sharded configuration."""
    with _Run(opts) as run:
        print_status(run.console, run.cut.finish())


@cutover.command("abort")
@_options
def abort_cmd(**opts: Any) -> None:
    """With no bucket gray: end the cut-over on the legacy table."""
    with _Run(opts) as run:
        print_status(run.console, run.cut.abort())
