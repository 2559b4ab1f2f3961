"""The README's "Using it" snippets run as written against ``examples/``.

The section's ``ddm ddl ... --execute`` command creates the example tables
(SQLite files next to a copy of ``examples/orders.yaml``, so the repository
stays untouched), then its python blocks run one after another in one
namespace, as a reader pasting them would; their effects are checked in the
SQLite files behind ddm-core's back.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from ddm_core.cli import cli

ROOT = Path(__file__).resolve().parent.parent


def using_it() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    m = re.search(r"^## Using it\n(.*?)(?=^## )", text, re.S | re.M)
    assert m is not None, "README.md has no '## Using it' section"
    return m.group(1)


def test_the_using_it_snippets_run_against_the_examples(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    section = using_it()
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) >= 2
    commands = re.findall(r"`(ddm ddl [^`]+--execute)`", section)
    assert commands, "the section says how to create the example tables"

    shutil.copytree(ROOT / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns("data"))
    monkeypatch.chdir(tmp_path)
    created = CliRunner().invoke(cli, shlex.split(commands[0])[1:])
    assert created.exit_code == 0, created.output

    namespace: dict[str, object] = {"__name__": "readme"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for block in blocks:
            exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102 - the README's own code
    printed = out.getvalue()
    assert "ds_" in printed  # the route preview printed its units

    # What the snippets did, read from the SQLite files directly.
    files = sorted((tmp_path / "examples" / "data").glob("ds_*.db"))
    assert len(files) == 4
    rows: list[tuple[int, int]] = []
    for file in files:
        with contextlib.closing(sqlite3.connect(file)) as conn:
            names = [n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            for table in (n for n in names if re.fullmatch(r"t_order_\d+_\d+", n)):
                rows += conn.execute(f"SELECT user_id, status FROM {table}").fetchall()
    assert len(rows) == 12 and {u for u, _ in rows} == {10086, 10087, 20001}
    assert all(status == 2 for user, status in rows if user == 10086)  # the transaction's UPDATE
    assert sorted(status for user, status in rows if user != 10086) == sorted([0, 1, 2, 0] * 2)
