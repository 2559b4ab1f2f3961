"""The compiled hot path and its pure-Python twins; the one place that picks.

Each unit exists twice with the same API and results: ``<unit>.pyx`` (Cython)
and ``<unit>_py.py``. The compiled units are used unless ``DDM_NO_EXTENSIONS``
is set, the interpreter is not CPython, or they were not built (an install
without a compiler). Upper layers import from here only.

:class:`Implementation` holds plain modules, so what a facade takes from
``SELECTED`` is ``Any`` to a type checker: the facades (``ddm_core.hashing``,
``ids``, ``slots``, ``merge``) import the compiled units' names under
``TYPE_CHECKING`` instead, so callers see the ``.pyi`` stubs.
"""

from __future__ import annotations

import importlib
import os
import platform
from types import ModuleType
from typing import NamedTuple

__all__ = ["UNITS", "Implementation", "load", "SELECTED", "IMPLEMENTATION"]

#: The accelerated units, in dependency order.
UNITS = ("hashing", "slots", "ids", "merge", "wire", "relay", "gate", "hotlink", "point", "rowwriter", "ordered", "hotfront", "literals", "hotpin", "hotmany")


class Implementation(NamedTuple):
    """One complete set of the units, compiled or pure."""

    name: str  # "cython" or "python"
    hashing: ModuleType
    slots: ModuleType
    ids: ModuleType
    merge: ModuleType
    wire: ModuleType
    relay: ModuleType
    gate: ModuleType
    hotlink: ModuleType
    point: ModuleType
    rowwriter: ModuleType
    ordered: ModuleType
    hotfront: ModuleType
    literals: ModuleType
    hotpin: ModuleType
    hotmany: ModuleType


def load(name: str) -> Implementation:
    """Import every unit of one implementation.

    Raises:
        ImportError: ``name == "cython"`` and the extensions were not built.
        ValueError: ``name`` is neither ``"cython"`` nor ``"python"``.
    """
    if name not in ("cython", "python"):
        raise ValueError(f"implementation must be 'cython' or 'python', not {name!r}")
    suffix = "" if name == "cython" else "_py"
    modules = [importlib.import_module(f"{__name__}.{unit}{suffix}") for unit in UNITS]
    return Implementation(name, *modules)


def _select() -> Implementation:
    if os.environ.get("DDM_NO_EXTENSIONS", "") not in ("", "0"):
        return load("python")
    if platform.python_implementation() != "CPython":
        return load("python")
    try:
        return load("cython")
    except ImportError:
        return load("python")


SELECTED = _select()
IMPLEMENTATION = SELECTED.name
