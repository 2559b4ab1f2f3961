"""``matched_rows`` / ``useAffectedRows``: what an UPDATE's row count counts on MySQL and MariaDB.

By default the rows it changed (PyMySQL's behaviour); with ``Executor(matched_rows=True)`` or the
URL option ``useAffectedRows=false`` the rows it matched, as SQLite and PostgreSQL count them and as
SQLAlchemy's ORM expects (docs/sqlalchemy.md#row-counts).
"""

from __future__ import annotations

from typing import Any

import pytest

from ddm_core import errors, load_config
from ddm_core.execute import Executor
from runners import RUNNERS, BlockingAsyncExecutor
from test_execute_support import mysql_config, mysql_databases, sharding_config  # noqa: F401 - fixtures


def _same_value_update(ex: Any) -> int:
    ex.execute("INSERT INTO t_order (order_id, user_id, amount) VALUES (1, 5, 10), (2, 5, 11)").close()
    try:
        result = ex.execute("UPDATE t_order SET amount = 10 WHERE user_id = 5")  # one row changes, two match
        count = int(result.rowcount)
        result.close()
        return count
    finally:
        ex.execute("DELETE FROM t_order WHERE user_id = 5").close()


@pytest.mark.parametrize("runner", RUNNERS)
@pytest.mark.parametrize("matched", [False, True])
def test_the_executor_option(mysql_config: Any, runner: str, matched: bool) -> None:
    make = Executor if runner == "threads" else BlockingAsyncExecutor
    with make(mysql_config, matched_rows=matched) as ex:
        assert _same_value_update(ex) == (2 if matched else 1)


def test_the_url_option_wins_over_the_executors(mysql_databases: list[str]) -> None:
    urls = {f"ds_{i}": {"url": f"mysql://127.0.0.1:3306/{db}?useAffectedRows=false", "username": "root",
                        "password": ""} for i, db in enumerate(mysql_databases)}  # fmt: skip
    with Executor(load_config(sharding_config(urls)), matched_rows=False) as ex:
        assert _same_value_update(ex) == 2


def test_a_value_that_is_not_a_boolean_is_refused(mysql_databases: list[str]) -> None:
    urls = {"ds_0": {"url": f"mysql://127.0.0.1:3306/{mysql_databases[0]}?useAffectedRows=sometimes",
                     "username": "root", "password": ""}}  # fmt: skip
    with Executor(load_config(sharding_config(urls))) as ex:
        with pytest.raises(errors.DdmError, match="useAffectedRows='sometimes' is neither true nor false"):
            ex.execute("SELECT COUNT(*) FROM t_dict").close()
