"""The logical ``SHOW TABLES`` end to end on SQLite files.

The router writes each unit's listing from what its data source's dialect answers
(``Dialect.listed_tables``, ``string_literal``, ``binary_order``; checked on each server
in tests/test_dialects.py), never by testing backend names. The MariaDB statement end to
end: tests/test_shardingsphere_mariadb.py.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ddm_core import Executor, load_config


def test_show_tables_on_sqlite_files_answers_logic_names(tmp_path: Path) -> None:
    """Physical tables map to their logic names on every file; the default data source adds its own tables."""
    urls = {f"ds_{i}": f"sqlite:///{tmp_path / f'ds_{i}.db'}" for i in range(2)}
    config = load_config({
        "name": "shop",
        "dataSources": urls,
        "defaultDataSource": "ds_0",
        "tables": [{"logicTable": "t_order", "shardKey": "user_id", "algorithm": "mod", "shardCount": 2,
                    "tablePerShard": 2, "databases": ["ds_0", "ds_1"]}],
    })
    with Executor(config, load_schema=False) as ex:
        ex.execute("CREATE TABLE t_order (order_id INTEGER PRIMARY KEY, user_id INTEGER)").close()
        own = sqlite3.connect(tmp_path / "ds_0.db", isolation_level=None)
        own.execute("CREATE TABLE `t_a\\b` (id INT)")  # unconfigured: it lives on the default data source
        own.execute("CREATE VIEW v_note AS SELECT 1 AS one")
        own.close()
        assert ex.execute("SHOW TABLES").fetchall() == [("t_a\\b",), ("t_order",), ("v_note",)]
        full = ex.execute("SHOW FULL TABLES WHERE Table_type = 'VIEW'")
        assert [d[0] for d in full.description] == ["Tables_in_shop", "Table_type"]
        assert full.fetchall() == [("v_note", "VIEW")]
        # LIKE filters logic names with SQLite's pattern rules (no escape character).
        assert ex.execute("SHOW TABLES LIKE 't_o%'").fetchall() == [("t_order",)]
