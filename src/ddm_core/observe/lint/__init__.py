"""``ddm lint``: the SQL of a code base routed against a configuration, without running it (docs/observability.md#lint).

``lint_paths(config, ["src/", "sql/"])`` finds the statements
(:mod:`.sources`), judges each (:mod:`.rules`) and returns a :class:`LintReport`;
:mod:`.output` writes it as text, JSON or GitHub annotations.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from ddm_core.metadata.model import ShardingConfig
from ddm_core.observe.lint.rules import ERROR, RULES, WARNING, Finding, LintSettings, lint_statement
from ddm_core.observe.lint.sources import FoundSql, files_under, sql_of_file
from ddm_core.route.router import Router

__all__ = ["LintReport", "lint_paths", "lint_sql", "Finding", "LintSettings", "RULES", "ERROR", "WARNING", "FoundSql"]


@dataclass(frozen=True, slots=True)
class LintReport:
    findings: tuple[Finding, ...]
    statements: int
    files: int

    def failed(self, fail_on: str = WARNING) -> bool:
        """Any finding at ``fail_on`` severity or worse (``error`` or ``warning``)?"""
        levels = (ERROR,) if fail_on == ERROR else (ERROR, WARNING)
        return any(f.severity in levels for f in self.findings)


def lint_sql(config: ShardingConfig, found: Iterable[FoundSql], settings: LintSettings = LintSettings()) -> list[Finding]:
    router = Router(config)
    out: list[Finding] = []
    for statement in found:
        out.extend(lint_statement(router, statement, settings))
    return out


def lint_paths(
    config: ShardingConfig, paths: Iterable[str | Path], settings: LintSettings = LintSettings()
) -> LintReport:
    """Lint every ``.sql`` and ``.py`` file of ``paths`` (directories walked).

    Raises:
        ObserveError: a path does not exist, a file cannot be read, a ``.py`` file is not valid Python.
    """
    found: list[FoundSql] = []
    files = 0
    for path in files_under(paths):
        files += 1
        found.extend(sql_of_file(path))
    findings = lint_sql(config, found, settings)
    return LintReport(tuple(findings), len(found), files)
