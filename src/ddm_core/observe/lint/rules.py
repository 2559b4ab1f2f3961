"""What ``ddm lint`` says about one statement: route it (never run it) and read the plan or the refusal.

Each statement on a logic table is routed by a :class:`~ddm_core.Router` on
the configuration, with a placeholder value for each parameter (``1``; a
date, then a string when an algorithm refuses ``1``). Rules
(docs/observability.md#lint):

=====================  ========  ===============================================================
rule                   severity  when
=====================  ========  ===============================================================
``full-route``         warning   the plan reaches every node of a sharded table (``error`` when
                                 the configuration refuses it: ``allowFullRoute``, DML, auditors)
``cross-shard-write``  warning   INSERT / UPDATE / DELETE reaching more than one data source
                                 (not a broadcast table's copies)
``deep-pagination``    warning   a multi-shard SELECT with ``OFFSET`` ≥ ``deep_offset`` or from a
                                 parameter (``error`` beyond ``runtime.maxOffset``: refused)
``shard-key-update``   error     UPDATE setting a shard column
``cross-node``         warning   a statement answered across nodes: its tables' rows are read and
                                 joined in the client or on one node (docs/cross-node-queries.md)
``unsupported``        error     the router refuses the statement (or it cannot be parsed)
=====================  ========  ===============================================================

DDL is not judged: schema scripts go to every physical table by design.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from typing import Any, Sequence

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from ddm_core._text import shorten_sql
from ddm_core.dialects import INPUT
from ddm_core.errors import (
    DdmError,
    DeepPaginationError,
    FullRouteError,
    ParameterError,
    ShardKeyUpdateError,
    ShardValueError,
)
from ddm_core.metadata.model import ShardingConfig
from ddm_core.observe.lint.sources import FoundSql
from ddm_core.route.plan import RouteKind, RoutePlan
from ddm_core.route.router import Router
from ddm_core.route.text.placeholders import Translated, translate

__all__ = ["Finding", "LintSettings", "lint_statement", "RULES", "ERROR", "WARNING"]

ERROR, WARNING = "error", "warning"
RULES = ("full-route", "cross-shard-write", "deep-pagination", "shard-key-update", "cross-node", "unsupported")
#: Placeholder values tried in turn: integers, dates (time-based algorithms), strings. Each
#: placeholder gets its own value, so ``SET user_id = %s WHERE user_id = %s`` is seen to move a row.
_VALUES: tuple[Any, ...] = (
    lambda i: i + 1,
    lambda i: _dt.datetime(2024, 1, 1) + _dt.timedelta(days=i),
    lambda i: str(i + 1),
)  # fmt: skip
_KEYSET_FIX = "page with a keyset condition (WHERE sort_key > last seen value ORDER BY sort_key LIMIT n) instead of OFFSET"


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem, where it is and what to do about it."""

    path: str
    line: int
    severity: str
    rule: str
    message: str
    fix: str
    sql: str

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line, "severity": self.severity, "rule": self.rule,
                "message": self.message, "fix": self.fix, "sql": self.sql}  # fmt: skip


@dataclass(frozen=True, slots=True)
class LintSettings:
    """Thresholds of the rules (the configuration decides everything else)."""

    deep_offset: int = 1000


def lint_statement(router: Router, found: FoundSql, settings: LintSettings = LintSettings()) -> list[Finding]:
    """The findings for one statement (none when it touches no logic table, or is not SQL)."""

    def finding(severity: str, rule: str, message: str, fix: str) -> Finding:
        return Finding(found.path, found.line, severity, rule, message, fix, shorten_sql(found.sql))

    try:
        translated = translate(found.sql)
        tree = sqlglot.parse_one(translated.sql, read=INPUT)
    except (DdmError, SqlglotError) as exc:
        if not found.certain:
            return []  # a string that merely starts like SQL
        message = exc.message if isinstance(exc, DdmError) else str(exc).splitlines()[0]
        return [finding(ERROR, "unsupported", f"cannot be parsed: {message}", "write it as one MySQL statement")]
    config = router.config
    if tree is None or not _on_logic_tables(tree, config):
        return []
    plan, error = _route(router, found.sql, translated)
    if error is not None:
        return [_refusal(finding, error, found.sql)]
    if plan is None or plan.statement == "ddl":
        return []  # no placeholder value routes it (the algorithms refuse each): nothing to judge
    return _plan_findings(finding, plan, tree, config, settings)


