"""Shared fixtures: the implementation fixture every test of a ``_fast`` unit takes."""

from __future__ import annotations

from ddm_core._fast.testing import both, impl

__all__ = ["impl", "both"]
