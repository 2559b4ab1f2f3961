"""docs/architecture.md is true to the code: what it names exists, and every module has its line.

What is read from the page (the conventions its "Module map" section states):

* **paths** — every ``src/ddm_core/...`` path, and every backticked path (``route/text/placeholders.py``,
  ``metadata/sources/``, ``tests/test_layers.py``, ``setup.py``): from ``src/ddm_core/`` first, else from
  the repository root; ``<unit>`` stands for any name and ``*`` is a wildcard, both must match a file;
* **dotted names** — ``ddm_core.x.y`` anywhere, and backticked ``x.y.Name`` whose first part is a top-level
  module of the package (``hashing.slot_of``, ``migrate.state.WorkflowLog``): the module imports and
  has the name;
* **the module map** — one row per module of the package (``.py``, ``.pyx``, ``.pxd``), in the table
  under its folder's heading, with its job; its "defines" column names what that file itself defines
  (a ``def``, ``class`` or assignment at its top level, not an import);
* **the import rules** — each row's "may import" names are exactly what tests/test_layers.py allows,
  and the modules still in an import cycle (tests/test_import_cycles.py) are named;
* **sqlglot** — the layers below the router load and write a configuration without it;
* **links** to other pages of docs/ and to headings exist.
"""

from __future__ import annotations

import ast
import importlib
import os
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

from test_import_cycles import KNOWN_CYCLES
from test_layers import ACCESS, ALLOWED, LEAVES

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "ddm_core"
DOCS = ROOT / "docs"
DOC = DOCS / "architecture.md"

#: The package's modules: what the module map must list, one row each.
MODULE_SUFFIXES = (".py", ".pyx", ".pxd")
MODULES = sorted(
    p.relative_to(PACKAGE).as_posix()
    for p in PACKAGE.rglob("*")
    if p.suffix in MODULE_SUFFIXES and "__pycache__" not in p.parts and "vendor" not in p.parts
)

_CODE = re.compile(r"`([^`\n]+)`")
_PATH = re.compile(r"[\w.<>*-]+(?:/[\w.<>*-]*)+|[\w<>*-]+\.(?:py|pyx|pyi|pxd|md|toml|yaml)")
_DOTTED = re.compile(r"(?:ddm_core\.)?[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+(?:\(\))?")
_FILE_SUFFIX = re.compile(r"\.(?:py|pyx|pyi|pxd|md|toml|yaml|bin|so|c|h)$")
_SRC_PATH = re.compile(r"src/ddm_core(?:/[\w.<>*-]+)*/?")
_DDM_DOTTED = re.compile(r"\bddm_core(?:\.[A-Za-z_]\w*)+")
_LINK = re.compile(r"\]\(([^)\s]*)\)")


def _text() -> str:
    return DOC.read_text(encoding="utf-8")


def _code_spans(text: str) -> list[str]:
    # Fenced blocks hold examples, not claims about the tree.
    prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return [span.strip() for span in _CODE.findall(prose)]


def _section(text: str, title: str) -> str:
    found = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, flags=re.S | re.M)
    assert found, f"docs/architecture.md has no '## {title}' section"
    return found.group(1)


# -- paths -----------------------------------------------------------------------------------


def _exists(token: str) -> bool:
    """Whether a path the page names is there: from the package first, else from the repository root."""
    token = token.split("#")[0]
    if token.startswith("src/"):
        bases, rel = [ROOT], token
    elif token.startswith("ddm_core/"):
        bases, rel = [PACKAGE], token.removeprefix("ddm_core/")
    else:
        bases, rel = [PACKAGE, ROOT], token
    rel = re.sub(r"<[^<>/]*>", "*", rel).rstrip("/")
    for base in bases:
        if "*" in rel:
            if any(True for _ in base.glob(rel)):
                return True
        elif (base / rel).exists():
            return True
    return False


def _paths(text: str) -> set[str]:
    found = {span for span in _code_spans(text) if _PATH.fullmatch(span)}
    return found | set(_SRC_PATH.findall(text))


def test_every_path_the_page_names_exists() -> None:
    missing = sorted(p for p in _paths(_text()) if not _exists(p))
    assert missing == [], f"docs/architecture.md names paths that are not there: {missing}"


# -- dotted names ----------------------------------------------------------------------------


@cache
def _top_level() -> frozenset[str]:
    return frozenset(p.stem for p in PACKAGE.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists())


def _module_file(dotted: str) -> Path | None:
    base = PACKAGE.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py", base.with_suffix(".pyx")):
        if candidate.exists():
            return candidate
    return None


def _resolves(dotted: str) -> str | None:
    """``None`` when ``dotted`` (``ddm_core.x.y``) names a module or a module's attribute, else why not."""
    parts = dotted.split(".")
    cut = next(c for c in range(len(parts), 0, -1) if c == 1 or _module_file(".".join(parts[1:c])) is not None)
    obj: object = importlib.import_module(".".join(parts[:cut]))
    for name in parts[cut:]:
        if not hasattr(obj, name):
            return f"{'.'.join(parts[:cut])} has no {name!r}"
        obj = getattr(obj, name)
    return None


