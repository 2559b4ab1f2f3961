"""What a user gets from ddm-core installed without any extra: the README's front door.

Run it with the Python of a venv that holds ddm-core and nothing of its extras
(``.ci/bare_install.sh`` makes two: ``pip install .`` and the built wheel)::

    /tmp/bare/bin/python .ci/bare_check.py

It checks that
- ``ddm_core`` and every public module import, or refuse with one line naming the extra;
- ``ddm --help`` and ``ddm <command> --help`` work for every command;
- every command that needs an extra exits 2 with the one line naming it, no traceback;
- ``ddm demo --orders 2000`` runs;
- README's snippets that need no extra run as written (the "Install and run" commands, the
  "Using it" blocks), and the metrics and asyncio snippets are refused naming their extras.

Each problem is listed; the exit status is 1 when there is any.
"""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Callable

import click
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # readme_snippets: README's snippets, shared with tests/test_readme.py

import readme_snippets  # noqa: E402

CONFIG = "examples/orders.yaml"
_MIGRATION = ["--from", CONFIG, "--to", CONFIG, "--state", "ds_0", "--name", "m"]
_CUTOVER = ["-c", CONFIG, "--table", "t_order", "--legacy", "mysql://127.0.0.1:3306/legacy"]
_REDIS = ["--redis", "redis://127.0.0.1:6379/0"]

#: Arguments that get each command needing an extra past click's own checks; the command must
#: then refuse before it does anything (nothing is connected to).
EXTRA_COMMAND_ARGS: dict[str, list[str]] = {
    "proxy": ["-c", CONFIG],
    "metrics serve": ["-c", CONFIG, "--port", "9108"],
    "config push": [*_REDIS, CONFIG],
    "config history": _REDIS,
    "config rollback": [*_REDIS, "--to", "1"],
    "config promote": [*_REDIS, "--group", "canary"],
    "migrate catch-up": _MIGRATION,
    "migrate start": _MIGRATION,
    "migrate verify": _MIGRATION,
    "migrate shift-reads": ["10", *_MIGRATION],
    "migrate cutover": _MIGRATION,
    "cutover start": _CUTOVER,
    "cutover sync": _CUTOVER,
    "cutover advance": [*_CUTOVER, "--buckets", "0"],
    "cutover rollback": [*_CUTOVER, "--buckets", "0"],
    "cutover check": _CUTOVER,
}

problems: list[str] = []


def problem(text: str) -> None:
    problems.append(text)
    print(f"FAIL {text}", flush=True)


def ok(text: str) -> None:
    print(f"ok   {text}", flush=True)


