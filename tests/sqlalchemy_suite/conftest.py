"""SQLAlchemy's dialect compliance suite against ``ddm+pymysql``: the plugin, the dialect, its provisioning.

Run by tests/test_sqlalchemy_suite.py in a subprocess, with this directory as pytest's root
(``-c tests/sqlalchemy_suite/setup.cfg``): SQLAlchemy's plugin takes the session over (its own
options, fixtures and test collection), so the project's own test run never enters this directory
(tests/conftest.py ignores it).
"""

from __future__ import annotations

import pytest
from sqlalchemy.dialects import registry

# The entry point in pyproject.toml registers the dialect once ddm-core is installed; this makes the
# suite run from a source checkout too.
registry.register("ddm.pymysql", "ddm_core.sqlalchemy.pymysql", "DdmDialect_pymysql")
registry.register("ddm", "ddm_core.sqlalchemy.pymysql", "DdmDialect_pymysql")

pytest.register_assert_rewrite("sqlalchemy.testing.assertions")

from sqlalchemy.testing.plugin.pytestplugin import *  # noqa: E402,F401,F403 - the plugin's hooks

import ddm_provision  # noqa: E402,F401 - the "ddm" backend's provisioning hooks

pytest_plugins = ["suite_schemas"]
