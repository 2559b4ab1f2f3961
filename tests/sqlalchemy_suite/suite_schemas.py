"""The suite's two extra schemas: databases the run's configuration names in ``props``.

SQLAlchemy's suite puts tables into ``config.test_schema`` and ``config.test_schema_2``
("test_schema", "test_schema_2" unless provisioning renames them, as its MySQL provisioning
does for parallel runs). On MySQL a schema is a database; through ddm-core a table the
configuration does not name runs on the default data source with its qualifier kept
(docs/architecture.md#schema-qualified-names), so the schemas are two databases on the default
data source's server. tests/test_sqlalchemy_suite.py creates them with the data sources'
databases and names them in the configuration: ``props: {sqlalchemySuiteSchemas: [a, b]}``.
"""

from __future__ import annotations

import pytest
from sqlalchemy.testing import config

#: The ``props`` entry naming the two schemas.
PROP = "sqlalchemySuiteSchemas"


@pytest.hookimpl(trylast=True)  # after SQLAlchemy's plugin has set its configurations up
def pytest_sessionstart(session: pytest.Session) -> None:
    for cfg in config.Config.all_configs():
        ddm_config = getattr(cfg.db.dialect, "ddm_config", None)
        if ddm_config is not None and PROP in ddm_config.props:
            cfg.test_schema, cfg.test_schema_2 = ddm_config.props[PROP]
    current = config._current
    if current is not None:
        config.test_schema, config.test_schema_2 = current.test_schema, current.test_schema_2
