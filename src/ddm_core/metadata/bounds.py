"""Document bounds: size, characters, depth, aliases, values and integer length, checked before building.

A hostile or broken document must end in one clear problem naming the field,
quickly — not in a ``RecursionError``, a codec error, exhausted memory or an
hour of alias expansion. Two checkers apply the same bounds
(:mod:`ddm_core.metadata.limits`):

* :class:`EventGuard` sees a YAML document as its parser emits it, event by
  event, *before* the composer builds nodes from it: nesting depth, alias uses
  (and aliases into their own value), values once aliases are expanded
  (counted from each anchor's size, so a billion-laughs document is refused
  after a few hundred events), integers too long to convert, mapping keys that
  are not plain names, and characters YAML does not allow (replaced beforehand
  by :func:`mask_bad_characters`, then reported at the field that held them).
* :func:`check_object` walks a mapping given directly (``load_config(dict)``):
  the same depth, value, integer and character bounds, shared objects counted
  at each use, cycles refused, its strings together held to the document size.

Both add problems to the load's collector; fatal ones end the walk with
:class:`Refused` (the caller stops there and raises every problem found).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, Callable, Mapping

import yaml

from ddm_core.metadata.limits import (
    MAX_ALIASES,
    MAX_DEPTH,
    MAX_DOCUMENT_BYTES,
    MAX_INT_DIGITS,
    MAX_VALUES,
    show_int,
)
from ddm_core.metadata.problems import Problems, join_path
from ddm_core.metadata.tagged import Tagged

__all__ = [
    "Refused",
    "BadCharacters",
    "mask_bad_characters",
    "check_size",
    "EventGuard",
    "check_object",
    "position_of",
    "report_unplaced",
]

_INT_TAG = "tag:yaml.org,2002:int"
#: What YAML accepts in a document (a byte order mark only at the very start).
_BAD_CHAR = re.compile("[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]")
_LINE_BREAK = re.compile("\r\n|[\n\r\x85\u2028\u2029]")
_REPLACEMENT = "\ufffd"
_PLAIN_SCALARS = (str, int, float, bool, bytes, date)  # datetime is a date
_MAX_CHARACTER_PROBLEMS = 10


class Refused(Exception):
    """A bound was exceeded; the problem is recorded and the walk stops (internal)."""


# -- size and characters ---------------------------------------------------------------------------


def check_size(text: str, problems: Problems) -> bool:
    """Record a problem and return ``False`` when ``text`` is over :data:`MAX_DOCUMENT_BYTES`."""
    # len() bounds the UTF-8 size from below and at a quarter from above: encode only in between
    size = len(text)
    if size * 4 > MAX_DOCUMENT_BYTES:
        size = len(text.encode("utf-8", "surrogatepass")) if size <= MAX_DOCUMENT_BYTES else size
    if size > MAX_DOCUMENT_BYTES:
        problems.add(
            "<document>",
            f"the configuration is {size} bytes or more; the limit is {MAX_DOCUMENT_BYTES} bytes (1 MiB)",
            size,
        )
        return False
    return True


def describe_character(ch: str) -> str:
    """``"a NUL character"``, ``"the invalid UTF-8 byte 0xff"``, ``"the control character U+0007"``..."""
    code = ord(ch)
    if code == 0:
        return "a NUL character"
    if 0xDC80 <= code <= 0xDCFF:  # a byte the UTF-8 decoder could not read (surrogateescape)
        return f"the invalid UTF-8 byte 0x{code - 0xDC00:02x}"
    if 0xD800 <= code <= 0xDFFF:
        return f"the unpaired surrogate U+{code:04X}"
    if code == 0xFEFF:
        return "a byte order mark (U+FEFF) inside the text"
    return f"the control character U+{code:04X}"


@dataclass
class BadCharacters:
    """Characters YAML refuses, found in a text: their offsets and what each was."""

    offsets: list[int] = field(default_factory=list)
    what: list[str] = field(default_factory=list)
    reported: set[int] = field(default_factory=set)

    def within(self, start: int, end: int) -> list[int]:
        """Indices (into ``offsets``) of the bad characters in ``[start, end)``."""
        lo = bisect.bisect_left(self.offsets, start)
        hi = bisect.bisect_left(self.offsets, end)
        return list(range(lo, hi))


def mask_bad_characters(text: str) -> tuple[str, BadCharacters]:
    """``text`` with each character YAML refuses replaced by U+FFFD (same length), and where they were."""
    bad = BadCharacters()
    start = 1 if text.startswith("\ufeff") else 0
    for match in _BAD_CHAR.finditer(text, start):
        bad.offsets.append(match.start())
        bad.what.append(describe_character(match.group()))
    if not bad.offsets:
        return text, bad
    return text[:start] + _BAD_CHAR.sub(_REPLACEMENT, text[start:]), bad


def position_of(text: str, offset: int) -> str:
    """``"<line L, column C>"`` of a character offset, counting line breaks as YAML does."""
    line = 1
    start = 0
    for match in _LINE_BREAK.finditer(text, 0, offset):
        line += 1
        start = match.end()
    return f"<line {line}, column {offset - start + 1}>"


def report_unplaced(text: str, bad: BadCharacters, problems: Problems) -> None:
    """Report refused characters no value held (comments, between tokens, after an error)."""
    unplaced = [i for i in range(len(bad.offsets)) if i not in bad.reported]
    room = max(0, _MAX_CHARACTER_PROBLEMS - len(bad.reported))
    for i in unplaced[:room]:
        problems.add(
            position_of(text, bad.offsets[i]), f"contains {bad.what[i]}, which a configuration cannot hold"
        )
    if len(bad.offsets) > _MAX_CHARACTER_PROBLEMS:
        problems.add(
            "<document>", f"{len(bad.offsets)} characters a configuration cannot hold, in all (the first are listed)"
        )


def _too_long_int(text: str) -> bool:
    return len(text.lstrip("+-").replace("_", "")) > MAX_INT_DIGITS


def _int_problem(digits: int) -> str:
    return (
        f"is a number of {digits} digits; numbers have at most {MAX_INT_DIGITS} digits "
        "(quote the value if it is text)"
    )


# -- YAML events ---------------------------------------------------------------------------------------


@dataclass
class _Frame:
    """One mapping or list being read; ``segment`` is where it sits in its parent (key or index)."""

    segment: str | int
    is_map: bool
    anchor: str | None
    start_count: int
    index: int = 0
    expect_key: bool = True
    key: str = "?"


class EventGuard:
    """Checks a YAML document event by event (see the module docstring).

    Field paths are built only when a problem needs one: the guard sees every
    event of every document, so its common path is a few comparisons.

    Args:
        problems: Where problems go.
        resolve: The loader's tag resolver (``Resolver.resolve``), to tell an
            integer from text the way the constructor will.
        bad: The characters :func:`mask_bad_characters` replaced.
    """

    def __init__(
        self, problems: Problems, resolve: Callable[[Any, str, Any], str], bad: BadCharacters
    ) -> None:
        self.problems = problems
        self.resolve = resolve
        self.bad = bad
        self.stack: list[_Frame] = []
        self.values = 0
        self.aliases = 0
        self.anchor_sizes: dict[str, int] = {}
        self.anchor_keys: dict[str, str | None] = {}  # anchor → its text when it is a scalar
        self.open_anchors: set[str] = set()
        self._dispatch: dict[type, Callable[[Any], None]] = {
            yaml.ScalarEvent: self._scalar,
            yaml.AliasEvent: self._alias,
            yaml.MappingStartEvent: self._start,
            yaml.SequenceStartEvent: self._start,
            yaml.MappingEndEvent: self._end,
            yaml.SequenceEndEvent: self._end,
        }

    def refuse(self, path: str, message: str, value: Any = None) -> None:
        self.problems.add(path or "<root>", message, value)
        raise Refused(message)

    # -- where we are ------------------------------------------------------------------------

    def _collection_path(self) -> str:
        path = ""
        for frame in self.stack[1:]:
            path = join_path(path, frame.segment)
        return path

    def current_path(self) -> str:
        """Field path of the value the next event belongs to (a key's own path when a key is next)."""
        if not self.stack:
            return ""
        top = self.stack[-1]
        base = self._collection_path()
        if not top.is_map:
            return join_path(base, top.index)
        return base if top.expect_key else join_path(base, top.key)

    def _in_key(self) -> bool:
        return bool(self.stack) and self.stack[-1].is_map and self.stack[-1].expect_key

    def _done(self, key_text: str | None) -> None:
        """One value of the innermost collection is complete."""
        if not self.stack:
            return
        top = self.stack[-1]
        if not top.is_map:
            top.index += 1
        elif top.expect_key:
            top.key, top.expect_key = (key_text if key_text is not None else "?"), False
        else:
            top.expect_key = True

    def _count(self, n: int) -> None:
        self.values += n
        if self.values > MAX_VALUES:
            self.refuse(
                self.current_path(),
                f"the document holds more than {MAX_VALUES} values once its aliases are expanded; "
                "a document (or an alias expansion) this large is refused",
            )

    # -- events ---------------------------------------------------------------------------------

    def feed(self, event: yaml.Event) -> None:
        handler = self._dispatch.get(type(event))
        if handler is not None:
            handler(event)

    def _scalar(self, event: yaml.ScalarEvent) -> None:
        self._count(1)
        in_key = self._in_key()
        if self.bad.offsets and event.start_mark is not None and event.end_mark is not None:
            found = self.bad.within(event.start_mark.index, event.end_mark.index)
            if found:
                self._bad_characters(found, event, self._scalar_path(event, in_key))
        if _too_long_int(event.value):
            tag = event.tag
            if tag is None or tag == "!":
                tag = self.resolve(yaml.ScalarNode, event.value, event.implicit)
            if tag == _INT_TAG:
                digits = len(event.value.lstrip("+-").replace("_", ""))
                self.refuse(self._scalar_path(event, in_key), _int_problem(digits))
        if event.anchor is not None:
            self.anchor_sizes[event.anchor] = 1
            self.anchor_keys[event.anchor] = event.value
        self._done(event.value if in_key else None)

    def _scalar_path(self, event: yaml.ScalarEvent, in_key: bool) -> str:
        return join_path(self._collection_path(), event.value) if in_key else self.current_path()

    def _bad_characters(self, found: list[int], event: yaml.ScalarEvent, path: str) -> None:
        for i in found:
            self.bad.reported.add(i)
            if len(self.bad.reported) > _MAX_CHARACTER_PROBLEMS:
                continue  # a binary file: the first few say enough
            line = f" (line {event.start_mark.line + 1})" if event.start_mark is not None else ""
            self.problems.add(
                path or "<root>", f"contains {self.bad.what[i]}, which a configuration cannot hold{line}", None
            )

    def _alias(self, event: yaml.AliasEvent) -> None:
        self.aliases += 1
        anchor = event.anchor or ""
        if self.aliases > MAX_ALIASES:
            self.refuse(self.current_path(), f"the document uses more than {MAX_ALIASES} aliases (*name)")
        if anchor in self.open_anchors:
            self.refuse(self.current_path(), f"alias *{anchor} refers to the value it is part of (a cycle)", anchor)
        in_key = self._in_key()
        if in_key and self.anchor_keys.get(anchor, "") is None:
            self.refuse(
                self.current_path(), f"a mapping key must be a plain name, not the list or mapping *{anchor}", anchor
            )
        self._count(self.anchor_sizes.get(anchor, 1))
        self._done(self.anchor_keys.get(anchor) if in_key else None)

    def _start(self, event: yaml.CollectionStartEvent) -> None:
        if self._in_key():
            self.refuse(self.current_path(), "a mapping key must be a plain name, not a list or mapping")
        if len(self.stack) >= MAX_DEPTH:
            self.refuse(self.current_path(), f"is nested more than {MAX_DEPTH} levels deep")
        self._count(1)
        segment: str | int = ""
        if self.stack:
            parent = self.stack[-1]
            segment = parent.key if parent.is_map else parent.index
        is_map = isinstance(event, yaml.MappingStartEvent)
        self.stack.append(_Frame(segment, is_map, event.anchor, self.values))
        if event.anchor is not None:
            self.open_anchors.add(event.anchor)

    def _end(self, event: yaml.CollectionEndEvent) -> None:
        frame = self.stack.pop()
        if frame.anchor is not None:
            self.open_anchors.discard(frame.anchor)
            self.anchor_sizes[frame.anchor] = self.values - frame.start_count + 1
            self.anchor_keys[frame.anchor] = None
        self._done(None)


# -- mappings given directly ----------------------------------------------------------------------------------


class _ObjectWalk:
    """State of one :func:`check_object` walk."""

    def __init__(self, problems: Problems) -> None:
        self.problems = problems
        self.values = 0
        self.chars = 0
        self.sizes: dict[int, int] = {}  # id of a finished container → its size, for shared objects
        self.open: set[int] = set()

    def refuse(self, path: str, message: str) -> None:
        self.problems.add(path or "<root>", message, None)
        raise Refused(message)

    def count(self, n: int, path: str) -> None:
        self.values += n
        if self.values > MAX_VALUES:
            self.refuse(path, f"the configuration holds more than {MAX_VALUES} values")

    def scalar(self, value: Any, path: str) -> None:
        self.count(1, path)
        if isinstance(value, int) and not isinstance(value, bool):
            if not -(10**MAX_INT_DIGITS) < value < 10**MAX_INT_DIGITS:
                self.refuse(path, f"is {show_int(value)}; numbers have at most {MAX_INT_DIGITS} digits")
        elif isinstance(value, str):
            self.chars += len(value)
            if self.chars > MAX_DOCUMENT_BYTES:
                self.refuse(path, f"the configuration's text is longer than {MAX_DOCUMENT_BYTES} characters")
            match = _BAD_CHAR.search(value)
            if match is not None:
                self.problems.add(
                    path or "<root>", f"contains {describe_character(match.group())}, which a configuration cannot hold"
                )
        elif not isinstance(value, _PLAIN_SCALARS) and value is not None:
            # what no YAML document could hold: it could not be checked, written back or compared
            self.problems.add(
                path or "<root>",
                f"must be text, a number, true/false, null, a list or a mapping, not a {type(value).__name__}",
            )

    def walk(self, value: Any, path: str, depth: int) -> None:
        if isinstance(value, Tagged):
            value = value.value
        if not isinstance(value, (Mapping, list, tuple, set, frozenset)):
            self.scalar(value, path)
            return
        key = id(value)
        if key in self.open:
            self.refuse(path, "refers to a mapping or list it is part of (a cycle)")
        if key in self.sizes:  # shared: counts again at each use, like a YAML alias
            self.count(self.sizes[key], path)
            return
        if depth >= MAX_DEPTH:
            self.refuse(path, f"is nested more than {MAX_DEPTH} levels deep")
        start = self.values
        self.count(1, path)
        self.open.add(key)
        if isinstance(value, Mapping):
            for k, v in value.items():
                self._key(k, path)
                self.walk(v, join_path(path, str(k)), depth + 1)
        else:
            for i, item in enumerate(value):
                self.walk(item, join_path(path, i), depth + 1)
        self.open.discard(key)
        self.sizes[key] = self.values - start

    def _key(self, key: Any, path: str) -> None:
        if isinstance(key, (str, int, float, bool, date, datetime)) or key is None:
            self.scalar(key, join_path(path, str(key)))
        else:
            self.refuse(path, f"a mapping key must be a plain name, not a {type(key).__name__}")


def check_object(doc: Any, problems: Problems) -> None:
    """Check a mapping given directly against the document bounds (problems to ``problems``).

    Raises:
        Refused: a bound that makes further reading unsafe was exceeded (recorded).
    """
    _ObjectWalk(problems).walk(doc, "", 0)
