"""Running the ``ddm`` command in-process for the tests (no tests here)."""

from __future__ import annotations

from click.testing import CliRunner, Result

from ddm_core.cli import cli


def run(*args: str, env: dict[str, str] | None = None) -> Result:
    """``ddm ARGS...``; ``result.stderr`` is kept apart from ``result.stdout`` on every click version."""
    try:
        runner = CliRunner(mix_stderr=False)  # type: ignore[call-arg]  # click < 8.2
    except TypeError:
        runner = CliRunner()  # click >= 8.2 keeps stderr apart
    return runner.invoke(cli, list(args), env=env, catch_exceptions=False)
