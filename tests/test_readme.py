"""The README's snippets run as written against ``examples/``.

The "Using it" section's ``ddm ddl ... --execute`` command creates the example tables
(SQLite files next to a copy of ``examples/orders.yaml``, so the repository stays
untouched), then its python blocks run one after another in one namespace, as a reader
pasting them would; their effects are checked in the SQLite files behind ddm-core's back.
The commands of "Install and run" run as written too. ``.ci/bare_check.py`` runs the same
snippets (``tests/readme_snippets.py``) in a venv without extras.
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
from pathlib import Path

from ports import free_port
from readme_snippets import copy_examples, create_example_tables, ddm, example_commands, python_blocks, \
    run_blocks, section  # fmt: skip


def test_the_using_it_snippets_run_against_the_examples(tmp_path: Path) -> None:
    blocks = python_blocks(section("Using it"))
    assert len(blocks) >= 2
    create_example_tables(tmp_path)
    printed = run_blocks(blocks, tmp_path, {"__name__": "readme"})
    assert "ds_" in printed  # the route preview printed its units
    assert "hash join" in printed  # the cross-node SELECT's strategy
    pairs = [line for line in printed.splitlines() if line.startswith("[('NO10086-")]
    assert pairs and pairs[0].count("NO10087-") == 4  # each of 10086's four orders found its twin

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


def test_the_install_and_run_commands_run_against_the_examples(tmp_path: Path) -> None:
    # `ddm demo` and `ddm demo --mysql ...` have their own tests (tests/test_demo.py).
    commands = example_commands(section("Install and run"))
    assert len(commands) >= 5, commands
    copy_examples(tmp_path)
    for command in commands:
        done = ddm(command, tmp_path)
        assert done.returncode == 0, f"{command}: exit {done.returncode}\n{done.stdout}{done.stderr}"
        assert done.stdout.strip(), f"{command} printed nothing"


def test_the_observability_snippet_runs_after_the_ddl_step(tmp_path: Path) -> None:
    text = section("Operating a sharded fleet")
    [block] = [b for b in python_blocks(text) if "metrics.install" in b]
    # As written, but on a free port: other processes on this machine may hold 9108.
    assert "port=9108" in block
    block = block.replace("port=9108", f"port={free_port()}")
    create_example_tables(tmp_path)
    run_blocks([block], tmp_path / "examples", {"__name__": "readme"})


def test_the_asyncio_snippet_runs_against_the_examples(tmp_path: Path) -> None:
    [block] = python_blocks(section("Using it from asyncio"))
    create_example_tables(tmp_path)
    printed = run_blocks([block], tmp_path, {"__name__": "readme"})
    assert printed.splitlines() == ["[(30001, 1), (30002, 0)]", "(2,)"]


def test_the_sqlalchemy_snippet_and_example_apps_run_against_the_examples(tmp_path: Path) -> None:
    import subprocess
    import sys

    [block] = python_blocks(section("Using it from SQLAlchemy"))
    create_example_tables(tmp_path)
    sys.path.insert(0, str(tmp_path))  # `examples.order_models`, as from the repository's root
    try:
        printed = run_blocks([block], tmp_path, {"__name__": "readme"})
    finally:
        sys.path.remove(str(tmp_path))
    assert printed.splitlines() == ["[70002]"]

    apps = {
        "sqlalchemy_orm.py": ["O50001 19.80 [7]", "[(50003, Decimal('59.40')), (50002, Decimal('39.60'))]",
                              "(3, Decimal('118.80'))", "3"],
        "sqlalchemy_async.py": ["(2, Decimal('11.00'))", "A60001 5.50"],
    }  # fmt: skip
    for app, expected in apps.items():
        done = subprocess.run([sys.executable, f"examples/{app}"], cwd=tmp_path, capture_output=True, text=True,
                              timeout=120)  # fmt: skip
        assert done.returncode == 0, f"{app}: exit {done.returncode}\n{done.stdout}{done.stderr}"
        assert done.stdout.splitlines() == expected, done.stdout
