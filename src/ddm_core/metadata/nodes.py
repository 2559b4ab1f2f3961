"""Data-node lists: inline expressions (``ds${0..1}.t_order_${0..15}``) → :class:`DataNode`.

Text with a placeholder (``${...}`` or ShardingSphere's Spring-safe ``$->{...}``)
is expanded by :func:`ddm_core.algorithms.inline_expr.expand`, which also
splits top-level commas; plain text is split at commas here.
"""

from __future__ import annotations

from typing import Any

from ddm_core.algorithms.inline_expr import expand
from ddm_core.errors import ConfigError
from ddm_core.metadata.limits import MAX_CONFIG_NAMES
from ddm_core.metadata.model import DataNode
from ddm_core.metadata.problems import Problems, join_path

__all__ = ["NameBudget", "has_placeholder", "name_problem", "expand_names", "expand_nodes"]

#: What a data-source or table name cannot hold: nodes are written `source.table`,
#: lists split at commas, `${` starts an inline expression.
_NAME_BREAKERS = (".", ",", "${", "$->{")


class NameBudget:
    """How many more names expressions and lists may give in this load (``MAX_CONFIG_NAMES`` in all).

    Each expansion is charged as it happens, refused ones too, so a file with
    thousands of oversized expressions still costs a bounded amount of work;
    once the budget is spent nothing more is expanded.
    """

    def __init__(self, total: int = MAX_CONFIG_NAMES) -> None:
        self.total = total
        self.left = total

    @property
    def spent(self) -> bool:
        """The budget is overdrawn (and that was reported)."""
        return self.left < 0

    def charge(self, count: int, path: str, problems: Problems) -> bool:
        """Take ``count`` names; ``False`` (reported the first time) when that overdraws the budget."""
        was_spent = self.spent
        self.left -= count
        if self.spent and not was_spent:
            problems.add(
                path,
                f"the configuration lists more than {self.total} physical tables and data-source names in "
                "all; this is where the count passed the limit",
                None,
            )
        return not self.spent


def has_placeholder(text: str) -> bool:
    return "${" in text or "$->{" in text


def name_problem(name: str, what: str) -> str | None:
    """Why ``name`` cannot be a data-source or table name (``None`` when it can).

    Such a name could not be written as a data node (``source.table``) and read
    back the same.
    """
    if not name or name != name.strip():
        return f"{what} {name!r} is empty or starts or ends with blanks"
    for bad in _NAME_BREAKERS:
        if bad in name:
            return f"{what} {name!r} contains {bad!r}, which a data node (source.table) cannot hold"
    return None


def _expand_text(text: str) -> list[str]:
    if not has_placeholder(text):
        return [p.strip() for p in text.split(",") if p.strip()]
    return list(expand(text))


def _expand_located(
    value: Any, problems: Problems, path: str, budget: NameBudget, limit: int, what: str
) -> list[tuple[str, str]]:
    items: list[tuple[str, str]]
    if isinstance(value, str):
        items = [(path, value)]
    elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        items = [(join_path(path, i), v) for i, v in enumerate(value)]
    else:
        problems.add(path, f"must be a string or a list of strings, not {value!r}", value)
        return []
    out: list[tuple[str, str]] = []
    for item_path, text in items:
        if budget.spent:
            return []
        try:
            names = _expand_text(text)
        except ConfigError as exc:
            problems.add(item_path, f"cannot expand {text!r}: {exc.message}", text)
            continue
        if not budget.charge(len(names), item_path, problems):
            return []
        out.extend((item_path, name) for name in names)
        if len(out) > limit:
            problems.add(path, f"lists more than {limit} {what} (the limit for one logic table)", len(out))
            return []
    return out


def expand_names(
    value: Any, problems: Problems, path: str, *, budget: NameBudget, limit: int, what: str = "names"
) -> list[str]:
    """Expand a string (inline expression / comma list) or a list of them into names.

    Problems (wrong type, malformed expression, more than ``limit`` names, the
    load's budget spent) are added to ``problems``; the names that could be
    expanded are returned (none when there are too many).
    """
    return [name for _, name in _expand_located(value, problems, path, budget, limit, what)]


def expand_nodes(
    value: Any, problems: Problems, path: str, *, budget: NameBudget, limit: int
) -> list[DataNode]:
    """Expand ``actualDataNodes``-style text into nodes; each must be ``source.table``.

    Also ``{roundRobin: [ds0, ds1], tables: "t_${0..99}"}``: table ``i`` on data source
    ``i % len(roundRobin)`` — how an auto table spreads its tables, and how
    ``dump_native`` writes a long one (a list of 65 536 nodes would not fit a document).
    """
    if isinstance(value, dict) and set(value) == {"roundRobin", "tables"}:
        return _round_robin(value, problems, path, budget, limit)
    nodes: list[DataNode] = []
    for item_path, name in _expand_located(value, problems, path, budget, limit, "physical tables"):
        ds, dot, table = name.partition(".")
        if not dot or not ds.strip() or not table.strip() or "." in table:
            problems.add(
                item_path,
                f"data node {name!r} must be written data_source.table (exactly one dot)",
                name,
            )
            continue
        nodes.append(DataNode(ds.strip(), table.strip()))
    return nodes


def _round_robin(value: dict[str, Any], problems: Problems, path: str, budget: NameBudget, limit: int
                 ) -> list[DataNode]:
    sources = value["roundRobin"]
    spath = join_path(path, "roundRobin")
    if not isinstance(sources, list) or not sources or not all(isinstance(s, str) and s.strip() for s in sources):
        problems.add(spath, f"must be a list of data source names, not {sources!r}", sources)
        return []
    tables = expand_names(value["tables"], problems, join_path(path, "tables"), budget=budget, limit=limit,
                          what="physical tables")
    for name in tables:
        why = name_problem(name, "physical table name")
        if why is not None:
            problems.add(join_path(path, "tables"), why, name)
            return []
    return [DataNode(sources[i % len(sources)].strip(), t) for i, t in enumerate(tables)]
