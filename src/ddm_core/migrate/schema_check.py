"""Do all physical tables of a logic table have the same schema? ``SHOW CREATE TABLE``, normalised and compared.

Used by a migration's prepare phase (old and new physical tables must agree
before a row is copied) and meant for any other caller that needs the same
answer — a gray cut-over, a health check:

* :func:`parse_create_table` — one ``SHOW CREATE TABLE`` text → :class:`TableSchema`
  (columns in order with their full definitions — type, nullability, default,
  charset / collation where the server writes them —, indexes, constraints and
  the table options: engine, default charset, collation, row format...);
* :func:`compare_schemas` — the :class:`SchemaDifference` list between two;
* :func:`read_schemas` / :func:`check_table` — read every physical table of a
  logic table (from one or several configurations) and compare each with the
  first, giving a :class:`SchemaReport` that names each table and difference.

What is normalised away, because it differs between equal tables: the table
name; the ``AUTO_INCREMENT=`` counter; the per-table suffix ddm-core gives
constraint names (``fk_user_t_order_1_0``, docs/architecture.md#constraint-names-per-physical-table)
and the node suffix of a bound table they reference; integer display widths
(``bigint(20)``, which MySQL 8 no longer prints); runs of spaces. Everything
else counts, including column order (``INSERT`` without a column list and
``SELECT *`` depend on it). Index order does not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from ddm_core._text import SINGLE_QUOTED
from ddm_core.errors import SchemaMismatchError
from ddm_core.metadata.model import ShardingConfig
from ddm_core.migrate.connections import Connections
from ddm_core.migrate.tables import show_create_table, table_exists

__all__ = [
    "TableSchema",
    "SchemaDifference",
    "SchemaReport",
    "PhysicalTable",
    "parse_create_table",
    "compare_schemas",
    "physical_tables",
    "read_schemas",
    "check_table",
]

_IDENT = r"`(?:[^`]|``)+`"
_HEADER = re.compile(r"\s*CREATE\s+(?:TEMPORARY\s+)?TABLE\s+(" + _IDENT + r"|\S+)\s*\(", re.IGNORECASE)
_OPTION = re.compile(rf"([A-Z_]+(?: [A-Z_]+)?)=({SINGLE_QUOTED}|\S+)")
_INT_WIDTH = re.compile(r"\b((?:tiny|small|medium|big)?int)\(\d+\)(?! zerofill)", re.IGNORECASE)
_SPACES = re.compile(r"\s+")
_IGNORED_OPTIONS = {"AUTO_INCREMENT"}
_OPTION_NAMES = {"DEFAULT CHARSET": "CHARSET", "CHARACTER SET": "CHARSET", "DEFAULT CHARACTER SET": "CHARSET",
                 "DEFAULT COLLATE": "COLLATE"}


@dataclass(frozen=True, slots=True)
class TableSchema:
    """A table's schema with the per-table parts normalised away.

    Attributes:
        columns: ``(name, definition)`` in table order.
        indexes: ``"PRIMARY KEY"`` / ``"KEY `name`"`` / ``"UNIQUE KEY `name`"``... → its column list.
        constraints: Constraint name (suffix removed) → definition.
        options: Table options (``ENGINE``, ``CHARSET``, ``COLLATE``, ``ROW_FORMAT``...).
        text: The statement as read.
    """

    columns: tuple[tuple[str, str], ...]
    indexes: Mapping[str, str]
    constraints: Mapping[str, str]
    options: Mapping[str, str]
    text: str = field(default="", compare=False)

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.columns)


@dataclass(frozen=True, slots=True)
class SchemaDifference:
    """One way a physical table differs from the reference.

    Attributes:
        table: The differing table (``"ds_5.t_order_5_1"``).
        reference: The table it was compared with.
        aspect: What differs (``"column 'amount'"``, ``"index KEY `by_user`"``,
            ``"table option COLLATE"``, ``"column order"``).
        expected: The reference's value (``"(missing)"`` when it has none).
        found: This table's value (``"(missing)"`` when it has none).
    """

    table: str
    reference: str
    aspect: str
    expected: str
    found: str

    def __str__(self) -> str:
        return f"{self.table}: {self.aspect}: {self.found} (in {self.reference}: {self.expected})"


@dataclass(frozen=True, slots=True)
class PhysicalTable:
    """One physical table of a logic table."""

    data_source: str
    table: str

    def __str__(self) -> str:
        return f"{self.data_source}.{self.table}"


@dataclass(frozen=True, slots=True)
class SchemaReport:
    """The outcome of :func:`check_table`.

    Attributes:
        table: The logic table.
        reference: The table every other was compared with.
        checked: Every physical table read.
        missing: Physical tables that do not exist.
        differences: Every difference found.
    """

    table: str
    reference: PhysicalTable | None
    checked: tuple[PhysicalTable, ...]
    missing: tuple[PhysicalTable, ...]
    differences: tuple[SchemaDifference, ...]

    @property
    def consistent(self) -> bool:
        return not self.differences and not self.missing

    def lines(self) -> list[str]:
        out = [f"{m}: does not exist" for m in self.missing]
        out += [str(d) for d in self.differences]
        return out

    def to_json(self) -> dict[str, object]:
        return {
            "table": self.table,
            "reference": str(self.reference) if self.reference else None,
            "missing": [str(m) for m in self.missing],
            "differences": [
                {"table": d.table, "aspect": d.aspect, "expected": d.expected, "found": d.found}
                for d in self.differences
            ],
        }

    def raise_if_inconsistent(self) -> None:
        """Raise :class:`~ddm_core.errors.SchemaMismatchError` listing every difference."""
        if self.consistent:
            return
        problems = self.lines()
        raise SchemaMismatchError(
            f"the physical tables of {self.table!r} differ ({len(problems)} "
            f"difference{'s' if len(problems) != 1 else ''}, compared with {self.reference}):\n"
            + "\n".join(f"  - {p}" for p in problems),
            table=self.table,
            differences=self.differences,
            missing=self.missing,
        )


# -- parsing ----------------------------------------------------------------------------------


def _unquote(name: str) -> str:
    return name[1:-1].replace("``", "`") if name.startswith("`") else name


def _norm(text: str) -> str:
    return _INT_WIDTH.sub(r"\1", _SPACES.sub(" ", text.strip()))


def _strip_suffix(text: str, suffix: str) -> str:
    """Drop a node suffix (``_1_0``) from every quoted identifier ending with it."""
    if not suffix:
        return text
    return re.sub(r"`((?:[^`]|``)+?)" + re.escape(suffix) + "`", r"`\1`", text)


def parse_create_table(text: str, *, logic_table: str | None = None) -> TableSchema:
    """A ``SHOW CREATE TABLE`` statement → :class:`TableSchema`.

    Args:
        text: The statement as MySQL / MariaDB writes it (one definition per line).
        logic_table: The logic table it is a physical table of: the physical name's
            suffix after it (``t_order_1_0`` → ``_1_0``) is removed from
            constraint names and referenced tables.

    Raises:
        ValueError: ``text`` is not a ``CREATE TABLE`` statement.
    """
    header = _HEADER.match(text)
    end = text.rfind(")")
    if header is None or end < header.end():
        raise ValueError(f"not a CREATE TABLE statement: {text[:80]!r}")
    physical = _unquote(header.group(1))
    suffix = ""
    if logic_table and physical.lower().startswith(logic_table.lower()) and len(physical) > len(logic_table):
        suffix = physical[len(logic_table):]
    columns: list[tuple[str, str]] = []
    indexes: dict[str, str] = {}
    constraints: dict[str, str] = {}
    for raw in text[header.end() : end].split("\n"):
        line = raw.strip().rstrip(",").strip()
        if not line:
            continue
        if line.startswith("`"):
            m = re.match(_IDENT, line)
            assert m is not None
            columns.append((_unquote(m.group(0)), _norm(line[m.end():])))
        elif line.upper().startswith("CONSTRAINT"):
            m = re.match(r"CONSTRAINT\s+(" + _IDENT + r")\s*(.*)", line, re.IGNORECASE | re.DOTALL)
            if m is None:
                constraints[line] = line
                continue
            name = _unquote(m.group(1))
            if name.lower().endswith("_" + physical.lower()):  # ddm-core's "<name>_<physical table>"
                name = name[: -len(physical) - 1]
            elif suffix and name.endswith(suffix):
                name = name[: -len(suffix)]
            constraints[name] = _norm(_strip_suffix(m.group(2), suffix))
        else:
            m = re.match(r"((?:PRIMARY|UNIQUE|FULLTEXT|SPATIAL|FOREIGN)?\s*KEY(?:\s+" + _IDENT + r")?)\s*(.*)",
                         line, re.IGNORECASE | re.DOTALL)
            key, rest = (m.group(1), m.group(2)) if m else (line, "")
            indexes[_norm(key)] = _norm(_strip_suffix(rest, suffix))
    options: dict[str, str] = {}
    for name, value in _OPTION.findall(text[end + 1 :]):
        key = _OPTION_NAMES.get(name.upper(), name.upper())
        if key not in _IGNORED_OPTIONS:
            options[key] = value
    return TableSchema(tuple(columns), indexes, constraints, options, text)


# -- comparing --------------------------------------------------------------------------------


_MISSING = "(missing)"


def compare_schemas(reference_name: str, reference: TableSchema, name: str, other: TableSchema) -> list[SchemaDifference]:
    """Every difference of ``other`` (called ``name``) from ``reference``."""
    out: list[SchemaDifference] = []

    def diff(aspect: str, expected: str | None, found: str | None) -> None:
        if expected != found:
            out.append(SchemaDifference(name, reference_name, aspect, expected or _MISSING, found or _MISSING))

    ref_cols, other_cols = dict(reference.columns), dict(other.columns)
    for col in dict.fromkeys([*ref_cols, *other_cols]):
        diff(f"column {col!r}", ref_cols.get(col), other_cols.get(col))
    shared = [c for c in reference.column_names if c in other_cols]
    if shared != [c for c in other.column_names if c in ref_cols]:
        diff("column order", ", ".join(shared), ", ".join(c for c in other.column_names if c in ref_cols))
    for key in dict.fromkeys([*reference.indexes, *other.indexes]):
        diff(f"index {key}", reference.indexes.get(key), other.indexes.get(key))
    for key in dict.fromkeys([*reference.constraints, *other.constraints]):
        diff(f"constraint {key!r}", reference.constraints.get(key), other.constraints.get(key))
    for key in dict.fromkeys([*reference.options, *other.options]):
        diff(f"table option {key}", reference.options.get(key), other.options.get(key))
    return out


# -- reading --------------------------------------------------------------------------------------


def physical_tables(table: str, configs: Sequence[ShardingConfig]) -> list[PhysicalTable]:
    """Every physical table of logic table ``table`` in any of ``configs`` (first seen order, no repeats).

    A sharded table has its data nodes; a broadcast table one copy per data
    source; a single table its one.
    """
    out: dict[PhysicalTable, None] = {}
    for config in configs:
        sharded = config.table(table)
        if sharded is not None:
            for node in sharded.data_nodes:
                out[PhysicalTable(node.data_source, node.table)] = None
        elif any(b.lower() == table.lower() for b in config.broadcast_tables):
            for ds in config.data_sources:
                out[PhysicalTable(ds, table)] = None
        else:
            for name, single in config.single_tables.items():
                if name.lower() == table.lower():
                    out[PhysicalTable(single.data_source, single.name)] = None
    return list(out)


def read_schemas(
    conns: Connections, tables: Iterable[PhysicalTable], *, logic_table: str
) -> tuple[dict[PhysicalTable, TableSchema], list[PhysicalTable]]:
    """The parsed schema of each existing table, and the tables that do not exist."""
    found: dict[PhysicalTable, TableSchema] = {}
    missing: list[PhysicalTable] = []
    for t in tables:
        if not table_exists(conns, t.data_source, t.table):
            missing.append(t)
            continue
        found[t] = parse_create_table(show_create_table(conns, t.data_source, t.table), logic_table=logic_table)
    return found, missing


def check_table(conns: Connections, table: str, configs: Sequence[ShardingConfig]) -> SchemaReport:
    """Read every physical table of ``table`` in ``configs`` and compare each with the first that exists.

    Args:
        conns: Connections reaching every data source of ``configs``.
        table: The logic table.
        configs: The configurations whose physical tables count (a migration's old and new).
    """
    every = physical_tables(table, configs)
    schemas, missing = read_schemas(conns, every, logic_table=table)
    if not schemas:
        return SchemaReport(table, None, (), tuple(missing), ())
    reference, ref_schema = next(iter(schemas.items()))
    differences: list[SchemaDifference] = []
    for t, schema in schemas.items():
        if t != reference:
            differences.extend(compare_schemas(str(reference), ref_schema, str(t), schema))
    return SchemaReport(table, reference, tuple(schemas), tuple(missing), tuple(differences))
