"""The error hierarchy lives in one module: every ``DdmError`` subclass is defined in ``ddm_core.errors`` and exported.

Callers catch ddm-core's errors by importing them from ``ddm_core.errors`` (or ``ddm_core``, which
re-exports ``errors.__all__``); an error class defined next to the code that raises it, or left out of
``__all__``, is one they cannot find there. The classes outside ``errors.py`` are found in the source
(no module is imported), so a module that needs an optional extra is read too.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import ddm_core
from ddm_core import errors
from ddm_core.errors import DdmError

PACKAGE = Path(errors.__file__).parent

#: ``module:Class`` of a DdmError subclass allowed outside ddm_core/errors.py, with the reason.
DEFINED_ELSEWHERE: dict[str, str] = {}


def _error_classes() -> dict[str, type[DdmError]]:
    """The DdmError subclasses ddm_core.errors defines (not the ones it imports), by name."""
    return {name: obj for name, obj in vars(errors).items()
            if inspect.isclass(obj) and issubclass(obj, DdmError) and obj.__module__ == errors.__name__}  # fmt: skip


def _base_names(node: ast.ClassDef) -> set[str]:
    """``ConfigError`` for ``class X(ConfigError)`` and ``class X(errors.ConfigError)``."""
    return {b.id if isinstance(b, ast.Name) else b.attr for b in node.bases if isinstance(b, (ast.Name, ast.Attribute))}


def _defined_outside(root: Path, error_names: set[str]) -> list[str]:
    """``module:Class`` of every class under ``root`` outside errors.py deriving from an error (also indirectly)."""
    classes = [
        (path, node)
        for path in sorted(root.rglob("*.py")) if path.name != "errors.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(node, ast.ClassDef)
    ]
    known: set[str] = set(error_names)
    found: set[tuple[Path, str]] = set()
    while True:
        new = {(path, node.name) for path, node in classes if _base_names(node) & known} - found
        if not new:
            break
        found |= new
        known |= {name for _, name in new}
    return sorted(".".join(path.relative_to(root).with_suffix("").parts) + f":{name}" for path, name in found)


def test_every_error_class_is_defined_in_errors() -> None:
    outside = [name for name in _defined_outside(PACKAGE, set(_error_classes())) if name not in DEFINED_ELSEWHERE]
    assert outside == [], f"define these in ddm_core/errors.py (re-export them where they were): {outside}"


def test_every_error_class_is_exported() -> None:
    defined = _error_classes()
    assert sorted(set(defined) - set(errors.__all__)) == [], "add them to errors.__all__"
    assert sorted(set(errors.__all__) - set(defined)) == [], "errors.__all__ names only the errors it defines"
    assert len(errors.__all__) == len(set(errors.__all__))
    assert all(getattr(ddm_core, name) is cls for name, cls in defined.items()), "ddm_core re-exports every error"


def test_the_reader_finds_subclasses_in_source(tmp_path: Path) -> None:
    """The finder itself: direct, dotted and indirect subclasses count; other classes and errors.py do not."""
    (tmp_path / "errors.py").write_text("class ConfigError(DdmError): pass\n")
    (tmp_path / "block.py").write_text("class BlockError(errors.ConfigError): pass\nclass Plain(Exception): pass\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "deeper.py").write_text("class DeeperError(BlockError): pass\nclass Other(ValueError): pass\n")
    assert _defined_outside(tmp_path, {"DdmError", "ConfigError"}) == ["block:BlockError", "sub.deeper:DeeperError"]
