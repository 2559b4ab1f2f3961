"""Safe YAML parsing that keeps ShardingSphere's rule tags and catches duplicate keys.

ShardingSphere marks each rule with a local tag (``- !SHARDING``, ``- !BROADCAST``);
its 4.x files also carry Java class tags (``!!org.apache...BasicDataSource``).
:class:`TaggedLoader` is a :class:`yaml.SafeLoader` that turns any such tag into
a :class:`Tagged` value instead of refusing it, so the ShardingSphere reader can
name unknown rule types in its own error. Nothing is ever instantiated from a tag.

PyYAML silently keeps the last of two equal mapping keys; a second ``t_order:``
would drop the first table without a word. :func:`parse_yaml` walks the node
tree first and reports every duplicate key with its field path.

Published ShardingSphere samples redact passwords as ``password: ***``, which
is not YAML (``*`` starts an alias, and an alias name cannot be
made of asterisks). A value made only of asterisks is therefore read as that
string: the change can only turn an unparsable document into a parsable one.
The data-source readers warn about such a password.

Every parser event passes :class:`~ddm_core.metadata.bounds.EventGuard`
before the composer builds a node from it, so nesting depth, alias expansion,
overlong integers and characters YAML refuses end in a problem naming the
field before anything is built (docs/config-limits.md). libyaml's parser is
used when PyYAML has it (:class:`CTaggedLoader`, a few times faster), the
pure-Python one otherwise (:class:`TaggedLoader`); both compose in Python, so
both are guarded alike.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from yaml.composer import Composer

from ddm_core.metadata.bounds import (
    EventGuard,
    Refused,
    check_size,
    mask_bad_characters,
    report_unplaced,
)
from ddm_core.metadata.limits import MAX_DEPTH
from ddm_core.metadata.problems import Problems, join_path
from ddm_core.metadata.tagged import Tagged

__all__ = ["Tagged", "TaggedLoader", "LOADERS", "DEFAULT_LOADER", "parse_yaml"]


class NodeError(Exception):
    """A scalar the constructor cannot read (``2020-13-45``, ``!!int abc``); names its node (internal)."""

    def __init__(self, node: yaml.Node, message: str) -> None:
        super().__init__(message)
        self.node = node
        self.message = message


class _Guarded:
    """Loader mixin: every event passes the document guard before the composer sees it, and
    a value the constructor fails on raises :class:`NodeError` instead of a bare ``ValueError``."""

    guard: EventGuard | None = None

    def get_event(self) -> yaml.Event:
        event: yaml.Event = super().get_event()  # type: ignore[misc]
        if self.guard is not None:
            self.guard.feed(event)
        return event

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)  # type: ignore[misc]
        except (ValueError, TypeError, KeyError, IndexError, AttributeError, ArithmeticError) as exc:
            # PyYAML's constructors assume their tag fits the text (`!!timestamp x` fails on a None match)
            kind = str(node.tag).rsplit(":", 1)[-1]
            shown = node.value if isinstance(node, yaml.ScalarNode) else "a mapping or list"
            raise NodeError(
                node, f"{shown!r} cannot be read as {kind} ({exc}); quote it if it is text"
            ) from exc


class TaggedLoader(_Guarded, yaml.SafeLoader):
    """The pure-Python loader: SafeLoader mapping ``!local`` and ``!!class`` tags to :class:`Tagged`."""


LOADERS: tuple[type, ...] = (TaggedLoader,)
if getattr(yaml, "__with_libyaml__", False):

    class CTaggedLoader(_Guarded, Composer, yaml.CSafeLoader):
        """The same loader over libyaml's parser: events come from C (a few times faster),
        composing stays in Python so the guard sees every event first."""

        def __init__(self, stream: str) -> None:
            yaml.CSafeLoader.__init__(self, stream)
            Composer.__init__(self)

    LOADERS = (CTaggedLoader, TaggedLoader)

#: The loader :func:`parse_yaml` uses unless told otherwise (libyaml's when installed).
DEFAULT_LOADER: type = LOADERS[0]


def _construct_tagged(loader: Any, suffix: str, node: yaml.Node, *, prefix: str) -> Tagged:
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


for _loader in LOADERS:
    _loader.add_multi_constructor(  # type: ignore[attr-defined]
        "!", lambda loader, suffix, node: _construct_tagged(loader, suffix, node, prefix="!")
    )
    _loader.add_multi_constructor(  # type: ignore[attr-defined]
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


# `[ \t]*`, not `\s*`: a run of blank lines must not be rescanned from every line start
_REDACTED = re.compile(r"^([ \t]*[^\s#][^#\n]*?:[ \t]+)(\*+)([ \t]*(?:#.*)?)$", re.MULTILINE)


def parse_yaml(text: str, problems: Problems, *, loader: type | None = None) -> Any:
    """Parse one YAML document; syntax errors, duplicate keys and exceeded bounds go to ``problems``.

    The document bounds (:mod:`ddm_core.metadata.bounds`) are checked while
    parsing, before anything is built; characters YAML refuses are reported at
    the field holding them.

    Args:
        text: The document.
        problems: Where problems go.
        loader: A class of :data:`LOADERS` (default :data:`DEFAULT_LOADER`).

    Returns:
        The document (``None`` for an empty one, or when it has problems).
    """
    if not check_size(text, problems):
        return None
    text = _REDACTED.sub(lambda m: f"{m.group(1)}'{m.group(2)}'{m.group(3)}", text)
    text, bad = mask_bad_characters(text)
    before = len(problems)
    instance = (loader or DEFAULT_LOADER)(text)
    guard = instance.guard = EventGuard(problems, instance.resolve, bad)
    root: yaml.Node | None = None
    try:
        root = instance.get_single_node()
        if root is not None and len(problems) == before:
            _find_duplicates(root, "", problems, set())
        if root is None or len(problems) > before:
            return None
        return instance.construct_document(root)
    except Refused:
        return None
    except NodeError as exc:
        problems.add(_path_of(root, lambda n: n is exc.node) or _where(exc.node.start_mark), exc.message)
        return None
    except yaml.MarkedYAMLError as exc:
        _report_marked(exc, root, guard, problems)
        return None
    except yaml.YAMLError as exc:
        problems.add("<document>", f"YAML error: {exc}")
        return None
    finally:
        instance.dispose()
        report_unplaced(text, bad, problems)


def _report_marked(exc: yaml.MarkedYAMLError, root: yaml.Node | None, guard: EventGuard, problems: Problems) -> None:
    """A syntax error (no ``root``: name the field the parser was reading) or a construction error."""
    mark = exc.problem_mark or exc.context_mark
    if root is None and "nesting depth" in str(exc.problem):
        # libyaml looks ahead and stops at its own nesting limit before the guard sees the events
        problems.add(guard.current_path() or "<root>", f"is nested more than {MAX_DEPTH} levels deep")
        return
    if root is None:
        inside = guard.current_path()
        what = f"YAML syntax error (while reading {inside})" if inside else "YAML syntax error"
    else:
        what = "YAML error"
    found = _path_of(root, lambda n: n.start_mark.index == mark.index) if mark is not None else None
    problems.add(found or _where(mark), f"{what}: {exc.problem or exc}")


def _where(mark: Any) -> str:
    return f"<line {mark.line + 1}, column {mark.column + 1}>" if mark is not None else "<unknown position>"


def _path_of(root: yaml.Node | None, wanted: Any) -> str | None:
    """Field path of the deepest node of ``root`` that ``wanted(node)`` accepts (``None`` if none)."""
    found: str | None = None
    seen: set[int] = set()
    todo: list[tuple[yaml.Node, str]] = [(root, "")] if root is not None else []
    while todo:
        node, path = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if wanted(node):
            found = path or "<root>"
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in reversed(node.value):
                key = _scalar_key(key_node)
                todo.append((value_node, join_path(path, key if key is not None else "?")))
                todo.append((key_node, join_path(path, key if key is not None else "?")))
        elif isinstance(node, yaml.SequenceNode):
            todo.extend((item, join_path(path, i)) for i, item in reversed(list(enumerate(node.value))))
    return found
