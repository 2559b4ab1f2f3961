"""What SQLAlchemy's suite may expect of ``ddm+pymysql``.

Two parts: what MariaDB 10.11 offers through SQLAlchemy's MySQL dialect (SuiteRequirements closes
much of it by default), then what ddm-core rules out, each with its reason.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.testing import exclusions
from sqlalchemy.testing.requirements import SuiteRequirements

_OPEN = exclusions.open


def _closed(reason: str) -> exclusions.compound:
    """A requirement ddm-core (or the backend) does not meet, and why (shown by ``-rs``)."""
    return exclusions.skip_if(lambda config: True, reason)


class Requirements(SuiteRequirements):
    # -- what MariaDB 10.11 and SQLAlchemy's MySQL dialect offer -----------------------------------
    autocommit = property(lambda self: _OPEN())
    isolation_level = property(lambda self: _OPEN())
    skip_autocommit_rollback = property(lambda self: _OPEN())
    boolean_col_expressions = property(lambda self: _OPEN())
    check_constraint_reflection = property(lambda self: _OPEN())
    comment_reflection = property(lambda self: _OPEN())
    computed_columns = property(lambda self: _OPEN())
    computed_columns_stored = property(lambda self: _OPEN())
    computed_columns_virtual = property(lambda self: _OPEN())
    computed_columns_reflect_persisted = property(lambda self: _OPEN())
    create_or_replace_view = property(lambda self: _OPEN())
    create_table_as = property(lambda self: _OPEN())
    ctes = property(lambda self: _OPEN())
    date_historic = property(lambda self: _OPEN())
    datetime_historic = property(lambda self: _OPEN())
    dbapi_lastrowid = property(lambda self: _OPEN())
    delete_from = property(lambda self: _OPEN())
    update_from = property(lambda self: _OPEN())
    except_ = property(lambda self: _OPEN())
    intersect = property(lambda self: _OPEN())
    expression_server_defaults = property(lambda self: _OPEN())
    server_defaults = property(lambda self: _OPEN())
    foreign_key_constraint_name_reflection = property(lambda self: _OPEN())
    foreign_key_constraint_option_reflection_ondelete = property(lambda self: _OPEN())
    foreign_key_constraint_option_reflection_onupdate = property(lambda self: _OPEN())
    fk_constraint_option_reflection_ondelete_noaction = property(lambda self: _OPEN())
    foreign_keys_reflect_as_index = property(lambda self: _OPEN())
    unique_constraints_reflect_as_index = property(lambda self: _OPEN())
    unique_index_reflect_as_unique_constraints = property(lambda self: _OPEN())
    index_ddl_if_exists = property(lambda self: _OPEN())
    table_ddl_if_exists = property(lambda self: _OPEN())
    json_type = property(lambda self: _OPEN())
    mod_operator_as_percent_sign = property(lambda self: _OPEN())
    order_by_label_with_expression = property(lambda self: _OPEN())
    reflect_table_options = property(lambda self: _OPEN())
    regexp_match = property(lambda self: _OPEN())
    regexp_replace = property(lambda self: _OPEN())
    supports_bitwise_and = property(lambda self: _OPEN())
    supports_bitwise_or = property(lambda self: _OPEN())
    supports_bitwise_xor = property(lambda self: _OPEN())
    supports_bitwise_shift = property(lambda self: _OPEN())
    tuple_in = property(lambda self: _OPEN())
    unicode_ddl = property(lambda self: _OPEN())
    views = property(lambda self: _OPEN())
    window_functions = property(lambda self: _OPEN())

    def get_isolation_levels(self, config: Any) -> dict[str, Any]:
        with config.db.connect() as conn:
            levels = list(config.db.dialect.get_isolation_level_values(conn.connection.dbapi_connection))
        return {"default": "REPEATABLE READ", "supported": levels}

    # -- what MariaDB and SQLAlchemy's MySQL dialect do not do (SQLAlchemy's own requirements agree) ---
    date_implicit_bound = property(lambda self: _closed("MySQL drivers send a date as a string: SELECT %s returns a string"))
    time_implicit_bound = property(lambda self: _closed("MySQL drivers send a time as a string: SELECT %s returns a string"))
    datetime_implicit_bound = property(
        lambda self: _closed("MySQL drivers send a datetime as a string: SELECT %s returns a string")
    )
    datetime_microseconds = property(lambda self: _closed("MySQL's DATETIME keeps no microseconds without fsp"))
    time_microseconds = property(lambda self: _closed("MySQL's TIME keeps no microseconds without fsp"))
    sql_expression_limit_offset = property(lambda self: _closed("MySQL takes no expression in LIMIT / OFFSET"))
    unbounded_varchar = property(lambda self: _closed("MySQL's VARCHAR needs a length"))
    precision_generic_float_type = property(lambda self: _closed("MySQL's FLOAT returns 4 decimals"))
    supports_bitwise_not = property(
        lambda self: _closed("MySQL's ~ is 64-bit unsigned: ~(a - 2) > 0 for every a but 2")
    )

    # -- what ddm-core rules out ------------------------------------------------------------------
    schema_reflection = property(
        lambda self: _closed("SHOW DATABASES names the logic database only")
    )
    returning_guards = property(lambda self: _closed("returning off, MariaDB runs it"))
    rowcount_of_matched_rows = property(lambda self: _closed("rowcount = changed rows"))
    savepoints = property(lambda self: _closed("ddm-core refuses SAVEPOINT"))
    temporary_tables = property(lambda self: _closed("temp"))
    temp_table_reflection = property(lambda self: _closed("temp"))
