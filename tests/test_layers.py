"""The import rules of docs/architecture.md#import-rules, read from the source.

Nothing imports upwards: a layer may import only the layers listed for it
(cycles inside a layer: tests/test_import_cycles.py). The test reads every
module's ``import`` statements (including those inside functions and under
``TYPE_CHECKING``), so a new upward import fails here instead of surfacing
later as an import cycle or a layer that cannot be used on its own (e.g.
loading a configuration without sqlglot).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "ddm_core"

FACES = {"hashing", "slots", "ids"}
# Non-selected helpers of the compiled core: plain constants and validation shared
# by both twins, so importing them picks no implementation.
FAST_LAYOUT = {"_fast.id_layout", "_fast.slot_layout"}

ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "_text": set(),
    "_extras": {"errors"},
    "dialects": {"errors", "_text"},
    "_fast": {"errors", "_text"},
    "hashing": {"_fast"},
    "slots": {"_fast"},
    "ids": {"_fast"},
    "algorithms": {"errors", "_text"} | FACES - {"ids"},
    # slots: which slots a migration moves is a fact of two configurations (metadata/slot_moves.py).
    "metadata": {"algorithms", "dialects", "errors", "_text", "slots"} | FAST_LAYOUT,
    "merge": {"_fast", "dialects", "errors", "_text"},
    # _fast: the point unit, for route/query/point_path.py (the router's compiled hit path).
    "route": {"_fast", "metadata", "algorithms", "merge.spec", "dialects", "errors", "_text"} | FACES,
    "readwrite": {"metadata", "dialects", "errors", "_text"},
    "execute": {"_fast", "route", "merge", "metadata", "dialects", "errors", "_text", "readwrite"},
    # Operations packages: over every layer (and the DDL tool), never each other's internals.
    "migrate": {"ddl", "execute", "route", "merge", "metadata", "algorithms", "dialects", "errors", "_text"} | FACES,
    # The gray cut-over (docs/cutover.md): the migration's copy, replay, checker and publisher, reused.
    "cutover": {"migrate", "ddl", "execute", "route", "merge", "metadata", "algorithms", "dialects", "errors",
                "_text"} | FACES,
    "xa": {"execute", "route", "metadata", "dialects", "errors", "_text"},
    # Cross-node SELECTs (docs/cross-node-queries.md): runs the router's plans, registered like "xa".
    "crossnode": {"execute", "aio", "route", "metadata", "dialects", "errors", "_text"},
    "outbox": {"execute", "route", "metadata", "dialects", "errors", "_text"},
    "idlease": {"execute", "route", "metadata", "dialects", "ids", "errors", "_text"},
    # Observability (docs/observability.md): reuses the migration's schema check and its connections.
    "observe": {"execute", "route", "merge.spec", "merge.memory", "metadata", "algorithms", "dialects", "errors", "_text",
                "migrate.schema_check", "migrate.connections", "migrate.tables", "ddl"} | FACES,
    "metrics": {"observe", "execute", "errors"},  # the face over observe/
    # The MySQL-protocol proxy (docs/proxy.md): a session is an executor transaction or autocommit.
    "proxy": {"_fast", "execute", "route", "merge.spec", "merge.collation", "merge.aggregate", "metadata", "dialects", "errors", "_text", "session_statements",
              "session_facts"},
    # Which statements a client session answers itself (the proxy's and the DB-API facade's): no imports.
    "session_statements": set(),
    # What a DB-API facade session answers about itself (docs/sqlalchemy.md#what-the-facade-answers).
    "session_facts": {"execute", "metadata", "route", "session_statements", "errors"},
    # The asyncio runner (docs/asyncio.md): the execute layer's engine and rules, its own I/O;
    # its DB-API facade (aio/dbapi.py) shares the thread facade's PEP 249 classes and checks.
    "aio": {"execute", "route", "merge.spec", "metadata", "dialects", "errors", "_text", "_extras", "readwrite", "dbapi", "xa",
            "session_facts"},
}
# The access layer (dbapi, cli, ddl, hinting, the SQLAlchemy dialects, following a configuration center by URL,
# the package __init__) may import
# anything below it.
ACCESS = {"dbapi", "dbapi_types", "cli", "ddl", "hinting", "__init__", "sqlalchemy", "config_center"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts) or "__init__"


def _imports(path: Path, module: str) -> set[str]:
    """ddm_core-relative names of everything ``path`` imports from the package."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                names = [".".join(["ddm_core", *base, *([node.module] if node.module else [])])]
            else:
                names = [node.module or ""]
            # `from ddm_core.xa import branches` imports the module `xa.branches`, not the package;
            # `from ddm_core import DdmError` imports the top-level package (`__init__`).
            top = "ddm_core.__init__" if names[0] == "ddm_core" else names[0]
            names = [_submodule(f"{names[0]}.{alias.name}") or top for alias in node.names]
        else:
            continue
        found.update(n.removeprefix("ddm_core.") for n in names if n.startswith("ddm_core."))
    return found


def _submodule(dotted: str) -> str | None:
    """``dotted`` when it names a module of the package (``ddm_core.xa.branches``), else ``None``."""
    parts = dotted.split(".")
    if parts[0] != "ddm_core":
        return None
    base = PACKAGE.joinpath(*parts[1:])
    return dotted if base.with_suffix(".py").exists() or (base / "__init__.py").exists() else None


def _layer(module: str) -> str:
    return module.split(".")[0]


# Leaves every layer may import: the check for an optional dependency (``_extras.require_extra``).
LEAVES = {"_extras"}


def _allowed(layer: str, target: str) -> bool:
    rules = ALLOWED[layer] | LEAVES
    return _layer(target) in rules or any(target == r or target.startswith(r + ".") for r in rules)


MODULES = sorted(PACKAGE.rglob("*.py"))


def test_every_layer_has_a_rule() -> None:
    layers = {_layer(_module_name(p)) for p in MODULES}
    assert layers - ACCESS - set(ALLOWED) == set(), "add the new layer to docs/architecture.md and ALLOWED"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_downwards(path: Path) -> None:
    module = _module_name(path)
    layer = _layer(module)
    if layer in ACCESS:
        return
    upward = sorted(
        target for target in _imports(path, module) if _layer(target) != layer and not _allowed(layer, target)
    )
    assert upward == [], f"{module} ({layer}) imports {upward}: see docs/architecture.md#import-rules"


def test_the_rule_reader_sees_imports(tmp_path: Path) -> None:
    """The reader itself: relative, absolute and package-level forms all count."""
    route_query = PACKAGE / "route" / "query" / "query.py"
    assert "metadata.model" in _imports(route_query, "route.query.query") or any(
        t.startswith("metadata") for t in _imports(route_query, "route.query.query")
    )
    assert not _allowed("metadata", "route.router")
    assert not _allowed("merge", "route")
    assert _allowed("route", "merge.spec") and not _allowed("route", "merge.engine")
    recovery = _imports(PACKAGE / "xa" / "recovery.py", "xa.recovery")
    assert {"xa.branches", "xa.runtime"} <= recovery and "xa" not in recovery, "submodules, not the package"
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from ddm_core import load_config, dialects\n", encoding="utf-8")
    assert _imports(module, "cli.m") == {"__init__", "dialects"}, "the top package for a name, a module for a module"

