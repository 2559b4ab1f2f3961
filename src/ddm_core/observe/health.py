"""Health baselines: row counts of every physical table, recorded and compared (docs/observability.md#health).

``take_baseline`` counts the rows of every physical table of every logic table
(sharded, broadcast, single) — ``COUNT(*)``, or the server's estimate
(``information_schema.tables.table_rows``) for tables whose estimate is above
``estimate_above`` rows, where a count would scan too much. ``check`` counts
again the same way and reports:

* ``dropped`` / ``jumped`` — the row count moved by more than ``threshold``
  of the baseline (``estimate_threshold`` for estimated tables: InnoDB's
  estimates wander by tens of percent on their own) and by more than
  ``min_change`` rows (0 → 3 rows is no incident);
* ``missing`` — a physical table of the configuration does not exist;
* ``schema`` — a physical table's schema differs from its siblings', read and
  compared by the migration's schema check (:func:`ddm_core.migrate.schema_check.check_table`).

MySQL and MariaDB data sources (the schema check reads ``SHOW CREATE TABLE``).
"""

from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from ddm_core.errors import ObserveError
from ddm_core.metadata.model import ShardingConfig
from ddm_core.migrate.connections import Connections
from ddm_core.migrate.schema_check import PhysicalTable, check_table, physical_tables
from ddm_core.migrate.tables import quote

__all__ = [
    "COUNT",
    "ESTIMATE",
    "Baseline",
    "TableCount",
    "HealthFinding",
    "HealthReport",
    "logic_tables",
    "take_baseline",
    "check",
    "DEFAULT_ESTIMATE_ABOVE",
]

COUNT, ESTIMATE = "count", "estimate"
#: Tables whose estimate is above this many rows are not counted with COUNT(*).
DEFAULT_ESTIMATE_ABOVE = 5_000_000
_FORMAT = 1


@dataclass(frozen=True, slots=True)
class TableCount:
    """Rows of one physical table and how they were found (``count`` or ``estimate``)."""

    rows: int
    method: str


@dataclass(slots=True)
class Baseline:
    """Row counts per logic table, per physical table (``"ds_0.t_order_0_1"``)."""

    taken_at: str
    config_name: str
    tables: dict[str, dict[str, TableCount]] = field(default_factory=dict)
    missing: dict[str, list[str]] = field(default_factory=dict)  # physical tables absent when it was taken

    def to_json(self) -> dict[str, Any]:
        return {
            "format": _FORMAT,
            "taken_at": self.taken_at,
            "config": self.config_name,
            "tables": {
                logic: {name: {"rows": c.rows, "method": c.method} for name, c in counts.items()}
                for logic, counts in self.tables.items()
            },
            "missing": self.missing,
        }

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_json(), indent=2, sort_keys=True) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> Baseline:
        """Read a baseline file written by :meth:`save`.

        Raises:
            ObserveError: the file cannot be read or is not a baseline (names the file and the field).
        """
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ObserveError(f"health baseline {str(path)!r} cannot be read: {exc}", path=str(path)) from exc
        if not isinstance(data, dict) or data.get("format") != _FORMAT or not isinstance(data.get("tables"), dict):
            raise ObserveError(
                f"health baseline {str(path)!r} is not a ddm health baseline (format {_FORMAT}, a 'tables' object)",
                path=str(path),
            )
        baseline = cls(str(data.get("taken_at", "")), str(data.get("config", "")))
        for logic, counts in data["tables"].items():
            try:
                baseline.tables[logic] = {
                    name: TableCount(int(c["rows"]), str(c["method"])) for name, c in counts.items()
                }
            except (TypeError, KeyError, ValueError, AttributeError) as exc:
                raise ObserveError(
                    f"health baseline {str(path)!r}: table {logic!r} has an unreadable entry ({exc!r})",
                    path=str(path), table=logic,
                ) from exc  # fmt: skip
        missing = data.get("missing") or {}
        baseline.missing = {str(k): [str(v) for v in vs] for k, vs in missing.items()} if isinstance(missing, dict) else {}
        return baseline


@dataclass(frozen=True, slots=True)
class HealthFinding:
    """One thing ``ddm health check`` flags.

    Attributes:
        kind: ``dropped``, ``jumped``, ``missing``, ``schema`` or ``new`` (a
            physical table the baseline does not know: informational).
        table: The logic table.
        physical: The physical table (``ds_0.t_order_0_1``).
        detail: What was found, in words.
    """

    kind: str
    table: str
    physical: str
    detail: str

    @property
    def problem(self) -> bool:
        return self.kind != "new"

    def __str__(self) -> str:
        return f"{self.kind}: {self.physical} ({self.table}): {self.detail}"


@dataclass(frozen=True, slots=True)
class HealthReport:
    findings: tuple[HealthFinding, ...]
    checked: int  # physical tables looked at

    @property
    def healthy(self) -> bool:
        return not any(f.problem for f in self.findings)

    def to_json(self) -> dict[str, Any]:
        return {
            "healthy": self.healthy,
            "checked": self.checked,
            "findings": [
                {"kind": f.kind, "table": f.table, "physical": f.physical, "detail": f.detail} for f in self.findings
            ],
        }


def logic_tables(config: ShardingConfig) -> list[str]:
    """Every logic table of ``config``: sharded, then broadcast, then single ones."""
    return [*config.tables, *config.broadcast_tables, *config.single_tables]


