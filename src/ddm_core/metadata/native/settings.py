"""The application settings of ddm-core's own format: ``runtime`` (routing guards, slow-SQL log),
``xa`` and the ``metadata`` center; the ``proxy`` section is :mod:`~ddm_core.metadata.native.proxy`."""

from __future__ import annotations

from ddm_core.metadata.fields import Section
from ddm_core.metadata.limits import RANGES
from ddm_core.metadata.model import MetadataCenter, RuntimeSettings, XaSettings

__all__ = ["read_runtime", "read_xa", "read_metadata_center"]


def read_runtime(sec: Section, app_name: str | None) -> RuntimeSettings:
    """``runtime`` (or ``ddm.route``); ``appName`` given beside it is the default of its own."""
    d = RuntimeSettings()
    settings = RuntimeSettings(
        allow_full_route=sec.bool("allowFullRoute", default=d.allow_full_route),
        allow_dml_full_route=sec.bool("allowDmlFullRoute", default=d.allow_dml_full_route),
        full_route_threshold=sec.int(
            "fullRouteThreshold", default=d.full_route_threshold, bounds=RANGES["runtime.fullRouteThreshold"]
        ),
        max_offset=sec.int("maxOffset", default=d.max_offset, bounds=RANGES["runtime.maxOffset"]),
        slow_sql_ms=sec.int("slowSqlMs", default=d.slow_sql_ms, bounds=RANGES["runtime.slowSqlMs"]),
        sql_comment=sec.bool("sqlComment", default=d.sql_comment),
        app_name=sec.str("appName", default=app_name),
        merge_memory_warn_mb=sec.int(
            "mergeMemoryWarnMb", default=d.merge_memory_warn_mb, bounds=RANGES["runtime.mergeMemoryWarnMb"]
        ),
        cross_node_queries=sec.bool("crossNodeQueries", default=d.cross_node_queries),
        max_join_rows=sec.int("maxJoinRows", default=d.max_join_rows, bounds=RANGES["runtime.maxJoinRows"]),
        max_join_memory_mb=sec.int(
            "maxJoinMemoryMb", default=d.max_join_memory_mb, bounds=RANGES["runtime.maxJoinMemoryMb"]
        ),
        insert_select_autocommit=sec.bool("insertSelectAutocommit", default=d.insert_select_autocommit),
        one_unit_per_data_source=sec.bool("oneUnitPerDataSource", default=d.one_unit_per_data_source),
    )
    sec.finish()
    return settings


def read_metadata_center(sec: Section) -> MetadataCenter:
    center = MetadataCenter(
        server=sec.str("server"),
        namespace=sec.str("namespace"),
        failover_snapshot=sec.str("failoverSnapshot"),
    )
    sec.finish()
    return center


def read_xa(sec: Section) -> XaSettings:
    """The ``xa:`` section (docs/xa.md); cross-checks are in ``validate.py``."""
    d = XaSettings()
    settings = XaSettings(
        log_data_source=sec.str("logDataSource"),
        timeout_ms=sec.int("timeoutMs", default=d.timeout_ms, bounds=RANGES["xa.timeoutMs"]),
        abandon_after_ms=sec.int("abandonAfterMs", default=d.abandon_after_ms, bounds=RANGES["xa.abandonAfterMs"]),
        max_concurrent=sec.int("maxConcurrent", default=d.max_concurrent, bounds=RANGES["xa.maxConcurrent"]),
        recover_on_start=sec.bool("recoverOnStart", default=d.recover_on_start),
    )
    sec.finish()
    return settings
