"""ddm-core without its extras: what ``pip install .`` gives a new user (README's first command).

``.ci/bare_check.py`` is the check CI runs in venvs that really hold no extra
(``.ci/bare_install.sh``: the checkout and the built wheel). Here it runs in the test venv with
every extra's modules made unimportable — a ``sitecustomize`` on ``PYTHONPATH`` puts ``None`` into
``sys.modules`` for them, which is how Python reports a module as missing — so the suite catches a
new top-level import of an optional package without building a venv.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

from ddm_core._extras import EXTRA_MODULES
from ddm_core.cli.proxy_cmd import LOOP_CHOICES
from ddm_core.proxy.eventloop import LOOPS

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parent.parent
#: Extras no feature needs: the test and wheel-building tools, sqlglotc (a faster parse) and the
#: empty ``mysql`` kept for old install lines.
NOT_FEATURES = {"test", "wheels", "fast", "mysql"}


def _extras() -> dict[str, list[str]]:
    with open(ROOT / "pyproject.toml", "rb") as f:
        extras: dict[str, list[str]] = tomllib.load(f)["project"]["optional-dependencies"]
    return extras


def _distribution(requirement: str) -> str:
    m = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert m is not None, requirement
    return re.sub(r"[-_.]+", "-", m.group(0)).lower()


def _modules_of(distribution: str) -> set[str]:
    """The top-level modules an installed distribution provides."""
    return {module for module, dists in packages_distributions().items()
            if distribution in {_distribution(d) for d in dists}}  # fmt: skip


def _optional_modules() -> list[str]:
    """Every top-level module a feature's extra installs (``fast``'s sqlglotc only speeds sqlglot up, in place)."""
    requirements = [r for name, reqs in _extras().items() if name not in NOT_FEATURES for r in reqs]
    modules = {m for r in requirements for m in _modules_of(_distribution(r))}
    assert {"mysql_mimic", "prometheus_client", "pymysqlreplication", "psycopg", "redis"} <= modules
    return sorted(modules)


def test_the_bare_check_passes_with_no_extra_importable(tmp_path: Path) -> None:
    blocked = _optional_modules()
    (tmp_path / "sitecustomize.py").write_text(
        "import sys\n"
        f"for name in {blocked!r}:\n"
        "    sys.modules[name] = None  # as if not installed: import raises ModuleNotFoundError\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, str(ROOT / ".ci" / "bare_check.py")], env=env, capture_output=True,
                          text=True, timeout=900)  # fmt: skip
    assert done.returncode == 0, f"{shlex.join(done.args)} with {blocked} blocked:\n{done.stdout}\n{done.stderr}"
    assert "bare install: all checks passed" in done.stdout
    # The check saw the commands refuse and the demo run (not a vacuous pass).
    assert re.search(r"ok   1[0-9] commands refuse naming their extra, exit 2: metrics, migrate, proxy, redis",
                     done.stdout), done.stdout  # fmt: skip
    assert "ok   ddm demo --orders 2000" in done.stdout
    assert "ok   README's metrics snippet: ddm_core.metrics.install needs the 'metrics' extra" in done.stdout


def test_the_extras_table_is_pyprojects() -> None:
    extras = _extras()
    assert set(EXTRA_MODULES) == set(extras) - NOT_FEATURES
    for extra, modules in EXTRA_MODULES.items():
        provided = {m for r in extras[extra] for m in _modules_of(_distribution(r))}
        assert set(modules) <= provided, f"extra {extra!r} installs {sorted(provided)}, not {modules}"


def test_the_test_extra_is_every_feature_extra() -> None:
    [itself] = [r for r in _extras()["test"] if r.startswith("ddm-core[")]
    assert set(itself[len("ddm-core["):itself.index("]")].split(",")) == set(_extras()) - NOT_FEATURES


def test_the_proxy_commands_loop_choices_are_the_event_loops() -> None:
    assert LOOP_CHOICES == LOOPS


def test_make_test_installs_the_debian_tools_the_tests_name() -> None:
    """Every ``apt-get install X`` a test or benchmark names as its remedy is installed by ``make test``."""
    named: set[str] = set()
    for path in [*(ROOT / "tests").glob("*.py"), *(ROOT / "benchmarks").glob("*.py")]:
        for m in re.finditer(r"apt-get install (?:-y )?([a-z0-9.+-]+)", path.read_text(encoding="utf-8")):
            named.add(m.group(1))
    assert {"sysbench", "percona-toolkit", "valgrind"} <= named
    dry = subprocess.run(["make", "-n", "test"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0, dry.stderr
    [script] = re.findall(r"^bash (\S+)$", dry.stdout, re.M)[:1]
    text = (ROOT / script).read_text(encoding="utf-8")
    installed = set(re.findall(r"[a-z0-9-]+:([a-z0-9.+-]+)", text))
    assert named <= installed, f"make test runs {script}, which installs {sorted(installed)}, not {sorted(named)}"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    run_the_tests = re.search(r"^## Run the tests\n+```bash\n(.*?)```", readme, re.S | re.M)
    assert run_the_tests is not None and run_the_tests.group(1).strip() == "make test"
    assert re.search(r"^make test$", (ROOT / ".ci" / "run").read_text(encoding="utf-8"), re.M)
