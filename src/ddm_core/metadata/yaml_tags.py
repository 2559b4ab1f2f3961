"""Safe YAML parsing that keeps ShardingSphere's rule tags and catches duplicate keys.

ShardingSphere marks each rule with a local tag (``- !SHARDING``, ``- !BROADCAST``);
its 4.x files also carry Java class tags (``!!org.apache...BasicDataSource``).
:class:`TaggedLoader` is a :class:`yaml.SafeLoader` that turns any such tag into
a :class:`Tagged` value instead of refusing it, so the ShardingSphere reader can
name unknown rule types in its own error. Nothing is ever instantiated from a tag.

PyYAML silently keeps the last of two equal mapping keys; a second ``t_order:``
would drop the first table without a word. :func:`parse_yaml` walks the node
tree first and reports every duplicate key with its field path.

Published ShardingSphere samples redact passwords as ``password: ***`` (seed
004), which is not YAML (``*`` starts an alias, and an alias name cannot be
made of asterisks). A value made only of asterisks is therefore read as that
string: the change can only turn an unparsable document into a parsable one.
The data-source readers warn about such a password.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml

from ddm_core.metadata.problems import Problems, join_path

__all__ = ["Tagged", "TaggedLoader", "parse_yaml"]


@dataclass(frozen=True, slots=True)
class Tagged:
    """A YAML value carrying a non-standard tag.

    Attributes:
        tag: The tag as written: ``"!SHARDING"``, or ``"!!org.apache...Foo"`` for
            a class tag.
        value: The plain value under the tag (mapping, list, scalar or ``None``).
        line: 1-based line of the tag in the source.
    """

    tag: str
    value: Any
    line: int = 0

    @property
    def name(self) -> str:
        """The tag without its leading ``!``/``!!`` (``"SHARDING"``)."""
        return self.tag.lstrip("!")


class TaggedLoader(yaml.SafeLoader):
    """SafeLoader that maps ``!local`` and ``!!class`` tags to :class:`Tagged`."""


def _construct_tagged(loader: TaggedLoader, suffix: str, node: yaml.Node, *, prefix: str) -> Tagged:
    value: Any
    if isinstance(node, yaml.MappingNode):
        value = loader.construct_mapping(node, deep=True)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    elif isinstance(node, yaml.ScalarNode):
        raw = loader.construct_scalar(node)
        value = None if raw == "" else raw
    else:  # pragma: no cover - composer yields only the three node kinds
        value = None
    return Tagged(prefix + suffix, value, node.start_mark.line + 1)


TaggedLoader.add_multi_constructor(
    "!", lambda loader, suffix, node: _construct_tagged(loader, suffix, node, prefix="!")
)
TaggedLoader.add_multi_constructor(
    "tag:yaml.org,2002:",
    lambda loader, suffix, node: _construct_tagged(loader, suffix, node, prefix="!!"),
)


def _scalar_key(node: yaml.Node) -> str | None:
    return node.value if isinstance(node, yaml.ScalarNode) else None


def _find_duplicates(node: yaml.Node, path: str, problems: Problems, seen_nodes: set[int]) -> None:
    if id(node) in seen_nodes:  # anchors/aliases: visit a shared node once
        return
    seen_nodes.add(id(node))
    if isinstance(node, yaml.MappingNode):
        keys: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = _scalar_key(key_node)
            if key is not None:
                line = key_node.start_mark.line + 1
                if key in keys and key != "<<":
                    problems.add(
                        join_path(path, key),
                        f"duplicate key {key!r} (line {line}; first at line {keys[key]}); "
                        "YAML would silently keep only the last one",
                        key,
                    )
                keys.setdefault(key, line)
            _find_duplicates(
                value_node, join_path(path, key if key is not None else "?"), problems, seen_nodes
            )
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _find_duplicates(item, join_path(path, i), problems, seen_nodes)


_REDACTED = re.compile(r"^(\s*[^\s#][^#\n]*?:[ \t]+)(\*+)([ \t]*(?:#.*)?)$", re.MULTILINE)


def parse_yaml(text: str, problems: Problems) -> Any:
    """Parse one YAML document; syntax errors and duplicate keys go to ``problems``.

    Returns:
        The document (``None`` for an empty one, or when it cannot be parsed).
    """
    text = _REDACTED.sub(lambda m: f"{m.group(1)}'{m.group(2)}'{m.group(3)}", text)
    loader = TaggedLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _find_duplicates(node, "", problems, set())
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown position"
        problems.add(f"<{where}>", f"YAML syntax error: {exc.problem or exc}")
        return None
    except yaml.YAMLError as exc:
        problems.add("<document>", f"YAML error: {exc}")
        return None
    finally:
        loader.dispose()
