"""ShardingSphere SQL hints: ``/* SHARDINGSPHERE_HINT: key=value, ... */`` opening a statement.

ShardingSphere 5.x reads routing hints from a comment that opens the
statement (``/* ShardingSphere hint: ... */``, its older spelling, too). The
keys that map onto ddm-core's :class:`~ddm_core.route.hints.Hint` are read the
same way; each is also accepted under ShardingSphere's camel-case alias:

========================================  ===================================================
``DATA_SOURCE_NAME=ds_0``                 ``Hint.database``: route to that data source
``[{table}.]SHARDING_DATABASE_VALUE=v``   ``Hint.database_value`` (``HINT``-kind database strategies)
``[{table}.]SHARDING_TABLE_VALUE=v``      ``Hint.table_value`` (``HINT``-kind table strategies)
``WRITE_ROUTE_ONLY=true``                 ``Hint.force_primary``: reads go to the primary
``SKIP_SQL_REWRITE=true``                 with ``DATA_SOURCE_NAME``: the statement runs there as written
========================================  ===================================================

Values are read as ShardingSphere reads them: digits are an integer, anything
else the text as written; booleans are ``true`` / ``false``. A hint key
ddm-core does not implement (``DISABLE_AUDIT_NAMES``, ``SHADOW``...), an
unknown key, a malformed item, or a hint comment anywhere but at the start of
the statement is refused with an error naming it — a hint that is silently
ignored would route the statement somewhere its author did not mean.

The hint is part of the SQL text, so it is read once, when the statement is
compiled; it overrides the fields it sets of the hint active in the caller's
context (:func:`ddm_core.route.hint`). The comment is not sent to the data
sources. It is read from real comments only: MySQL executable comments
(``/*! ... */``) are statement text by then (:mod:`ddm_core.route.text.placeholders`).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Sequence

from ddm_core._text import shorten_sql
from ddm_core.errors import UnsupportedSQLError
from ddm_core.metadata.model import ShardingConfig
from ddm_core.route.context import RouteContext
from ddm_core.route.hints import Hint
from ddm_core.route.plan import NO_MERGE, RouteKind, RoutePlan, RouteUnit
from ddm_core.route.text.template import QUOTED_OR_PARAM, Template

__all__ = ["SqlHint", "read_sql_hint", "HintedStatement", "PassThroughStatement", "pass_through", "on_data_source"]

_TOKEN = r"SHARDINGSPHERE(?:_|\s+)HINT\s*:"
_OPENING = re.compile(rf"\A\s*/\*\s*{_TOKEN}(?P<body>.*?)\*/\s*", re.I | re.S)
_ANYWHERE = re.compile(_TOKEN, re.I)
_INTEGER = re.compile(r"[+-]?\d+\Z")

# Keys as compared: upper case without underscores, so DATA_SOURCE_NAME and dataSourceName are one key.
_DATA_SOURCE, _WRITE_ONLY, _SKIP_REWRITE = "DATASOURCENAME", "WRITEROUTEONLY", "SKIPSQLREWRITE"
_DB_VALUE, _TABLE_VALUE = "SHARDINGDATABASEVALUE", "SHARDINGTABLEVALUE"
_SUPPORTED = ("DATA_SOURCE_NAME", "SHARDING_DATABASE_VALUE", "SHARDING_TABLE_VALUE", "WRITE_ROUTE_ONLY",
              "SKIP_SQL_REWRITE")  # fmt: skip
#: ShardingSphere hint keys ddm-core does not implement, and why.
_NOT_IMPLEMENTED = {
    "DISABLEAUDITNAMES": "ddm-core has no per-statement switch for a table's auditors; add the shard key, or "
    "remove the auditor from the table's auditStrategy",
    "SHADOW": "ddm-core has no shadow databases",
    "SKIPMETADATAVALIDATE": "ddm-core validates no table metadata to skip",
    "USETRAFFIC": "ddm-core has no traffic rules",
    "SKIPENCRYPTREWRITE": "ddm-core has no encryption rules",
}


def _canon(key: str) -> str:
    return key.replace("_", "").upper()


@dataclass(frozen=True, slots=True)
class SqlHint:
    """What an opening ``SHARDINGSPHERE_HINT`` comment asks for.

    Attributes:
        end: Where the statement proper starts (the comment and the blanks after it end there).
        database: ``DATA_SOURCE_NAME``.
        database_value, table_value: The sharding values (``None``: not given).
        force_primary: ``WRITE_ROUTE_ONLY=true``.
        skip_rewrite: ``SKIP_SQL_REWRITE=true``.
    """

    end: int
    database: str | None = None
    database_value: Any = None
    table_value: Any = None
    force_primary: bool = False
    skip_rewrite: bool = False

    @property
    def routes(self) -> bool:
        """Does the hint change where the statement goes (more than the primary for reads)?"""
        return self.database is not None or self.database_value is not None or self.table_value is not None

    def applied(self, active: Hint | None) -> Hint | None:
        """``active`` (the caller's context hint) with the routing fields this hint sets overridden."""
        if not self.routes:
            return active
        changes: dict[str, Any] = {}
        if self.database is not None:
            changes["database"] = self.database
        if self.database_value is not None:
            changes["database_value"] = self.database_value
        if self.table_value is not None:
            changes["table_value"] = self.table_value
        return dataclasses.replace(active if active is not None else Hint(), **changes)


def read_sql_hint(text: str, config: ShardingConfig, original: str) -> SqlHint | None:
    """The hint opening ``text``, ``None`` when there is none.

    Args:
        text: The statement as translated (placeholders ``:pN``; executable comments are text).
        config: The configuration (data source and table names are checked).
        original: The caller's statement, quoted in errors.

    Raises:
        UnsupportedSQLError: a hint comment that does not open the statement, an
            unknown or unimplemented key, a malformed item or value, a data source
            or table the configuration does not know.
    """
    if _ANYWHERE.search(text) is None:  # one C-level scan; most statements end here
        return None
    found = _OPENING.match(text)
    rest = found.end() if found is not None else 0
    for token in QUOTED_OR_PARAM.finditer(text, rest):
        if token.group().startswith("/*") and _ANYWHERE.search(token.group()):
            raise _error(
                f"the ShardingSphere hint {shorten_sql(token.group(), 60)!r} must open the statement, "
                "written as /* SHARDINGSPHERE_HINT: key=value, ... */",
                original,
            )
    if found is None:
        return None
    fields: dict[str, Any] = {}
    for item in (i.strip() for i in found.group("body").split(",")):
        if item:
            _read_item(item, fields, config, original)
    if fields.get("skip_rewrite"):
        if "database" not in fields:
            raise _error(
                "SKIP_SQL_REWRITE=true needs DATA_SOURCE_NAME: the statement as written names logic tables, "
                "which no data source holds; name the data source to run it on",
                original,
            )
        if "database_value" in fields or "table_value" in fields:
            raise _error(
                "SKIP_SQL_REWRITE=true sends the statement to DATA_SOURCE_NAME as written; "
                "SHARDING_DATABASE_VALUE / SHARDING_TABLE_VALUE would have no effect there",
                original,
            )
    return SqlHint(rest, **fields)


def _read_item(item: str, fields: dict[str, Any], config: ShardingConfig, original: str) -> None:
    key, sep, value = (part.strip() for part in item.partition("="))
    if not sep or not key or not value:
        raise _error(f"ShardingSphere hint item {item!r} is not key=value", original)
    table, dot, bare = key.rpartition(".")
    canon = _canon(bare if dot else key)
    if canon in (_DB_VALUE, _TABLE_VALUE):
        if dot and config.table(table) is None:
            raise _error(
                f"ShardingSphere hint {key!r} names table {table!r}, which is not a sharded table of the "
                f"configuration (sharded: {', '.join(config.tables) or 'none'})",
                original,
            )
        name = "database_value" if canon == _DB_VALUE else "table_value"
        _set_once(fields, name, int(value) if _INTEGER.match(value) else value, key, original)
        return
    if dot:
        raise _error(f"ShardingSphere hint key {key!r} takes no table prefix", original)
    if canon == _DATA_SOURCE:
        if value not in config.data_sources:
            raise _error(
                f"ShardingSphere hint DATA_SOURCE_NAME={value!r} names no configured data source "
                f"(known: {', '.join(config.data_sources)})",
                original,
            )
        _set_once(fields, "database", value, key, original)
    elif canon in (_WRITE_ONLY, _SKIP_REWRITE):
        if value.lower() not in ("true", "false"):
            raise _error(f"ShardingSphere hint {key}={value!r} must be true or false", original)
        _set_once(fields, "force_primary" if canon == _WRITE_ONLY else "skip_rewrite", value.lower() == "true", key,
                  original)  # fmt: skip
    elif canon in _NOT_IMPLEMENTED:
        raise _error(f"ShardingSphere hint {key!r} is not supported: {_NOT_IMPLEMENTED[canon]}", original)
    else:
        raise _error(
            f"unknown ShardingSphere hint key {key!r} (supported: {', '.join(_SUPPORTED)})", original
        )


def _set_once(fields: dict[str, Any], name: str, value: Any, key: str, original: str) -> None:
    if name in fields and fields[name] != value:
        raise _error(
            f"ShardingSphere hint {key!r} gives {value!r} after {fields[name]!r}: ddm-core takes one value per "
            "statement",
            original,
        )
    fields[name] = value


def _error(message: str, original: str) -> UnsupportedSQLError:
    return UnsupportedSQLError(
        f"{message} (statement: {shorten_sql(original)!r})", sql=original, construct="SHARDINGSPHERE_HINT"
    )


class HintedStatement:
    """A compiled statement routed under its SQL hint (merged into the caller's context hint)."""

    def __init__(self, inner: Any, sql_hint: SqlHint) -> None:
        self.inner = inner
        self.sql_hint = sql_hint

    def route(self, bound: Sequence[Any], hint: Hint | None) -> RoutePlan:
        plan: RoutePlan = self.inner.route(bound, self.sql_hint.applied(hint))
        if self.sql_hint.force_primary and not plan.force_primary:
            plan = plan._replace(force_primary=True)
        return plan

    def __getattr__(self, name: str) -> Any:
        # Introspection (fast_path, mode, analysis...) is the statement's own.
        return getattr(self.inner, name)


_FIRST_WORD = re.compile(r"(?:\s|/\*.*?\*/|#[^\n]*|--[^\n]*)*([A-Za-z]+)", re.S)
_KINDS = {
    "SELECT": "select", "SHOW": "show", "DESC": "show", "DESCRIBE": "show", "EXPLAIN": "show",
    "INSERT": "insert", "REPLACE": "insert", "UPDATE": "update", "DELETE": "delete",
    "CREATE": "ddl", "ALTER": "ddl", "DROP": "ddl", "TRUNCATE": "ddl", "RENAME": "ddl",
}  # fmt: skip
_READS = ("select", "show")


class PassThroughStatement:
    """``SKIP_SQL_REWRITE``: the statement as written, on the hinted data source, never parsed or rewritten."""

    fast_path: str | None = None  # nothing is routed by conditions

    def __init__(self, ctx: RouteContext, sql_hint: SqlHint, template: Template, statement: str) -> None:
        assert sql_hint.database is not None
        self.ctx = ctx
        self.data_source = sql_hint.database
        self.force_primary = sql_hint.force_primary
        self.template = template
        self.statement = statement
        # Not known to be a read: it goes to the primary, where anything may run.
        self.is_write = statement not in _READS

    def route(self, bound: Sequence[Any], hint: Hint | None) -> RoutePlan:
        ds = self.data_source
        unit = RouteUnit(ds, self.ctx.comment(ds) + self.template.fmt, self.template.params_of(bound))
        force = self.force_primary or bool(hint and hint.force_primary)
        return RoutePlan((unit,), RouteKind.SINGLE, (), NO_MERGE, self.statement, self.is_write, force_primary=force)


def on_data_source(data_source: str, sql: str) -> str:
    """``sql`` (physical names, ``%s`` placeholders) made to run as written on ``data_source``.

    For ddm-core's own tables that exist once per data source (the outbox's
    message table, the worker-id lease table): the hint sends the statement to
    that data source's primary unparsed, so a transaction counts it as a write
    there like any other.
    """
    return f"/* SHARDINGSPHERE_HINT: DATA_SOURCE_NAME={data_source}, SKIP_SQL_REWRITE=true */ {sql}"


def pass_through(ctx: RouteContext, sql_hint: SqlHint, template: Template, text: str) -> PassThroughStatement:
    """The pass-through statement for ``text`` (the statement after the hint comment)."""
    word = _FIRST_WORD.match(text)
    statement = _KINDS.get(word.group(1).upper(), "other") if word is not None else "other"
    return PassThroughStatement(ctx, sql_hint, template, statement)
