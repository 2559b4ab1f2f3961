"""Data masking of result sets, for proxy users without ``unmask`` (docs/proxy.md#masking).

Rules name a column of a logic table (or of any table). Which result columns
carry one is decided from the statement's projection (:func:`projection_masks`,
parsed once per statement text and cached with it): a masked column keeps its
mask under an alias (``SELECT phone AS p``), through a derived table or CTE
(``SELECT p FROM (SELECT phone AS p ...) d``) and in every branch of a UNION;
an expression over one (``CONCAT(phone, '')``, ``SUBSTR(phone, 1, 8)``,
``MAX(phone)``) is masked whole (``****``), since a part of the value could
otherwise show digits the mask hides; ``COUNT(phone)`` is not masked (a count
shows no value). ``*`` and ``t.*`` are matched by result column name; a
projection mixing a star with a masked column elsewhere is refused, since the
positions of its items are unknown without the table's columns. A masked
column is sent as a string column, whatever its type, since ``138****1234``
is no longer a number.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

import sqlglot
from sqlglot import exp

from ddm_core.dialects import INPUT
from ddm_core.errors import UnsupportedSQLError
from ddm_core.metadata.model import MaskRule
from ddm_core.route.compile import quote_statement

__all__ = ["mask_value", "Masker", "MASKS", "MaskPlan", "projection_masks", "refuse_masked", "projection_names"]


def _phone(text: str) -> str:
    if len(text) < 7:
        return "*" * len(text)
    return text[:3] + "*" * (len(text) - 7) + text[-4:]


def _email(text: str) -> str:
    local, at, domain = text.partition("@")
    if not at or not local:
        return "****"
    return local[0] + "***@" + domain


def _full(text: str) -> str:
    return "****"


MASKS: dict[str, Callable[[str], str]] = {"phone": _phone, "email": _email, "full": _full}


def mask_value(kind: str, value: Any) -> Any:
    """``value`` masked as ``kind`` (NULL stays NULL; bytes are read as UTF-8)."""
    if value is None:
        return None
    text = value.decode("utf-8", "replace") if isinstance(value, (bytes, bytearray)) else str(value)
    return MASKS[kind](text)


class Masker:
    """Which columns of a result to mask, from the rules of the configuration."""

    def __init__(self, rules: Sequence[MaskRule]) -> None:
        self._rules = [(r.column.lower(), r.table.lower() if r.table else None, r.mask) for r in rules]

    @property
    def active(self) -> bool:
        return bool(self._rules)

    @property
    def rules(self) -> Sequence[tuple[str, str | None, str]]:
        """``(column, table or None, kind)``, names in lower case."""
        return self._rules

    def columns(self, names: Sequence[str], tables: Iterable[str]) -> dict[int, str]:
        """Column index → mask kind, for a result with ``names`` from a statement on ``tables``."""
        if not self._rules:
            return {}
        on = {t.lower() for t in tables}
        found: dict[int, str] = {}
        for i, name in enumerate(names):
            lowered = name.lower()
            for column, table, kind in self._rules:
                if column == lowered and (table is None or table in on):
                    found[i] = kind
                    break
        return found

    @staticmethod
    def apply(rows: list[tuple[Any, ...]], masked: dict[int, str]) -> list[tuple[Any, ...]]:
        """``rows`` with the ``masked`` columns masked."""
        if not masked:
            return rows
        return [tuple(mask_value(masked[i], v) if i in masked else v for i, v in enumerate(row)) for row in rows]


#: The mask of an expression over a masked column: the whole value hidden.
WHOLE = "full"


@dataclass(frozen=True, slots=True)
class MaskPlan:
    """Which result columns of one statement are masked (from its projection).

    Attributes:
        positions: Result column index → mask kind.
        by_name: Result column name (lower case) → mask kind, for the columns a ``*`` brings.
        refusal: Why the statement is refused for users without ``unmask`` (``None``: it is not).
    """

    positions: Mapping[int, str] = field(default_factory=dict)
    by_name: Mapping[str, str] = field(default_factory=dict)
    refusal: str | None = None

    def columns(self, names: Sequence[str]) -> dict[int, str]:
        """Result column index → mask kind, for a result with ``names``."""
        found = dict(self.positions)
        if self.by_name:
            for i, name in enumerate(names):
                kind = self.by_name.get(name.lower())
                if kind is not None:
                    found.setdefault(i, kind)
        return found


class _Refused(Exception):
    """A projection the masker cannot analyse safely: the statement is refused for masked users."""


def _arg(node: exp.Expression, name: str) -> Any:
    # sqlglot 26+ names some arguments with a trailing underscore (from_, with_)
    value = node.args.get(name + "_")
    return node.args.get(name) if value is None else value


class _Analysis:
    """Masked output columns of SELECTs, recursively (derived tables, CTEs, UNION branches)."""

    def __init__(self, rules: Sequence[tuple[str, str | None, str]]) -> None:
        self.rules = rules

    def table_masks(self, table: str) -> dict[str, str]:
        low = table.lower()
        out: dict[str, str] = {}
        for column, rule_table, kind in self.rules:
            if rule_table is None or rule_table == low:
                out.setdefault(column, kind)
        return out

    def query(self, node: Any, ctes: Mapping[str, dict[str, str] | None]) -> tuple[list[str | None], dict[str, str], list[str]] | None:
        """``(kind per projection item, by-name masks of its stars, output names)``; ``None``: not a query."""
        if isinstance(node, exp.Subquery):
            return self.query(node.this, ctes)
        if isinstance(node, exp.SetOperation):
            left, right = self.query(node.left, ctes), self.query(node.right, ctes)
            if left is None or right is None:
                return None
            if (left[1] or right[1]) and (len(left[0]) != len(right[0]) or any(left[0]) or any(right[0])):
                raise _Refused("a UNION branch selects * next to a masked column")
            merged = [a if a == b else (a or b if not (a and b) else WHOLE) for a, b in zip(left[0], right[0])]
            return merged, {**right[1], **left[1]}, left[2]
        if not isinstance(node, exp.Select):
            return None
        ctes = dict(ctes)
        with_ = _arg(node, "with")
        if with_ is not None:
            for cte in with_.expressions:
                inner = self.query(cte.this, ctes)
                ctes[cte.alias.lower()] = None if inner is None else _outputs(inner)
        sources: dict[str, dict[str, str]] = {}
        from_ = _arg(node, "from")
        for item in ([from_.this] if from_ is not None else []) + [j.this for j in node.args.get("joins") or []]:
            sources[item.alias_or_name.lower()] = self.source(item, ctes)
        kinds: list[str | None] = []
        stars: dict[str, str] = {}
        names: list[str] = []
        starred = False
        for item in node.expressions:
            if item.is_star:
                starred = True
                qualifier = item.table.lower() if isinstance(item, exp.Column) and item.table else None
                for name, masks in sources.items():
                    if qualifier is None or qualifier == name:
                        stars.update(masks)
                kinds.append(None)
                names.append("*")
                continue
            kinds.append(self.item(item, sources, ctes))
            names.append(item.alias_or_name)
        if starred and any(kinds):
            raise _Refused("the projection selects * next to a masked column")
        return kinds, stars, names

    def source(self, item: exp.Expression, ctes: Mapping[str, dict[str, str] | None]) -> dict[str, str]:
        """Masked columns (name → kind) of one FROM / JOIN item."""
        if isinstance(item, exp.Table):
            name = item.name.lower()
            if not item.db and name in ctes:
                masks = ctes[name]
                if masks is None:
                    raise _Refused(f"the CTE {item.name!r} cannot be analysed")
                return masks
            return self.table_masks(item.name)
        inner = self.query(item, ctes)
        if inner is None:  # a table function, VALUES, ...: every masked column name counts
            return {column: kind for column, _, kind in self.rules}
        return _outputs(inner)

    def item(self, item: exp.Expression, sources: Mapping[str, dict[str, str]], ctes: Mapping[str, dict[str, str] | None]) -> str | None:
        """The mask of one projection item: its column's, ``full`` for an expression over a masked column."""
        bare = item.this if isinstance(item, exp.Alias) else item
        if isinstance(bare, exp.Column):
            return self.column(bare, sources)
        for node in bare.walk():
            if isinstance(node, exp.Count):
                continue
            if isinstance(node, exp.Column) and not _under_count(node, bare) and self.column(node, sources):
                return WHOLE
            if isinstance(node, (exp.Subquery, exp.Select)) and node is not bare:
                inner = self.query(node, ctes)
                if inner is not None and (any(inner[0]) or inner[1]):
                    return WHOLE
        return None

    @staticmethod
    def column(column: exp.Column, sources: Mapping[str, dict[str, str]]) -> str | None:
        name = column.name.lower()
        qualifier = column.table.lower() if column.table else None
        if qualifier is not None and qualifier in sources:
            return sources[qualifier].get(name)
        for masks in sources.values():  # unqualified (or unknown qualifier): masked if any source masks it
            if name in masks:
                return masks[name]
        return None


