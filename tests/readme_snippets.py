"""README.md's snippets, read from the README and run as a reader pasting them would.

``tests/test_readme.py`` runs them in the test venv; ``.ci/bare_check.py`` runs them in a venv
holding ddm-core without any extra, so this module needs nothing but ddm-core's own
dependencies (no pytest).
"""

from __future__ import annotations

import ast
import contextlib
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"

__all__ = ["README", "section", "python_blocks", "ddm_commands", "variants", "example_commands", "copy_examples", "ddm", "run_blocks",
           "create_example_tables"]  # fmt: skip


def section(title: str) -> str:
    """The text of README's ``## <title>`` section, up to the next ``## `` heading."""
    text = README.read_text(encoding="utf-8")
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    if m is None:
        raise LookupError(f"README.md has no '## {title}' section")
    return m.group(1)


def python_blocks(text: str) -> list[str]:
    """The ```python blocks of ``text``, in order."""
    return re.findall(r"```python\n(.*?)```", text, re.S)


def ddm_commands(text: str) -> list[str]:
    """The inline ```ddm ...``` commands of ``text``, in order."""
    return re.findall(r"`(ddm [^`]+)`", text)


def variants(command: str) -> list[str]:
    """A command with its optional ``[--option]`` parts left out, and with them written out."""
    optional = re.compile(r"\s*\[(--[^\]]*)\]")
    if not optional.search(command):
        return [command]
    return [optional.sub("", command), optional.sub(r" \1", command)]


def example_commands(text: str) -> list[str]:
    """The ``ddm`` commands of ``text`` that run against ``examples/``, optional parts left out and written out."""
    return [v for c in ddm_commands(text) if " examples/" in c for v in variants(c)]


def copy_examples(workdir: Path) -> Path:
    """A copy of ``examples/`` (without its SQLite files) in ``workdir``, so the checkout stays untouched."""
    target = workdir / "examples"
    shutil.copytree(ROOT / "examples", target, ignore=shutil.ignore_patterns("data"))
    return target


def ddm(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``command`` (``ddm ...`` as written in the README) run by a shell in ``cwd``, with this interpreter's ddm."""
    argv = shlex.split(command)
    assert argv[0] == "ddm", command
    return subprocess.run([sys.executable, "-m", "ddm_core.cli", *argv[1:]], cwd=cwd, capture_output=True,
                          text=True, timeout=600)  # fmt: skip


@contextlib.contextmanager
def _working_directory(path: Path) -> Iterator[None]:
    before = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def run_blocks(blocks: list[str], cwd: Path, namespace: dict[str, object]) -> str:
    """Run ``blocks`` one after another in ``namespace`` from ``cwd``; returns what they printed."""
    text = README.read_text(encoding="utf-8")
    out = io.StringIO()
    with _working_directory(cwd), contextlib.redirect_stdout(out):
        for block in blocks:
            tree = ast.parse(block)
            ast.increment_lineno(tree, text[: text.find(block)].count("\n"))  # tracebacks name README's lines
            exec(compile(tree, str(README), "exec"), namespace)  # noqa: S102 - the README's own code
    return out.getvalue()


def create_example_tables(workdir: Path) -> None:
    """Copy ``examples/`` into ``workdir`` and run the "Using it" section's ``ddm ddl ... --execute`` there.

    Raises:
        AssertionError: the section names no such command, or the command failed.
    """
    commands = [c for c in ddm_commands(section("Using it")) if c.startswith("ddm ddl ") and c.endswith("--execute")]
    assert commands, "README's 'Using it' says how to create the example tables"
    copy_examples(workdir)
    done = ddm(commands[0], workdir)
    assert done.returncode == 0, f"{commands[0]}: exit {done.returncode}\n{done.stdout}{done.stderr}"
