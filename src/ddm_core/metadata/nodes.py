"""Data-node lists: inline expressions (``ds${0..1}.t_order_${0..15}``) → :class:`DataNode`.

Text with a placeholder (``${...}`` or ShardingSphere's Spring-safe ``$->{...}``)
is expanded by :func:`ddm_core.algorithms.inline_expr.expand`, which also
splits top-level commas; plain text is split at commas here.
"""

from __future__ import annotations

from typing import Any

from ddm_core.algorithms.inline_expr import expand
from ddm_core.errors import ConfigError
from ddm_core.metadata.model import DataNode
from ddm_core.metadata.problems import Problems, join_path

__all__ = ["has_placeholder", "expand_names", "expand_nodes"]


def has_placeholder(text: str) -> bool:
    return "${" in text or "$->{" in text


def _expand_text(text: str) -> list[str]:
    if not has_placeholder(text):
        return [p.strip() for p in text.split(",") if p.strip()]
    return list(expand(text))


def _expand_located(value: Any, problems: Problems, path: str) -> list[tuple[str, str]]:
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
        try:
            out.extend((item_path, name) for name in _expand_text(text))
        except ConfigError as exc:
            problems.add(item_path, f"cannot expand {text!r}: {exc.message}", text)
    return out


def expand_names(value: Any, problems: Problems, path: str) -> list[str]:
    """Expand a string (inline expression / comma list) or a list of them into names.

    Problems (wrong type, malformed expression) are added to ``problems``;
    the names that could be expanded are returned.
    """
    return [name for _, name in _expand_located(value, problems, path)]


def expand_nodes(value: Any, problems: Problems, path: str) -> list[DataNode]:
    """Expand ``actualDataNodes``-style text into nodes; each must be ``source.table``."""
    nodes: list[DataNode] = []
    for item_path, name in _expand_located(value, problems, path):
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