def _under_count(node: exp.Expression, top: exp.Expression) -> bool:
    parent = node.parent
    while parent is not None and parent is not top.parent:
        if isinstance(parent, exp.Count):
            return True
        parent = parent.parent
    return False


def _outputs(analysed: tuple[list[str | None], dict[str, str], list[str]]) -> dict[str, str]:
    kinds, stars, names = analysed
    out = dict(stars)
    for kind, name in zip(kinds, names):
        if kind is not None:
            out[name.lower()] = kind
    return out


def projection_masks(masker: Masker, sql: str, tables: Iterable[str]) -> MaskPlan:
    """The :class:`MaskPlan` of ``sql`` (``?`` placeholders), parsed once by the caller's cache.

    A statement that is not a query, or that sqlglot cannot read, is matched by result
    column names against the rules of ``tables`` (the plan's logic tables), as a ``*`` is.
    """
    analysis = _Analysis(masker.rules)
    try:
        tree = sqlglot.parse_one(sql, read=INPUT)
        analysed = analysis.query(tree, {})
    except _Refused as why:
        return MaskPlan(refusal=str(why))
    except sqlglot.errors.SqlglotError:
        analysed = None
    if analysed is None:
        by_name: dict[str, str] = {}
        for table in tables:
            by_name.update(analysis.table_masks(table))
        for column, rule_table, kind in masker.rules:
            if rule_table is None:
                by_name.setdefault(column, kind)
        return MaskPlan(by_name=by_name)
    kinds, stars, _ = analysed
    return MaskPlan(positions={i: k for i, k in enumerate(kinds) if k is not None}, by_name=stars)


def refuse_masked(plan: MaskPlan, sql: str) -> None:
    """Raise the refusal of ``plan`` (for users without ``unmask``), naming the statement."""
    if plan.refusal is not None:
        err = UnsupportedSQLError(
            f"ddm: {plan.refusal}, so which result columns hold masked values is unknown; list the columns "
            "instead of * (proxy.masks, docs/proxy.md#masking)", sql=sql,
        )  # fmt: skip
        quote_statement(err, sql)
        raise err


def projection_names(sql: str) -> list[str] | None:
    """The result column names of a SELECT with ``?`` placeholders; ``None`` for a ``*``, a non-query or a parse error."""
    try:
        tree = sqlglot.parse_one(sql, read=INPUT)
    except sqlglot.errors.SqlglotError:
        return None
    while isinstance(tree, (exp.SetOperation, exp.Subquery)):
        tree = tree.left if isinstance(tree, exp.SetOperation) else tree.this
    if not isinstance(tree, exp.Select) or any(item.is_star for item in tree.expressions):
        return None
    return [item.alias_or_name or item.sql(INPUT) for item in tree.expressions]
