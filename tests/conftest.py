"""Shared fixtures: the implementation fixture every test of a ``_fast`` unit takes."""

from __future__ import annotations

from ddm_core._fast.testing import both, impl

__all__ = ["impl", "both"]

# SQLAlchemy's compliance suite takes a pytest session over (its own plugin, options and fixtures):
# tests/test_sqlalchemy_suite.py runs it in a subprocess.
collect_ignore = ["sqlalchemy_suite"]
