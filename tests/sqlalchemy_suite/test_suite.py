"""SQLAlchemy's dialect compliance suite; requirements.py says what ddm-core rules out.

Some of the suite's tests assume what no requirement of SQLAlchemy's names; they are re-declared
here behind a requirement of their own (requirements.py gives the reason and the configurations).
"""

from typing import Any

from sqlalchemy.testing import requires
from sqlalchemy.testing.suite import *  # noqa: F401,F403
from sqlalchemy.testing.suite import ComponentReflectionTest as _ComponentReflectionTest
from sqlalchemy.testing.suite import CompoundSelectTest as _CompoundSelectTest
from sqlalchemy.testing.suite import CTETest as _CTETest
from sqlalchemy.testing.suite import FetchLimitOffsetTest as _FetchLimitOffsetTest
from sqlalchemy.testing.suite import ReturningGuardsTest as _ReturningGuardsTest
from sqlalchemy.testing.suite import SameNamedSchemaTableTest as _SameNamedSchemaTableTest
from sqlalchemy.testing.suite import WindowFunctionTest as _WindowFunctionTest


class ReturningGuardsTest(_ReturningGuardsTest):
    __requires__ = ("returning_guards",)


class CTETest(_CTETest):
    __requires__ = (*_CTETest.__requires__, "rows_referring_to_rows_of_their_table")


class SameNamedSchemaTableTest(_SameNamedSchemaTableTest):
    __requires__ = (*_SameNamedSchemaTableTest.__requires__, "table_of_the_same_name_in_another_schema")


class CompoundSelectTest(_CompoundSelectTest):
    __requires__ = ("union_across_shards_with_order_or_subquery",)


class WindowFunctionTest(_WindowFunctionTest):
    __requires__ = (*_WindowFunctionTest.__requires__, "window_function_across_shards")


class FetchLimitOffsetTest(_FetchLimitOffsetTest):
    @requires.union_across_shards_with_order_or_subquery
    def test_limit_render_multiple_times(self, connection: Any) -> None:
        super().test_limit_render_multiple_times(connection)


class ComponentReflectionTest(_ComponentReflectionTest):
    @requires.schemas_listed
    def test_get_schema_names(self, connection: Any) -> None:
        super().test_get_schema_names(connection)

    @requires.schemas_listed
    def test_get_schema_names_w_translate_map(self, connection: Any) -> None:
        super().test_get_schema_names_w_translate_map(connection)

    @requires.schemas_listed
    def test_has_schema(self, connection: Any) -> None:
        super().test_has_schema(connection)

    @requires.schemas_listed
    def test_has_schema_w_translate_map(self, connection: Any) -> None:
        super().test_has_schema_w_translate_map(connection)

