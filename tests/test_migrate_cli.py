"""``ddm migrate plan | prepare | status | config-publish`` against real MariaDB databases."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest
import yaml

from ddm_core import load_config
from ddm_core.migrate import config_table_source
from migrate_support import reshard_docs
from services import fresh_mariadb_databases
from test_cli import run
from test_migrate_prepare import _create_old_tables


@pytest.fixture()
def files(tmp_path: Path) -> Iterator[tuple[str, str]]:
    with fresh_mariadb_databases(8) as names:
        old, new = reshard_docs(names)
        old_path, new_path = tmp_path / "old.yaml", tmp_path / "new.yaml"
        old_path.write_text(yaml.safe_dump(old, sort_keys=False))
        new_path.write_text(yaml.safe_dump(new, sort_keys=False))
        _create_old_tables(load_config(old))
        yield str(old_path), str(new_path)


def test_plan_prints_the_moves_rows_and_time(files: tuple[str, str]) -> None:
    old, new = files
    result = run("migrate", "plan", "--from", old, "--to", new, "--no-progress")
    assert result.exit_code == 0, result.output + result.stderr
    out = result.stdout
    assert "t_order: 512 of 1024 slots move (by user_id; rows exact)" in out
    assert "ds_0" in out and "ds_4" in out and "t_dict" in out
    assert "new data sources: ds_4, ds_5, ds_6, ds_7" in out
    assert "rows/s (measured)" in out and "estimated time" in out
    per_slot = run("migrate", "plan", "--from", old, "--to", new, "--no-progress", "--per-slot", "--rate", "100")
    assert per_slot.exit_code == 0 and "rows/s (given)" in per_slot.stdout
    assert per_slot.stdout.count("ds_") > result.stdout.count("ds_")


def test_plan_refusal_is_an_error(files: tuple[str, str], tmp_path: Path) -> None:
    old, new = files
    doc = yaml.safe_load(Path(new).read_text())
    doc["singleTables"] = {"t_config": "ds_1"}
    moved = tmp_path / "moved.yaml"
    moved.write_text(yaml.safe_dump(doc))
    result = run("migrate", "plan", "--from", old, "--to", str(moved), "--no-progress")
    assert result.exit_code == 2 and result.stderr.startswith("error: ") and "t_config" in result.stderr


def test_prepare_then_status(files: tuple[str, str]) -> None:
    old, new = files
    result = run("migrate", "prepare", "--from", old, "--to", new, "--state", "ds_0", "--name", "grow",
                 "--rate", "1000", "--no-progress")
    assert result.exit_code == 0, result.output + result.stderr
    assert "created ds_4: CREATE TABLE t_order_4_0" in result.stdout
    assert "t_order: 16 physical tables, schemas consistent" in result.stdout
    status = run("migrate", "status", "--config", old, "--state", "ds_0", "--name", "grow")
    assert status.exit_code == 0
    assert "phase prepare (completed), reads shifted 0 %" in status.stdout
    missing = run("migrate", "status", "--config", old, "--state", "ds_0", "--name", "other")
    assert "has no recorded step" in missing.stdout


def test_config_publish_inserts_the_next_version(files: tuple[str, str]) -> None:
    old, new = files
    first = run("migrate", "config-publish", "--config", old, "--on", "ds_1", old)
    assert first.exit_code == 0 and "as version 1 of configuration table 'ddm_config'" in first.stdout
    second = run("migrate", "config-publish", "--config", old, "--on", "ds_1", new)
    assert second.exit_code == 0 and "as version 2" in second.stdout
    with config_table_source(load_config(old), "ds_1") as source:
        assert source.latest_version() == 2
        assert source.fetch().content == Path(new).read_text()
