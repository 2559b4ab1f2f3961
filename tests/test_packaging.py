"""Packaging: setup.py, the .pyx files, their stubs and twins agree; the selector works.

setup.py is parsed, never executed (running it would start a build).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

import ddm_core
from ddm_core import _fast
from ddm_core._fast import Implementation
from services import require_module

ROOT = Path(__file__).resolve().parents[1]
FAST_DIR = ROOT / "src" / "ddm_core" / "_fast"
# Where the ddm_core under test was imported from (src/, or site-packages when the
# suite runs against an installed wheel): subprocesses must import that same copy.
IMPORT_ROOT = str(Path(ddm_core.__file__).resolve().parents[1])
PYX_STEMS = sorted(p.stem for p in FAST_DIR.glob("*.pyx"))


def _setup_extensions() -> tuple[str, ...]:
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "EXTENSIONS" for t in node.targets
        ):
            value = ast.literal_eval(node.value)
            assert isinstance(value, tuple), "EXTENSIONS must stay a literal tuple"
            return value
    raise AssertionError("setup.py has no top-level EXTENSIONS = (...) assignment")


def _stub_names(unit: str) -> tuple[set[str], list[str] | None]:
    """Names a .pyi declares at top level, and its own ``__all__`` if it has one."""
    tree = ast.parse((FAST_DIR / f"{unit}.pyi").read_text(encoding="utf-8"))
    names: set[str] = set()
    stub_all: list[str] | None = None
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names.add(target.id)
                    if target.id == "__all__":
                        stub_all = ast.literal_eval(node.value)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            # In a stub only ``import x as x`` / ``from m import x as x`` re-exports.
            names.update(a.asname for a in node.names if a.asname and a.asname == a.name)
    return names, stub_all


def test_pyx_files_exist() -> None:
    assert PYX_STEMS, f"no .pyx files found in {FAST_DIR}"


def test_setup_extensions_match_pyx_files() -> None:
    extensions = _setup_extensions()
    assert len(extensions) == len(set(extensions)), f"duplicate entries in EXTENSIONS: {extensions}"
    assert set(extensions) == set(PYX_STEMS)


def test_selector_units_match_pyx_files() -> None:
    # The selector loads UNITS; a .pyx it does not know would never be used.
    assert set(_fast.UNITS) == set(PYX_STEMS)


@pytest.mark.parametrize("unit", PYX_STEMS)
def test_each_pyx_has_stub_and_twin(unit: str) -> None:
    assert (FAST_DIR / f"{unit}.pyi").is_file(), f"{unit}.pyx has no hand-written {unit}.pyi"
    assert (FAST_DIR / f"{unit}_py.py").is_file(), f"{unit}.pyx has no pure-Python twin {unit}_py.py"


@pytest.mark.parametrize("unit", _fast.UNITS)
def test_twins_export_the_same_names(both: tuple[Implementation, Implementation], unit: str) -> None:
    compiled, pure = (getattr(impl, unit) for impl in both)
    assert compiled.__file__.endswith((".so", ".pyd")), f"{compiled.__name__} is not the compiled module"
    assert sorted(compiled.__all__) == sorted(pure.__all__)
    assert len(set(pure.__all__)) == len(pure.__all__), f"duplicates in {pure.__name__}.__all__"
    for module in (compiled, pure):
        missing = [name for name in module.__all__ if not hasattr(module, name)]
        assert not missing, f"{module.__name__}.__all__ names missing attributes: {missing}"


@pytest.mark.parametrize("unit", _fast.UNITS)
def test_stub_declares_all_public_names(impl: Implementation, unit: str) -> None:
    module = getattr(impl, unit)
    declared, stub_all = _stub_names(unit)
    missing = sorted(set(module.__all__) - declared)
    assert not missing, f"{unit}.pyi does not declare {missing}"
    assert stub_all is not None and sorted(stub_all) == sorted(module.__all__)


def test_stubs_match_the_compiled_modules(both: tuple[Implementation, Implementation], tmp_path: Path) -> None:
    # stubtest imports the compiled modules and checks every stub signature against them.
    require_module("mypy.stubtest", "mypy, in the test extras")
    modules = [f"ddm_core._fast.{unit}" for unit in _fast.UNITS]
    env = {**os.environ, "PYTHONPATH": IMPORT_ROOT}
    if "site-packages" not in IMPORT_ROOT:  # mypy refuses site-packages on MYPYPATH (an installed wheel)
        env["MYPYPATH"] = IMPORT_ROOT
    proc = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", *modules, "--concise"],
        cwd=tmp_path,  # keep .mypy_cache out of the repository
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_stubs_ship_in_the_wheel() -> None:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        tomllib = pytest.importorskip("tomli")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    package_data = config["tool"]["setuptools"]["package-data"]
    assert "*.pyi" in package_data["ddm_core._fast"]
    assert (ROOT / "src" / "ddm_core" / "py.typed").is_file()


# -- the selector -------------------------------------------------------------------------


def _run_selected(env_value: str | None) -> list[str]:
    code = (
        "import ddm_core, ddm_core.hashing, ddm_core.slots; "
        "print(ddm_core.implementation()); "
        "print(ddm_core.hashing.slot_of.__module__); "
        "print(ddm_core.slots.SlotMap.__module__)"
    )
    env = {k: v for k, v in os.environ.items() if k != "DDM_NO_EXTENSIONS"}
    env["PYTHONPATH"] = IMPORT_ROOT
    if env_value is not None:
        env["DDM_NO_EXTENSIONS"] = env_value
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=True
    )
    return proc.stdout.split()


def test_implementation_is_cython_by_default(both: tuple[Implementation, Implementation]) -> None:
    compiled, _ = both
    if os.environ.get("DDM_NO_EXTENSIONS", "") not in ("", "0"):
        pytest.skip("this test session itself runs with DDM_NO_EXTENSIONS set")
    assert ddm_core.implementation() == "cython"
    assert ddm_core.hashing.slot_of is compiled.hashing.slot_of
    assert ddm_core.SlotMap is compiled.slots.SlotMap
    assert _run_selected(None) == ["cython", "ddm_core._fast.hashing", "ddm_core._fast.slots"]
    assert _run_selected("0")[0] == "cython"  # "0" means off, as in setup.py


def test_no_extensions_selects_the_twins(both: tuple[Implementation, Implementation]) -> None:
    # Needs the compiled build present: proves the variable, not a missing .so, picked the twins.
    assert _run_selected("1") == ["python", "ddm_core._fast.hashing_py", "ddm_core._fast.slots_py"]


def test_load_rejects_unknown_names() -> None:
    with pytest.raises(ValueError, match="'cpython'"):
        _fast.load("cpython")
