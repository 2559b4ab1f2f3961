"""``ddm lint`` on a fixture code base (tests/lint_fixture) whose findings are known line by line.

The fixture has ``.py`` files (database calls, SQLAlchemy ``text()`` with
``:name`` parameters, plain constants, a docstring and a non-SQL string that
start like SQL) and a ``.sql`` file; tests/lint_fixture/ddm.yaml shards
``t_order`` over 4 × 4 nodes and forbids DML full routes. Nothing connects.
"""

from __future__ import annotations

import json
from pathlib import Path


from ddm_core import load_config
from ddm_core.observe.lint import lint_paths
from ddm_core.observe.lint.sources import sql_of_file
from cli_support import run

FIXTURE = Path(__file__).resolve().parent / "lint_fixture"
CONFIG = str(FIXTURE / "ddm.yaml")

EXPECTED = {
    ("app/orders.py", 9, "warning", "full-route"),
    ("app/orders.py", 14, "error", "shard-key-update"),  # the literal's line inside a multi-line call
    ("app/orders.py", 20, "warning", "cross-shard-write"),
    ("app/orders.py", 23, "error", "unsupported"),  # a plain constant: literal LIMIT, parameter OFFSET
    ("app/orders.py", 29, "error", "full-route"),  # DELETE without the shard key, refused by the config
    ("app/orders.py", 35, "warning", "full-route"),
    ("app/orders.py", 35, "warning", "deep-pagination"),  # OFFSET from a parameter
    ("sql/reports.sql", 2, "warning", "full-route"),
    ("sql/reports.sql", 7, "error", "deep-pagination"),  # beyond runtime.maxOffset
    ("sql/reports.sql", 9, "warning", "full-route"),
    ("sql/reports.sql", 9, "warning", "deep-pagination"),  # OFFSET 2000 >= --deep-offset 1000
    ("sql/reports.sql", 12, "warning", "cross-node"),  # single table joined with a shard elsewhere
}




def test_every_known_finding_and_nothing_else() -> None:
    result = run("lint", "-c", CONFIG, str(FIXTURE), "--format", "json")
    assert result.exit_code == 1, result.output
    data = json.loads(result.output)
    got = {(str(Path(f["path"]).relative_to(FIXTURE)), f["line"], f["severity"], f["rule"]) for f in data["findings"]}
    assert got == EXPECTED
    assert data["files"] == 3
    for f in data["findings"]:
        assert f["fix"] and f["message"] and f["sql"]
        assert "(statement:" not in f["message"]  # the statement is shown once, in "sql"
    shard_key = next(f for f in data["findings"] if f["rule"] == "shard-key-update")
    assert "user_id" in shard_key["message"] and "delete it and insert it again" in shard_key["fix"]


def test_clean_code_passes_and_what_is_not_sql_is_left_alone() -> None:
    clean = FIXTURE / "app" / "clean.py"
    result = run("lint", "-c", CONFIG, str(clean))
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "3 statements in 1 files: 0 errors, 0 warnings"  # not the docstring
    found = sql_of_file(FIXTURE / "app" / "orders.py")
    texts = {f.sql for f in found}
    assert "Select a colour" in texts  # starts like SQL, found, but judged not SQL (no finding at line 24)
    assert "SELECT * FROM t_order WHERE user_id = %(uid)s" in texts  # text() :uid became %(uid)s
    assert not any(f.sql.startswith("A fixture application") for f in found)  # the module docstring


def test_text_and_github_formats_and_fail_on() -> None:
    text = run("lint", "-c", CONFIG, str(FIXTURE / "sql"))
    assert text.exit_code == 1
    first = text.output.splitlines()[0]
    assert first == f"{FIXTURE / 'sql' / 'reports.sql'}:2: warning [full-route] t_order: no condition on " \
                    "user_id narrows the route: every node (16 nodes)"  # fmt: skip
    gh = run("lint", "-c", CONFIG, str(FIXTURE / "sql"), "--format", "github")
    lines = gh.output.splitlines()
    assert len(lines) == 5
    assert lines[1].startswith(f"::error file={FIXTURE / 'sql' / 'reports.sql'},line=7,"
                               "title=ddm lint deep-pagination::OFFSET 50000 across shards")  # fmt: skip
    assert "%0Afix: page with a keyset condition" in lines[1]
    report = lint_paths(load_config(CONFIG), [FIXTURE / "sql"])  # the library call behind the command
    assert len(report.findings) == 5 and report.statements == 8 and report.failed("error")
    cross = [f for f in report.findings if f.rule == "cross-node"]
    assert len(cross) == 1 and "answered across nodes" in cross[0].message and "t_config" in cross[0].message
    deep = run("lint", "-c", CONFIG, str(FIXTURE / "sql"), "--deep-offset", "5000", "--format", "json")
    rules = {(f["line"], f["rule"]) for f in json.loads(deep.output)["findings"]}
    assert (9, "deep-pagination") not in rules and (9, "full-route") in rules


def test_warnings_only_pass_with_fail_on_error(tmp_path: Path) -> None:
    src = tmp_path / "report.py"
    src.write_text('def totals(cur):\n    cur.execute("SELECT SUM(amount) FROM t_order")\n')
    assert run("lint", "-c", CONFIG, str(src)).exit_code == 1
    result = run("lint", "-c", CONFIG, str(src), "--fail-on", "error")
    assert result.exit_code == 0
    assert f"{src}:2: warning [full-route]" in result.output


def test_unreadable_inputs_are_errors(tmp_path: Path) -> None:
    missing = run("lint", "-c", CONFIG, str(tmp_path / "nope"))
    assert missing.exit_code == 2 and "does not exist" in missing.stderr
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n")
    result = run("lint", "-c", CONFIG, str(broken))
    assert result.exit_code == 2 and f"lint cannot parse {str(broken)!r} as Python" in result.stderr
    unterminated = tmp_path / "bad.sql"
    unterminated.write_text("SELECT 'open FROM t_order;\n")
    bad = json.loads(run("lint", "-c", CONFIG, str(unterminated), "--format", "json").output)
    assert [(f["line"], f["rule"]) for f in bad["findings"]] == [(1, "unsupported")]
