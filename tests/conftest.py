"""Shared fixtures: the implementation fixture every test of a ``_fast`` unit takes.

Also the order test files start in: the longest files first (the Makefile runs each pass on
pytest-xdist workers, one file per worker at a time, in collection order), so that a file of
minutes does not start last and run alone at the end of the pass.
"""

from __future__ import annotations

from typing import Any

from ddm_core._fast.testing import both, impl

__all__ = ["impl", "both"]

# SQLAlchemy's compliance suite takes a pytest session over (its own plugin, options and fixtures):
# tests/test_sqlalchemy_suite.py runs it in a subprocess.
collect_ignore = ["sqlalchemy_suite"]

#: Files that take a minute or more (servers killed and resumed, whole migrations and cut-overs, SQLAlchemy's
#: dialect suite, the oracles), longest first.
LONG_FILES = (
    "test_migrate_e2e.py",
    "test_cutover_e2e.py",
    "test_sqlalchemy_suite.py",
    "test_oracle.py",
    "test_crossnode_crash.py",
    "test_migrate_catchup.py",
    "test_sqlalchemy_async.py",
    "test_sqlalchemy_orm.py",
    "test_outbox_crash.py",
    "test_crossnode_oracle.py",
)


def pytest_collection_modifyitems(items: list[Any]) -> None:
    rank = {name: i for i, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order