def _dotted_names(text: str) -> set[str]:
    names = set(_DDM_DOTTED.findall(text))
    for span in _code_spans(text):
        if _DOTTED.fullmatch(span) and not _FILE_SUFFIX.search(span):
            name = span.removesuffix("()").removeprefix("ddm_core.")
            if name.split(".")[0] in _top_level():
                names.add("ddm_core." + name)
    return names


def test_every_dotted_name_the_page_uses_resolves() -> None:
    wrong = {name: why for name in sorted(_dotted_names(_text())) if (why := _resolves(name))}
    assert wrong == {}, f"docs/architecture.md names modules or names that are not there: {wrong}"


# -- the module map ----------------------------------------------------------------------------


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip().strip("|"))]


def _map_rows(text: str) -> list[tuple[str | None, str, list[str], str]]:
    """(heading folder, module path, names it defines, job) for each row of the module map."""
    rows = []
    folder: str | None = None
    for line in _section(text, "Module map").splitlines():
        if line.startswith("### "):
            folders = [c for c in _CODE.findall(line) if c.endswith("/")]
            folder = folders[0] if folders else None
        elif line.startswith("| `"):
            cells = _cells(line)
            assert len(cells) == 3, f"a module map row is | module | defines | job |: {line!r}"
            [module] = _CODE.findall(cells[0])
            path = module.removeprefix("ddm_core/")
            path = path + "__init__.py" if path.endswith("/") else path
            rows.append((folder, path, _CODE.findall(cells[1]), cells[2]))
    return rows


def test_every_module_has_one_line_in_the_module_map() -> None:
    listed = [path for _, path, _, _ in _map_rows(_text())]
    repeated = sorted({p for p in listed if listed.count(p) > 1})
    missing = sorted(set(MODULES) - set(listed))
    unknown = sorted(set(listed) - set(MODULES))
    assert (missing, repeated, unknown) == ([], [], []), (
        f"docs/architecture.md#module-map: modules without a line {missing}, listed twice {repeated}, "
        f"not modules of the package {unknown}"
    )


def test_each_module_line_sits_under_its_folder_and_says_its_job() -> None:
    misplaced = []
    for folder, path, _, job in _map_rows(_text()):
        expected = folder is None and "/" not in path or folder is not None and path.startswith(folder)
        if not expected or len(job.split()) < 3:
            misplaced.append((folder, path, job))
    assert misplaced == [], f"module map rows outside their folder's table or without a job: {misplaced}"


@cache
def _defined(path: str) -> frozenset[str]:
    """What a module file binds at its top level by ``def``, ``class`` or assignment (imports do not count)."""
    source = (PACKAGE / path).read_text(encoding="utf-8")
    if not path.endswith(".py"):  # Cython: def / cpdef / class / cdef class
        definition = r"(?m)^(?:cp?def\s+(?:class\s+)?(?:[\w.\[\]]+\s+)?|def\s+|class\s+)(\w+)"
        return frozenset(re.findall(definition, source))
    names: set[str] = set()
    body = list(ast.parse(source).body)
    while body:
        node = body.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            body.extend(node.body)
            body.extend(getattr(node, "orelse", []))
            for handler in getattr(node, "handlers", []):
                body.extend(handler.body)
            body.extend(getattr(node, "finalbody", []))
    return frozenset(names)


def test_what_the_module_map_says_a_module_defines_is_defined_there() -> None:
    wrong = [(path, name) for _, path, names, _ in _map_rows(_text()) for name in names
             if (PACKAGE / path).exists() and name not in _defined(path)]  # fmt: skip
    assert wrong == [], f"docs/architecture.md#module-map: names not defined in those modules: {wrong}"


# -- the import rules --------------------------------------------------------------------------


def _rule_names(cell: str) -> set[str]:
    """The package modules a cell names (``merge.spec``, ``outbox/``, ``__init__``)."""
    names = set()
    for span in _CODE.findall(cell):
        name = span.rstrip("/").replace("/", ".")
        if name == "__init__" or re.fullmatch(r"[\w.]+", name) and _module_file(name) is not None:
            names.add(name)
    return names


