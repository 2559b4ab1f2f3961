"""Shared fixtures: the implementation fixture every test of a ``_fast`` unit takes."""

from __future__ import annotations

import os

import pytest

from ddm_core._fast import Implementation, load

_REQUIRE = os.environ.get("DDM_REQUIRE_EXTENSIONS", "") not in ("", "0") or bool(os.environ.get("CI"))


def _compiled() -> Implementation | None:
    try:
        return load("cython")
    except ImportError:
        if _REQUIRE:
            raise  # CI: the compiled param must never be skipped
        return None


_C = _compiled()
_PY = load("python")


@pytest.fixture(
    scope="session",
    params=[pytest.param("cython", id="c", marks=pytest.mark.compiled), pytest.param("python", id="py")],
)
def impl(request: pytest.FixtureRequest) -> Implementation:
    """Each ``_fast`` test runs once on the compiled units ("c") and once on the twins ("py")."""
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
