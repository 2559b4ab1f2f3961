"""What SQLAlchemy's suite may expect of ``ddm+pymysql``.

SuiteRequirements closes much by default; this class opens what MariaDB 10.11 offers through
SQLAlchemy's MySQL dialect, closes what that backend does not do (as SQLAlchemy's own
requirements do for MySQL), then closes what ddm-core rules out, always or only where the
configuration shards the suite's tables. Every closed requirement says why (``-rs`` prints it).
"""

from __future__ import annotations

from typing import Any, Callable

from sqlalchemy.testing import exclusions
from sqlalchemy.testing.requirements import SuiteRequirements


def _open() -> exclusions.compound:
    return exclusions.open()


def _closed(reason: str) -> exclusions.compound:
    """Ruled out, for ``reason`` (no percent signs: SQLAlchemy formats it)."""
    return exclusions.skip_if(lambda config: True, reason)


def _sharded(table: str) -> Callable[[Any], bool]:
    """The run's configuration shards ``table`` (tests/test_sqlalchemy_suite.py's ``sharded``)."""

    def check(config: Any) -> bool:
        ddm = getattr(config.db.dialect, "ddm_config", None)
        return ddm is not None and ddm.table(table) is not None

    return check


class Requirements(SuiteRequirements):
    # -- what MariaDB 10.11 offers through SQLAlchemy's MySQL dialect -----------------------------------
    autocommit = property(lambda self: _open())
    isolation_level = property(lambda self: _open())
    skip_autocommit_rollback = property(lambda self: _open())
    boolean_col_expressions = property(lambda self: _open())
    check_constraint_reflection = property(lambda self: _open())
    comment_reflection = property(lambda self: _open())
    computed_columns = property(lambda self: _open())
    computed_columns_stored = property(lambda self: _open())
    computed_columns_virtual = property(lambda self: _open())
    computed_columns_reflect_persisted = property(lambda self: _open())
    create_or_replace_view = property(lambda self: _open())
    create_table_as = property(lambda self: _open())
    ctes = property(lambda self: _open())
    date_historic = property(lambda self: _open())
    datetime_historic = property(lambda self: _open())
    dbapi_lastrowid = property(lambda self: _open())
    delete_from = property(lambda self: _open())
    update_from = property(lambda self: _open())
    except_ = property(lambda self: _open())
    intersect = property(lambda self: _open())
    expression_server_defaults = property(lambda self: _open())
    server_defaults = property(lambda self: _open())
    foreign_key_constraint_name_reflection = property(lambda self: _open())
    foreign_key_constraint_option_reflection_ondelete = property(lambda self: _open())
    foreign_key_constraint_option_reflection_onupdate = property(lambda self: _open())
    fk_constraint_option_reflection_ondelete_noaction = property(lambda self: _open())
    foreign_keys_reflect_as_index = property(lambda self: _open())
    unique_constraints_reflect_as_index = property(lambda self: _open())
    unique_index_reflect_as_unique_constraints = property(lambda self: _open())
    index_ddl_if_exists = property(lambda self: _open())
    table_ddl_if_exists = property(lambda self: _open())
    json_type = property(lambda self: _open())
    mod_operator_as_percent_sign = property(lambda self: _open())
    order_by_label_with_expression = property(lambda self: _open())
    reflect_table_options = property(lambda self: _open())
    regexp_match = property(lambda self: _open())
    regexp_replace = property(lambda self: _open())
    supports_bitwise_and = property(lambda self: _open())
    supports_bitwise_or = property(lambda self: _open())
    supports_bitwise_xor = property(lambda self: _open())
    supports_bitwise_shift = property(lambda self: _open())
    tuple_in = property(lambda self: _open())
    unicode_ddl = property(lambda self: _open())
    views = property(lambda self: _open())
    window_functions = property(lambda self: _open())
    savepoints = property(lambda self: _open())  # set on every connection of the transaction (execute/savepoints.py)

    def get_isolation_levels(self, config: Any) -> dict[str, Any]:
        with config.db.connect() as conn:  # in the dialect's order: the suite compares its error message
            levels = list(config.db.dialect.get_isolation_level_values(conn.connection.dbapi_connection))
        return {"default": "REPEATABLE READ", "supported": levels}

    # -- what MariaDB / SQLAlchemy's MySQL dialect do not do (SQLAlchemy's own requirements agree) -------
    date_implicit_bound = property(lambda self: _closed("MySQL drivers bind a date as a string; SELECT of it is one"))
    time_implicit_bound = property(lambda self: _closed("MySQL drivers bind a time as a string; SELECT of it is one"))
    datetime_implicit_bound = property(
        lambda self: _closed("MySQL drivers bind a datetime as a string; SELECT of it is one")
    )
    datetime_microseconds = property(lambda self: _closed("MySQL's DATETIME drops microseconds without fsp"))
    time_microseconds = property(lambda self: _closed("MySQL's TIME drops microseconds without fsp"))
    sql_expression_limit_offset = property(lambda self: _closed("MySQL takes no expression in LIMIT / OFFSET"))
    unbounded_varchar = property(lambda self: _closed("MySQL's VARCHAR needs a length"))
    precision_generic_float_type = property(lambda self: _closed("MySQL's FLOAT keeps 4 decimals"))
    supports_bitwise_not = property(
        lambda self: _closed("MySQL's ~ is 64-bit unsigned: ~(a - 2) > 0 for every a but 2")
    )

    # -- what ddm-core rules out, in every configuration --------------------------------------------
    temporary_tables = property(
        lambda self: _closed(
            "a TEMPORARY table lives on one pooled connection: the next statement may run on another"
        )
    )
    temp_table_reflection = property(lambda self: self.temporary_tables)
    schemas_listed = property(
        lambda self: _closed(
            "SHOW DATABASES answers the logic database only (session_facts.py): the suite's schemas are "
            "databases on the default data source's server, reachable by name but not listed "
            "(test_suite.py, ComponentReflectionTest)"
        )
    )
    returning_guards = property(
        lambda self: _closed(
            "ddm+pymysql reports no RETURNING (a multi-row INSERT comes back from the shards in shard "
            "order), yet MariaDB runs RETURNING on one table; the suite expects the server to refuse it"
        )
    )

    # -- what ddm-core rules out where the configuration shards the suite's tables -------------------
    rows_referring_to_rows_of_their_table = property(
        lambda self: exclusions.skip_if(
            _sharded("some_table"),
            "CTETest's some_table rows refer to each other by a foreign key (parent_id to id); on a sharded "
            "table each physical table has its own foreign key, and a parent on another shard fails it",
        )
    )
    table_of_the_same_name_in_another_schema = property(
        lambda self: exclusions.skip_if(
            _sharded("some_table"),
            "a schema qualifier on a configured table is taken for the logic database "
            "(docs/architecture.md#schema-qualified-names): test_schema.some_table is the sharded some_table",
        )
    )
    union_across_shards_with_order_or_subquery = property(
        lambda self: exclusions.skip_if(
            _sharded("some_table"),
            "the router refuses ORDER BY / LIMIT on a UNION reaching several shards, and a derived table or "
            "scalar subquery over a sharded table that is not pinned to the statement's shard "
            "(UnsupportedSQLError)",
        )
    )
    window_function_across_shards = property(
        lambda self: exclusions.skip_if(
            _sharded("some_table"),
            "a window function over rows of several shards is refused: the merger combines plain "
            "COUNT / SUM / MIN / MAX / AVG items only (UnsupportedSQLError)",
        )
    )
