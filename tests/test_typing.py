"""The public API is statically typed for its users: mypy --strict on a file that uses it.

``tests/typing/check_public_api.py`` pins the types a caller sees (``assert_type``)
and misuses that must stay errors (``type: ignore[...]``, unused ones are errors
under strict). A facade that hands out ``Any`` instead of the compiled units'
stubs fails both.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mypy import api as mypy_api

import ddm_core

ROOT = Path(__file__).resolve().parents[1]
CHECK_FILE = Path(__file__).resolve().parent / "typing" / "check_public_api.py"
# Where the ddm_core under test was imported from (src/, or site-packages for an
# installed wheel): mypy must read that same copy and its stubs.
IMPORT_ROOT = str(Path(ddm_core.__file__).resolve().parents[1])


def test_public_api_types_as_the_stubs_say(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if "site-packages" not in IMPORT_ROOT:  # mypy refuses site-packages on MYPYPATH
        monkeypatch.setenv("MYPYPATH", IMPORT_ROOT)
    stdout, stderr, status = mypy_api.run(
        [
            "--config-file", str(ROOT / "pyproject.toml"),
            "--strict",
            "--cache-dir", str(tmp_path / "mypy_cache"),
            "--no-error-summary",
            str(CHECK_FILE),
        ]
    )  # fmt: skip
    assert status == 0 and not stdout, f"mypy --strict {CHECK_FILE.name}:\n{stdout}{stderr}"
