"""``ddm lint`` output: text for people, JSON for tools, GitHub workflow annotations for pull requests."""

from __future__ import annotations

import json
from typing import Sequence

from ddm_core.observe.lint.rules import Finding

__all__ = ["text", "as_json", "github", "FORMATS"]

FORMATS = ("text", "json", "github")


def text(findings: Sequence[Finding], statements: int, files: int) -> str:
    lines = []
    for f in findings:
        lines.append(f"{f.path}:{f.line}: {f.severity} [{f.rule}] {f.message}")
        lines.append(f"    fix: {f.fix}")
        lines.append(f"    sql: {f.sql}")
    errors = sum(1 for f in findings if f.severity == "error")
    lines.append(f"{statements} statements in {files} files: {errors} errors, {len(findings) - errors} warnings")
    return "\n".join(lines)


def as_json(findings: Sequence[Finding], statements: int, files: int) -> str:
    return json.dumps({"files": files, "statements": statements, "findings": [f.to_json() for f in findings]},
                      indent=2)  # fmt: skip


def _escape(value: str, *, prop: bool = False) -> str:
    # https://github.com/actions/toolkit/blob/main/packages/core/src/command.ts (escapeData / escapeProperty)
    value = value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return value.replace(":", "%3A").replace(",", "%2C") if prop else value


def github(findings: Sequence[Finding], statements: int, files: int) -> str:
    """``::error file=...,line=...,title=...::message`` lines, one per finding."""
    out = []
    for f in findings:
        title = _escape(f"ddm lint {f.rule}", prop=True)
        out.append(f"::{f.severity} file={_escape(f.path, prop=True)},line={f.line},title={title}::"
                   + _escape(f"{f.message}\nfix: {f.fix}"))  # fmt: skip
    return "\n".join(out)
