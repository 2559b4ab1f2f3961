"""``ddm cutover sync``'s live table and ``ddm cutover status --json`` on a live cut-over (binlog servers).

Two private ``mariadbd --log-bin`` (tests/cutover_support.py): a legacy table
of 300 rows cut over to 4 shard databases, bucket 0 moved to gray so both
directions read a binlog. The JSON document and the live table must name
each direction's server, the binlog position recorded for it (as the state
table holds it) and the bytes to the server's end; the live table also the
rate, the last pass's seconds and the last comparison. No timing is asserted.
"""

from __future__ import annotations

import io
import json
from typing import Any, Iterator

import pytest
import yaml
from click.testing import CliRunner
from rich.console import Console

from ddm_core import load_config
from ddm_core.cli import cli
from ddm_core.cli.cutover_cmd import _direction_rows
from ddm_core.cli.live import LiveTable, RateMeter
from ddm_core.cutover import Cutover
from ddm_core.cutover.sync import FORWARD, REVERSE, SyncPass
from ddm_core.metadata.cutover import BucketState
from ddm_core.migrate import config_table_source
from cutover_support import fill_legacy, layout
from cutover_support import servers  # noqa: F401 (a fixture)
from services import fresh_mariadb_databases, require_module
from test_execute_support import PrivateMariaDB

require_module("pymysqlreplication", "the cut-over tests")

BUCKETS = 10


@pytest.fixture()
def live(servers: tuple[PrivateMariaDB, PrivateMariaDB], tmp_path: Any) -> Iterator[dict[str, Any]]:
    legacy, shards = servers
    with fresh_mariadb_databases(1, connect=legacy.raw) as legacy_db, \
            fresh_mariadb_databases(4, connect=shards.raw) as shard_dbs:
        doc, spec = layout(shard_dbs, shards.port, legacy_db[0], legacy.port)
        fill_legacy(legacy.raw(), legacy_db[0], 300)
        path = tmp_path / "sharded.yaml"
        path.write_text(yaml.safe_dump(doc))
        with Cutover(load_config(doc), name="live", table="t_order", legacy=spec, state_on="ds_0",
                     config_source="ds_0", buckets=BUCKETS, fence_after_s=0.5, poll_s=0.2, hold_s=0.0) as cut:
            with config_table_source(load_config(doc), "ds_0", create=True) as source:
                source.publish(cut.document((BucketState.NORMAL,) * BUCKETS))
            cut.start()
            cut.advance([0])
            cut.advance([0])  # gray: authority over bucket 0 moved, the reverse sync reads the shard binlog
            raw = legacy.raw(legacy_db[0])
            with raw.cursor() as cur:  # changes for the forward sync to apply
                cur.execute("UPDATE t_order SET amount = amount + 1 ORDER BY user_id LIMIT 40")
                cur.execute("DELETE FROM t_order ORDER BY user_id DESC LIMIT 5")
            raw.close()
            passes: list[SyncPass] = []
            cut.run_sync(stop=lambda: bool(passes), interval=0.01, check_every_s=3600, sample=50,
                         on_pass=passes.append)
            common = ["--config", str(path), "--table", "t_order", "--legacy", spec["url"], "--name", "live",
                      "--bucket-count", str(BUCKETS), "--fence-after-s", "0.5", "--poll-s", "0.2"]
            yield {"cut": cut, "pass": passes[0], "common": common,
                   "legacy": f"127.0.0.1:{legacy.port}", "shards": f"127.0.0.1:{shards.port}"}


def test_status_json_names_both_directions_their_positions_and_the_last_check(live: dict[str, Any]) -> None:
    result = CliRunner().invoke(cli, ["cutover", "status", "--json", *live["common"]], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    state = live["cut"].log.state()
    assert doc["phase"] == "live" and doc["buckets"]["gray"] == [0] and doc["authority_switches"] == 1
    assert doc["last_check"] == dict(state.findings[-1]) and doc["last_check"]["sampled"] == 50
    by = {(d["direction"], d["server"]): d for d in doc["directions"]}
    assert set(by) == {("forward", live["legacy"]), ("reverse", live["shards"])}
    for (direction, server), d in by.items():
        recorded = state.scans[(FORWARD if direction == "forward" else REVERSE) + server].high_water
        assert d["position"] == f"{recorded[0]}:{recorded[1]}"
        assert isinstance(d["behind_bytes"], int) and d["behind_bytes"] >= 0
        assert d["rows_per_s"] is None and d["lag_s"] is None  # figures of a running sync, not of a status


def test_the_sync_live_table_shows_rate_lag_position_and_check(live: dict[str, Any]) -> None:
    cut, done = live["cut"], live["pass"]
    assert done.forward.applied > 0
    console = Console(record=True, force_terminal=True, width=160, file=io.StringIO())
    state = cut.log.state()
    rows = _direction_rows(cut, state, done, {"forward": RateMeter(), "reverse": RateMeter()})
    with LiveTable("cut-over 'live': sync", console=console) as table:
        table.show(rows, state.findings[-1])
    text = console.export_text()
    forward = next(line for line in text.splitlines() if "forward" in line)
    recorded = state.scans[FORWARD + live["legacy"]].high_water
    assert live["legacy"] in forward and f"{recorded[0]}:{recorded[1]}" in forward
    assert f"{done.forward.last_pass:.2f}" in forward and f"{done.forward.applied:,}" in forward
    assert any("reverse" in line and live["shards"] in line for line in text.splitlines())
    # the legacy writes above may touch gray bucket 0, whose legacy changes are not the forward sync's
    assert f"last check: 50 keys compared, {state.findings[-1]['differences']} differ" in text


def test_the_sync_command_draws_its_table(live: dict[str, Any]) -> None:
    result = CliRunner().invoke(cli, ["cutover", "sync", "--seconds", "1", *live["common"]], catch_exceptions=False,
                                env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    assert "sync stopped:" in result.output
    lines = result.output.splitlines()
    assert any("binlog position" in line and "lag s" in line for line in lines), result.output
    assert any("forward" in line and live["legacy"] in line for line in lines), result.output
    assert any("reverse" in line and live["shards"] in line for line in lines), result.output