def test_the_import_rules_table_is_the_one_tests_enforce() -> None:
    stated: dict[str, set[str]] = {}
    for line in _section(_text(), "Import rules").splitlines():
        if not line.startswith("| ") or line.startswith(("| layer", "|---")):
            continue
        layers, may_import = _cells(line)[:2]
        for layer in _rule_names(layers):
            stated[layer] = _rule_names(may_import) - {layer}
    access_row = [line for line in _section(_text(), "Import rules").splitlines() if "anything below" in line]
    assert len(access_row) == 1 and _rule_names(_cells(access_row[0])[0]) == ACCESS, (
        f"the access row names {access_row}; tests/test_layers.py exempts {sorted(ACCESS)}"
    )
    leaves = LEAVES | {"_text"}
    differ = {
        layer: {"page": sorted(stated.get(layer, set()) - leaves), "tests": sorted(allowed - leaves)}
        for layer, allowed in ALLOWED.items()
        if layer not in leaves and stated.get(layer, set()) - leaves != allowed - leaves
    }
    assert differ == {}, f"docs/architecture.md#import-rules differs from tests/test_layers.py ALLOWED: {differ}"
    assert set(ALLOWED) - leaves <= set(stated), f"layers without a row: {sorted(set(ALLOWED) - leaves - set(stated))}"


def test_the_cycles_left_are_the_ones_the_page_names() -> None:
    rules = _section(_text(), "Import rules")
    named = {span.removesuffix(".py").replace("/", ".") for span in _CODE.findall(rules) if span.endswith(".py")}
    cycles = set(KNOWN_CYCLES)
    assert cycles <= named, f"docs/architecture.md#import-rules does not name the cycles left: {sorted(cycles - named)}"


# -- what the page promises of sqlglot -----------------------------------------------------------

_WITHOUT_SQLGLOT = """
import importlib.abc, sys, types

class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.partition(".")[0] == "sqlglot":
            raise ImportError(f"{name} imported below the router")

sys.meta_path.insert(0, Refuse())
package = types.ModuleType("ddm_core")  # the package without its __init__.py, which imports the router
package.__path__ = [sys.argv[1]]
sys.modules["ddm_core"] = package
from ddm_core.metadata import dump_native, load_config
import ddm_core.merge, ddm_core.readwrite, ddm_core.metadata.sources.table, ddm_core.metadata.sources.redis
for path in sys.argv[2:]:
    dump_native(load_config(path))
print(sorted(m for m in sys.modules if m.startswith("ddm_core.route")))
"""


def test_the_layers_below_the_router_load_a_configuration_without_sqlglot() -> None:
    examples = [str(ROOT / "examples" / "orders.yaml"), str(ROOT / "examples" / "shardingsphere.yaml")]
    done = subprocess.run([sys.executable, "-c", _WITHOUT_SQLGLOT, str(PACKAGE), *examples], capture_output=True,
                          text=True, env={**os.environ, "DDM_ORDER_PASSWORD": "secret"}, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", f"the route layer was imported: {done.stdout}"


# -- links -------------------------------------------------------------------------------------


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


@cache
def _anchors(page: Path) -> frozenset[str]:
    headings = re.findall(r"^#+ (.+)$", page.read_text(encoding="utf-8"), flags=re.M)
    return frozenset(_slug(h) for h in headings)


def test_links_reach_their_page_and_heading() -> None:
    broken = []
    for target in _LINK.findall(_text()):
        if "://" in target:
            continue
        page, _, anchor = target.partition("#")
        file = DOCS / page if page else DOC
        if not file.exists() or anchor and anchor not in _anchors(file):
            broken.append(target)
    assert broken == [], f"docs/architecture.md links to pages or headings that are not there: {broken}"


# -- the readers themselves --------------------------------------------------------------------


def test_the_readers_see_what_they_check() -> None:
    assert {"route/router.py", "metadata/sources/__init__.py", "_fast/hashing.pyx", "_fast/_hash.pxd"} <= set(MODULES)
    assert _exists("route/text/placeholders.py") and _exists("metadata/sources/") and _exists("tests/test_layers.py")
    assert _exists("_fast/<unit>.pyx") and _exists("src/ddm_core/route/") and not _exists("route/insert.py")
    assert _resolves("ddm_core.hashing.slot_of") is None and _resolves("ddm_core.migrate.state.WorkflowLog") is None
    assert _resolves("ddm_core.lease_worker_id") is None and _resolves("ddm_core.merge.spec") is None
    assert _resolves("ddm_core.route.hints.shard_database") and _resolves("ddm_core.ids.lease_worker_id")
    text = "`a/b.py` `hashing.slot_of` `SlotMap.route_many` ddm_core.ids.Snowflake `x = 1` `ids.py`"
    assert _paths(text) == {"a/b.py", "ids.py"}
    assert _dotted_names(text) == {"ddm_core.hashing.slot_of", "ddm_core.ids.Snowflake"}
    assert "Router" in _defined("route/router.py") and "Router" not in _defined("route/__init__.py")
    assert "SELECTED" in _defined("_fast/__init__.py") and "slot_of" in _defined("_fast/hashing.pyx")
    assert _rule_names("`merge.spec`, `outbox/`, the faces, `wire`, `__init__`") == {"merge.spec", "outbox", "__init__"}
    assert _slug("Where each kind of change goes") == "where-each-kind-of-change-goes"
    assert _slug("`route/` — the stages") == "route--the-stages"