def _on_logic_tables(tree: exp.Expr, config: ShardingConfig) -> bool:
    for table in tree.find_all(exp.Table):
        name = table.name
        if name and (config.table(name) is not None or config.is_broadcast(name)
                     or any(s.lower() == name.lower() for s in config.single_tables)):  # fmt: skip
            return True
    return False


def _params(translated: Translated, value: Any) -> Any:
    if translated.style == "none" or not translated.names:
        return None
    if translated.style == "pyformat":
        return {name: value(i) for i, name in enumerate(dict.fromkeys(translated.names))}
    return [value(i) for i in range(max(int(n) for n in translated.names) + 1)]


def _route(router: Router, sql: str, translated: Translated) -> tuple[RoutePlan | None, DdmError | None]:
    """The plan for the first placeholder value the algorithms accept, or the refusal that is not about values."""
    for value in _VALUES:
        try:
            return router.route(sql, _params(translated, value)), None
        except (ShardValueError, ParameterError):
            if translated.style == "none":
                break  # literals only: another placeholder value changes nothing
            continue
        except DdmError as exc:
            return None, exc
    return None, None


def _refusal(finding: Any, error: DdmError, sql: str) -> Finding:
    message = error.message.split("\n")[0].removesuffix(f" (statement: {shorten_sql(sql)!r})")  # shown apart
    if isinstance(error, DeepPaginationError):
        return finding(ERROR, "deep-pagination", message, _KEYSET_FIX)  # type: ignore[no-any-return]
    if isinstance(error, ShardKeyUpdateError):
        return finding(ERROR, "shard-key-update", message,  # type: ignore[no-any-return]
                       "a row cannot move between shards by UPDATE: delete it and insert it again with the new key")
    if isinstance(error, FullRouteError):
        table = getattr(error, "table", None)
        columns = ", ".join(getattr(error, "columns", ()) or ()) or "its shard column(s)"
        return finding(ERROR, "full-route", message,  # type: ignore[no-any-return]
                       f"add a condition on {columns} of {table}" if table else "add the shard key")
    return finding(ERROR, "unsupported", message,  # type: ignore[no-any-return]
                   "rewrite the statement in a form the router supports (docs/architecture.md#boundaries)")


def _plan_findings(
    finding: Any, plan: RoutePlan, tree: exp.Expr, config: ShardingConfig, settings: LintSettings
) -> list[Finding]:
    out: list[Finding] = []
    if plan.cross_node is not None:
        cross = plan.cross_node
        reason = cross.reason.split(" (statement: ")[0]
        out.append(finding(WARNING, "cross-node", f"answered across nodes ({cross.strategy}): {reason}",
                           "join bound tables on their shard key, or make the small table a broadcast table, "
                           "so that each node answers its own rows"))  # fmt: skip
        return out
    if plan.kind is RouteKind.FULL:
        for t in plan.tables:
            table = config.table(t.logic_table)
            if table is None:
                continue
            columns = ", ".join(table.sharding_columns) or "its shard column(s)"
            out.append(finding(WARNING, "full-route", f"{t.logic_table}: {t.reason} ({len(t.nodes)} nodes)",
                               f"add a condition on {columns} of {t.logic_table}"))  # fmt: skip
            break
    if plan.is_write and plan.kind is not RouteKind.BROADCAST and len(plan.data_sources) > 1:
        out.append(finding(WARNING, "cross-shard-write",
                           f"{plan.statement.upper()} reaches {len(plan.data_sources)} data sources "
                           f"({', '.join(plan.data_sources)}): not atomic in a local transaction",
                           "write one shard per statement (by the shard key), or use transaction_mode='xa'"))  # fmt: skip
    # several units, or one data source's tables in one UNION ALL (route/query/per_source.py)
    if plan.statement == "select" and (len(plan.units) > 1 or any(len(t.nodes) > 1 for t in plan.tables)):
        out.extend(_pagination(finding, tree, settings))
    return out


def _pagination(finding: Any, tree: exp.Expr, settings: LintSettings) -> Sequence[Finding]:
    for offset in tree.find_all(exp.Offset):
        value = offset.expression
        if isinstance(value, exp.Placeholder):
            return [finding(WARNING, "deep-pagination", "OFFSET from a parameter across shards: each shard returns "
                            "offset + limit rows, so deep pages cost every shard", _KEYSET_FIX)]  # fmt: skip
        if isinstance(value, exp.Literal) and not value.is_string and int(value.this) >= settings.deep_offset:
            return [finding(WARNING, "deep-pagination", f"OFFSET {value.this} across shards: each shard returns "
                            f"{value.this} + limit rows", _KEYSET_FIX)]  # fmt: skip
    return []