def ddm(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """The ``ddm`` console script of this venv (what ``pip install`` put on PATH)."""
    script = Path(sys.executable).with_name("ddm")
    return subprocess.run([str(script), *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def the_venv_is_bare() -> bool:
    from ddm_core._extras import EXTRA_MODULES

    installed = [m for modules in EXTRA_MODULES.values() for m in modules if _importable(m)]
    if installed:
        problem(f"not a venv without extras: {', '.join(installed)} can be imported")
        return False
    ok(f"no extra installed ({', '.join(EXTRA_MODULES)})")
    return True


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def public_modules() -> list[str]:
    """Every module of the installed package whose dotted name has no ``_`` part (``__main__`` runs the CLI)."""
    spec = importlib.util.find_spec("ddm_core")
    assert spec is not None and spec.origin is not None
    package = Path(spec.origin).parent
    names: set[str] = set()
    for path in package.rglob("*"):
        if path.suffix not in (".py", ".so", ".pyd"):
            continue
        parts = ["ddm_core", *path.relative_to(package).parent.parts, path.name.split(".")[0]]
        if parts[-1] == "__init__":
            parts.pop()
        if not any(p.startswith("_") for p in parts):
            names.add(".".join(parts))
    return sorted(names)


def check_imports() -> None:
    from ddm_core.errors import MissingExtraError

    import ddm_core

    ok(f"import ddm_core ({ddm_core.implementation()})")
    refused: dict[str, list[str]] = {}
    for name in public_modules():
        try:
            importlib.import_module(name)
        except MissingExtraError as exc:
            if f"needs the {exc.extra!r} extra: pip install 'ddm-core[{exc.extra}]'" not in str(exc):
                problem(f"import {name}: {exc}")
            refused.setdefault(exc.extra, []).append(name)
        except BaseException as exc:  # noqa: BLE001 - any other failure is the finding
            problem(f"import {name}: {type(exc).__name__}: {exc}")
    # A refused package refuses its modules too: name the package once.
    named = {extra: [n for n in names if not any(n.startswith(f"{p}.") for p in names)]
             for extra, names in refused.items()}  # fmt: skip
    ok(f"{len(public_modules())} public modules import, or refuse naming their extra: "
       + "; ".join(f"{extra}: {', '.join(named[extra])} ({len(names)} module(s))" for extra, names in refused.items()))


def commands() -> dict[str, click.Command]:
    """Every command and command group of ``ddm``, by its path after ``ddm``."""
    from ddm_core.cli import cli

    found: dict[str, click.Command] = {}

    def walk(group: click.Group, path: list[str]) -> None:
        for name, command in group.commands.items():
            found[" ".join([*path, name])] = command
            if isinstance(command, click.Group):
                walk(command, [*path, name])

    walk(cli, [])
    return found


def check_help(cwd: Path) -> None:
    from ddm_core.cli import cli

    done = ddm(["--help"], cwd)
    if done.returncode != 0 or "Traceback" in done.stderr:
        problem(f"ddm --help: exit {done.returncode}\n{done.stderr}")
    runner = CliRunner()
    for path in commands():
        result = runner.invoke(cli, [*path.split(), "--help"], prog_name="ddm")
        if result.exit_code != 0 or result.exception is not None:
            problem(f"ddm {path} --help: exit {result.exit_code}: {result.exception!r}\n{result.output}")
    ok(f"ddm --help and ddm <command> --help for {len(commands())} commands")


def check_extra_commands(cwd: Path) -> None:
    from ddm_core.errors import MissingExtraError

    needing = {path: getattr(c.callback, "needs_extra", None) for path, c in commands().items()}
    needing = {path: extra for path, extra in needing.items() if extra is not None}
    if set(needing) != set(EXTRA_COMMAND_ARGS):
        problem(f"EXTRA_COMMAND_ARGS lists {sorted(EXTRA_COMMAND_ARGS)}, the commands needing an extra are "
                f"{sorted(needing)}")  # fmt: skip
    for path, extra in sorted(needing.items()):
        args = [*path.split(), *EXTRA_COMMAND_ARGS.get(path, [])]
        done = ddm(args, cwd)
        expected = f"error: {MissingExtraError(extra, f'ddm {path}', '').message}\n"
        if (done.returncode, done.stdout, done.stderr) != (2, "", expected):
            problem(f"ddm {' '.join(args)}: exit {done.returncode}, expected 2 and {expected!r}; "
                    f"stdout {done.stdout!r}, stderr {done.stderr!r}")  # fmt: skip
    ok(f"{len(needing)} commands refuse naming their extra, exit 2: {', '.join(sorted(set(needing.values())))}")


def check_demo(cwd: Path) -> None:
    done = ddm(["demo", "--orders", "2000"], cwd)
    if done.returncode != 0 or "Traceback" in done.stderr:
        problem(f"ddm demo --orders 2000: exit {done.returncode}\n{done.stdout[-2000:]}{done.stderr[-4000:]}")
    else:
        ok("ddm demo --orders 2000")


def check_readme(workdir: Path) -> None:
    from ddm_core.errors import MissingExtraError

    commands = readme_snippets.example_commands(readme_snippets.section("Install and run"))
    readme_snippets.copy_examples(workdir / "commands")
    for command in commands:
        done = readme_snippets.ddm(command, workdir / "commands")
        if done.returncode != 0:
            problem(f"README {command}: exit {done.returncode}\n{done.stdout}{done.stderr}")
    ok(f"README's {len(commands)} commands of 'Install and run'")

    using_it = workdir / "using_it"
    readme_snippets.create_example_tables(using_it)
    namespace: dict[str, object] = {"__name__": "readme"}
    readme_snippets.run_blocks(readme_snippets.python_blocks(readme_snippets.section("Using it")), using_it, namespace)
    ok("README's 'Using it' snippets")

    [metrics] = [b for b in readme_snippets.python_blocks(readme_snippets.section("Operating a sharded fleet"))
                 if "metrics.install" in b]  # fmt: skip
    try:
        readme_snippets.run_blocks([metrics], using_it / "examples", {"__name__": "readme"})
    except MissingExtraError as exc:
        if exc.extra != "metrics":
            problem(f"README's metrics snippet refused naming {exc.extra!r}, not 'metrics'")
        else:
            ok(f"README's metrics snippet: {exc}")
    else:
        problem("README's metrics snippet ran without prometheus-client")

    [asyncio_block] = readme_snippets.python_blocks(readme_snippets.section("Using it from asyncio"))
    try:
        readme_snippets.run_blocks([asyncio_block], using_it, {"__name__": "readme"})
    except MissingExtraError as exc:
        if exc.extra != "aio":
            problem(f"README's asyncio snippet refused naming {exc.extra!r}, not 'aio'")
        else:
            ok(f"README's asyncio snippet: {exc}")
    else:
        problem("README's asyncio snippet ran without asyncmy and aiosqlite")


def main() -> int:
    if not the_venv_is_bare():
        return 1
    check_imports()
    steps: list[Callable[[Path], None]] = [check_help, check_extra_commands, check_demo, check_readme]
    with tempfile.TemporaryDirectory(prefix="ddm-bare-") as tmp:
        work = Path(tmp)
        readme_snippets.copy_examples(work)  # the commands' relative paths: examples/orders.yaml
        for step in steps:
            try:
                step(work)
            except Exception:  # noqa: BLE001 - reported, and the other steps still run
                problem(f"{step.__name__}:\n{traceback.format_exc()}")
    print(f"{len(problems)} problem(s)" if problems else "bare install: all checks passed", flush=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
