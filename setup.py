"""Declares the compiled extensions only; metadata lives in pyproject.toml.

DDM_REQUIRE_EXTENSIONS=1  a failed compile is a build failure (CI, wheel builds).
DDM_NO_EXTENSIONS=1       build nothing: the pure-Python twins are used.
DDM_CYTHON_TRACE=1        debug build: annotated HTML and line tracing.
Otherwise a missing compiler degrades quietly to the pure-Python twins.
"""

import os

from setuptools import Extension, setup

#: One entry per ``src/ddm_core/_fast/<name>.pyx``; tests check the two agree.
EXTENSIONS = ("hashing", "slots", "ids", "merge", "wire", "relay", "gate", "hotlink", "point", "rowwriter", "ordered", "hotfront", "literals", "hotpin", "hotmany")

FAST_DIR = os.path.join("src", "ddm_core", "_fast")


def _flag(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")


def _extensions() -> list:
    if _flag("DDM_NO_EXTENSIONS"):
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        if _flag("DDM_REQUIRE_EXTENSIONS"):
            raise
        return []  # no Cython: the pure-Python twins serve

    trace = _flag("DDM_CYTHON_TRACE")
    macros = [("CYTHON_TRACE", "1")] if trace else []
    modules = [
        Extension(
            f"ddm_core._fast.{name}",
            [os.path.join(FAST_DIR, f"{name}.pyx")],
            include_dirs=[os.path.join(FAST_DIR, "vendor", "xxhash")],
            define_macros=macros,
            optional=not _flag("DDM_REQUIRE_EXTENSIONS"),
        )
        for name in EXTENSIONS
    ]
    return cythonize(
        modules,
        language_level=3,
        annotate=trace,
        compiler_directives={
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "linetrace": trace,
            "embedsignature": True,
        },
    )


# The C files compile side by side, one per core (build_ext's threads): CI builds the package three times.
setup(ext_modules=_extensions(), options={"build_ext": {"parallel": os.cpu_count() or 1}})
