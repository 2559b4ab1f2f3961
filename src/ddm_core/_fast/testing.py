"""pytest fixtures for the compiled/pure twins, shared by ``tests/`` and ``benchmarks/``.

Import them into a conftest: ``from ddm_core._fast.testing import impl, both``.
Only test runs import this module (it needs pytest).
"""

from __future__ import annotations

import os

import pytest

from ddm_core._fast import Implementation, load

__all__ = ["impl", "both", "compiled_for_tests"]


def compiled_for_tests() -> Implementation | None:
    """The compiled units, ``None`` when they were not built.

    Under ``DDM_REQUIRE_EXTENSIONS=1`` or ``CI`` a missing build is an ImportError:
    the compiled half of a differential test must never be skipped there.
    """
    try:
        return load("cython")
    except ImportError:
        if os.environ.get("DDM_REQUIRE_EXTENSIONS", "") not in ("", "0") or os.environ.get("CI"):
            raise
        return None


_C = compiled_for_tests()
_PY = load("python")


@pytest.fixture(
    scope="session",
    params=[pytest.param("cython", id="c", marks=pytest.mark.compiled), pytest.param("python", id="py")],
)
def impl(request: pytest.FixtureRequest) -> Implementation:
    """Each test (or benchmark) of a ``_fast`` unit runs on the compiled units ("c") and the twins ("py")."""
    if request.param == "cython":
        if _C is None:
            pytest.skip("compiled extensions not built (set DDM_REQUIRE_EXTENSIONS=1 to make this fatal)")
        return _C
    return _PY


@pytest.fixture(scope="session")
def both() -> tuple[Implementation, Implementation]:
    """(compiled, pure) for differential tests; skipped only where the build is optional."""
    if _C is None:
        pytest.skip("compiled extensions not built")
    return _C, _PY
