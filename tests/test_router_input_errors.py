"""Refusals name what the caller wrote: the table an UPDATE writes, SQL that is not text."""

from __future__ import annotations

from typing import Any

import pytest

from ddm_core import Router, load_config
from ddm_core.errors import DdmError, ShardKeyUpdateError, UnsupportedSQLError
from placement_checks import ROOT


@pytest.fixture(scope="module")
def router() -> Router:
    return Router(load_config(ROOT / "examples" / "orders.yaml", check_env=False))


@pytest.mark.parametrize("sql, table", [
    ("UPDATE t_order_item SET user_id = 5 WHERE user_id = 7", "t_order_item"),
    ("UPDATE t_order SET user_id = 5 WHERE user_id = 7", "t_order"),
    ("UPDATE t_order o JOIN t_order_item i ON o.user_id = i.user_id SET i.user_id = 5 WHERE o.user_id = 7",
     "t_order_item"),
    ("UPDATE t_order_item i JOIN t_order o ON o.user_id = i.user_id SET o.user_id = 5 WHERE o.user_id = 7",
     "t_order"),
    ("UPDATE t_order_item SET user_id = %s WHERE user_id = 7", "t_order_item"),
])
def test_a_shard_key_update_names_the_table_it_writes(router: Router, sql: str, table: str) -> None:
    """A bound table routes through its group's first table, but the error names the one written."""
    params = [5] if "%s" in sql else None
    with pytest.raises(ShardKeyUpdateError) as refused:
        router.route(sql, params)
    assert refused.value.context["table"] == table and refused.value.context["column"] == "user_id"
    assert f"shard column 'user_id' of {table!r}" in str(refused.value)


@pytest.mark.parametrize("sql", [["SELECT 1"], {"sql": "SELECT 1"}, None, b"SELECT 1", 42])
def test_sql_that_is_not_text_is_a_ddm_error(router: Router, sql: Any) -> None:
    for call in (router.route, router.compile):
        with pytest.raises(UnsupportedSQLError, match=f"SQL must be a str, got {type(sql).__name__}") as refused:
            call(sql)
        assert isinstance(refused.value, DdmError)
    assert router.route("SELECT * FROM t_order WHERE user_id = %s", [1]).units  # the router still works