def _estimates(conns: Connections, data_source: str) -> dict[str, int]:
    """Table name (lower case) → the server's row estimate, for every table of the data source's database."""
    rows = conns.query(
        data_source,
        "SELECT table_name, table_rows FROM information_schema.tables WHERE table_schema = DATABASE()",
    )
    return {str(name).lower(): int(n or 0) for name, n in rows}


def _count(conns: Connections, t: PhysicalTable) -> int:
    rows = conns.query(t.data_source, f"SELECT COUNT(*) FROM {quote(conns, t.data_source, t.table)}")
    return int(rows[0][0])


class _Reader:
    """Physical tables' existence and rows, one information_schema read per data source."""

    def __init__(self, conns: Connections) -> None:
        self.conns = conns
        self._estimates: dict[str, dict[str, int]] = {}

    def estimate(self, t: PhysicalTable) -> int | None:
        known = self._estimates.get(t.data_source)
        if known is None:
            known = self._estimates[t.data_source] = _estimates(self.conns, t.data_source)
        return known.get(t.table.lower())

    def rows(self, t: PhysicalTable, method: str) -> TableCount:
        estimate = self.estimate(t)
        assert estimate is not None
        return TableCount(estimate, ESTIMATE) if method == ESTIMATE else TableCount(_count(self.conns, t), COUNT)


def _selected(config: ShardingConfig, tables: Sequence[str] | None) -> list[str]:
    every = logic_tables(config)
    if not tables:
        return every
    known = {t.lower(): t for t in every}
    unknown = [t for t in tables if t.lower() not in known]
    if unknown:
        raise ObserveError(
            f"table(s) {', '.join(unknown)} are not logic tables of the configuration (it has {', '.join(every)})",
            tables=tuple(unknown),
        )
    return [known[t.lower()] for t in tables]


def take_baseline(
    config: ShardingConfig,
    conns: Connections,
    *,
    tables: Sequence[str] | None = None,
    estimate_above: int = DEFAULT_ESTIMATE_ABOVE,
    clock: Any = None,
) -> Baseline:
    """Row counts of every physical table of ``tables`` (default: every logic table).

    Args:
        estimate_above: Use the server's estimate instead of ``COUNT(*)`` above this many (estimated) rows.
        clock: Returns the time the baseline is stamped with (default: now, UTC).
    """
    now = clock() if clock is not None else _dt.datetime.now(_dt.timezone.utc)
    baseline = Baseline(now.isoformat(timespec="seconds"), config.name or "")
    reader = _Reader(conns)
    for logic in _selected(config, tables):
        counts: dict[str, TableCount] = {}
        for t in physical_tables(logic, [config]):
            estimate = reader.estimate(t)
            if estimate is None:
                baseline.missing.setdefault(logic, []).append(str(t))
                continue
            counts[str(t)] = reader.rows(t, ESTIMATE if estimate > estimate_above else COUNT)
        baseline.tables[logic] = counts
    return baseline


def check(
    baseline: Baseline,
    config: ShardingConfig,
    conns: Connections,
    *,
    threshold: float = 0.2,
    estimate_threshold: float = 0.5,
    min_change: int = 100,
    schemas: bool = True,
) -> HealthReport:
    """Compare the physical tables now with ``baseline`` (the tables it recorded), and their schemas.

    Args:
        threshold: Relative change of a counted table's rows that is flagged (0.2: ±20 %).
        estimate_threshold: The same for tables the baseline estimated.
        min_change: Changes of at most this many rows are never flagged.
        schemas: Also compare each logic table's physical schemas with one another.

    Raises:
        ObserveError: a threshold is out of range.
    """
    if not (0 < threshold and 0 < estimate_threshold) or min_change < 0:
        raise ObserveError(
            f"health check thresholds must be > 0 and min_change >= 0, not threshold={threshold}, "
            f"estimate_threshold={estimate_threshold}, min_change={min_change}",
        )
    reader = _Reader(conns)
    findings: list[HealthFinding] = []
    checked = 0
    known = {n.lower(): n for n in logic_tables(config)}
    for recorded, before in baseline.tables.items():
        logic = known.get(recorded.lower())
        if logic is None:  # no longer a logic table of this configuration: nothing to compare with
            continue
        for t in physical_tables(logic, [config]):
            checked += 1
            name = str(t)
            if reader.estimate(t) is None:
                findings.append(HealthFinding("missing", logic, name, "the physical table does not exist"))
                continue
            old = before.get(name)
            if old is None:
                findings.append(HealthFinding("new", logic, name, "not in the baseline (counted from now on)"))
                continue
            now = reader.rows(t, old.method)
            findings.extend(_count_findings(logic, name, old, now, threshold, estimate_threshold, min_change))
        if schemas:
            report = check_table(conns, logic, [config])
            findings.extend(
                HealthFinding("schema", logic, d.table, f"{d.aspect}: {d.found} (in {d.reference}: {d.expected})")
                for d in report.differences
            )
    return HealthReport(tuple(findings), checked)


def _count_findings(
    logic: str, name: str, old: TableCount, now: TableCount, threshold: float, estimate_threshold: float,
    min_change: int,
) -> Iterable[HealthFinding]:
    limit = estimate_threshold if old.method == ESTIMATE else threshold
    change = now.rows - old.rows
    if abs(change) <= min_change or abs(change) <= limit * old.rows:
        return ()
    kind = "dropped" if change < 0 else "jumped"
    share = f"{change / old.rows:+.0%}" if old.rows else "from empty"
    how = " (estimates)" if old.method == ESTIMATE else ""
    return (HealthFinding(kind, logic, name, f"{old.rows} -> {now.rows} rows{how}, {share}; threshold ±{limit:.0%}"),)
