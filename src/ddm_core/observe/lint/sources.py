"""Where ``ddm lint`` finds SQL: ``.sql`` files and string literals of ``.py`` files (docs/observability.md#lint).

* ``.sql`` — split at top-level ``;`` by :func:`ddm_core.ddl.split_statements`
  (strings, identifiers and comments respected), each statement with its line;
* ``.py`` — read with :mod:`ast`, never imported: the first argument of calls
  named like a database call (``execute``, ``executemany``, ``text``,
  ``query``, ``exec_driver_sql``, ``read_sql``...) when it is a string literal,
  and any other string constant (not a docstring) that starts like a
  statement (``SELECT``, ``INSERT``, ``UPDATE``, ``DELETE``, ``REPLACE``,
  ``WITH``). SQLAlchemy ``text()`` ``:name`` parameters become ``%(name)s``.
  f-strings and concatenations at run time are not constants and are not seen.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from ddm_core.ddl import split_statements
from ddm_core.errors import DdmError, ObserveError

__all__ = ["FoundSql", "sql_of_file", "files_under", "SQL_CALLS"]

#: Call names whose first string argument is SQL.
SQL_CALLS = frozenset({"execute", "executemany", "text", "query", "raw", "exec_driver_sql", "read_sql",
                       "read_sql_query", "fetch", "fetchrow", "fetchval"})  # fmt: skip
_STATEMENT_START = re.compile(r"\s*(?:\(\s*)*(SELECT|INSERT|UPDATE|DELETE|REPLACE|WITH)\b", re.IGNORECASE)
_COLON_PARAM = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")
_SKIPPED_DIRS = {".git", ".venv", "venv", "node_modules", "__pycache__", ".tox", "build", "dist"}


@dataclass(frozen=True, slots=True)
class FoundSql:
    """One statement found in a file.

    Attributes:
        path: The file, as given or found.
        line: 1-based line where the statement (or the string literal) starts.
        sql: The statement text.
        certain: It is SQL for sure (a ``.sql`` file or a database call's
            argument), so text that cannot be parsed is reported; a plain
            constant that does not parse is just not SQL.
    """

    path: str
    line: int
    sql: str
    certain: bool


def files_under(paths: Iterable[str | Path]) -> Iterator[Path]:
    """Every ``.sql`` and ``.py`` file of ``paths`` (files as given, directories walked, sorted)."""
    for p in paths:
        path = Path(p)
        if path.is_file():
            yield path
        elif path.is_dir():
            for found in sorted(path.rglob("*")):
                if found.suffix in (".sql", ".py") and found.is_file() and not (_SKIPPED_DIRS & set(found.parts)):
                    yield found
        else:
            raise ObserveError(f"lint path {str(p)!r} does not exist", path=str(p))


def sql_of_file(path: Path, shown: str | None = None) -> list[FoundSql]:
    """The statements of one ``.sql`` or ``.py`` file.

    Raises:
        ObserveError: the file cannot be read, or a ``.py`` file is not valid Python.
    """
    name = shown or str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ObserveError(f"lint cannot read {name!r}: {exc}", path=name) from exc
    if path.suffix == ".py":
        return _python(text, name)
    try:
        return [FoundSql(name, s.line, s.sql, True) for s in split_statements(text)]
    except DdmError:  # an unterminated string: the whole file is one statement, reported as unreadable
        return [FoundSql(name, 1, text.strip(), True)]


def _python(text: str, name: str) -> list[FoundSql]:
    try:
        tree = ast.parse(text, filename=name)
    except SyntaxError as exc:
        raise ObserveError(f"lint cannot parse {name!r} as Python: {exc.msg} (line {exc.lineno})", path=name) from exc
    skipped: set[int] = set(_docstrings(tree))
    out: list[FoundSql] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        first = node.args[0]
        if called in SQL_CALLS and isinstance(first, ast.Constant) and isinstance(first.value, str):
            skipped.add(id(first))
            sql = _COLON_PARAM.sub(r"%(\1)s", first.value) if called == "text" else first.value
            out.append(FoundSql(name, first.lineno, sql, True))
    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skipped
                and _STATEMENT_START.match(node.value)):  # fmt: skip
            out.append(FoundSql(name, node.lineno, node.value, False))
    out.sort(key=lambda f: f.line)
    return out


def _docstrings(tree: ast.AST) -> Iterator[int]:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                yield id(first.value)
