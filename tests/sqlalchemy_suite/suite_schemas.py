"""The suite's two extra schemas, named after the database the suite runs in.

SQLAlchemy's suite puts tables into ``config.test_schema`` and ``config.test_schema_2``
("test_schema", "test_schema_2" unless provisioning renames them, as its MySQL provisioning
does for parallel runs: ``<database>_test_schema``). On MySQL a schema is a database; through
ddm-core a table the configuration does not name runs on the default data source with its
qualifier kept (docs/architecture.md#schema-qualified-names), so the schemas are two databases
on the default data source's server, named after its database. tests/test_sqlalchemy_suite.py
creates and drops them with the data sources' databases.
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.testing import config


def schema_names(database: str) -> tuple[str, str]:
    """``test_schema`` and ``test_schema_2`` of a suite run in ``database``."""
    return f"{database}_test_schema", f"{database}_test_schema_2"


def _database_of(cfg: Any) -> str | None:
    ddm_config = getattr(cfg.db.dialect, "ddm_config", None)
    if ddm_config is None:  # a plain MySQL URL (a run for comparison)
        return cfg.db.url.database  # type: ignore[no-any-return]
    default = ddm_config.data_sources[ddm_config.default_data_source]
    return default.primary.database  # type: ignore[no-any-return]


@pytest.hookimpl(trylast=True)  # after SQLAlchemy's plugin has set its configurations up
def pytest_sessionstart(session: pytest.Session) -> None:
    for cfg in config.Config.all_configs():
        database = _database_of(cfg)
        if database:
            cfg.test_schema, cfg.test_schema_2 = schema_names(database)
    current = config._current
    if current is not None:
        config.test_schema, config.test_schema_2 = current.test_schema, current.test_schema_2
