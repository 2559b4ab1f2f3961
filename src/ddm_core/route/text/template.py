"""Rewrite templates: SQL text with slots for physical tables and parameters.

A template is built once per SQL text and filled on every route with plain
``str.format`` (well under a microsecond), which is what keeps a cached
``route()`` away from sqlglot. Two ways to build one:

* :func:`from_edits` — ShardingSphere-style token rewriting of the caller's own
  text: table identifiers (their spans come from sqlglot's identifier
  metadata) and placeholders are cut out and replaced by slots, everything
  else is kept byte for byte. Used whenever the SQL itself needs no change.
* :func:`from_tree` — regenerate SQL from a rewritten sqlglot tree (derived
  columns, AVG split, new LIMIT...) whose tables were renamed to markers.

Object names that must differ per physical table (constraint names in DDL,
``fk_user`` → ``fk_user_t_order_0``) are name slots: the template keeps the
name and the table slot whose physical name suffixes it.

Parameters: the text fed to sqlglot uses ``:pN`` placeholders (N = the
parameter's position in the caller's text); a template records, for each slot
in its own text order, which N it needs, so every unit gets exactly its
params in order.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from typing import Any, NamedTuple, Sequence

from sqlglot import exp

from ddm_core._text import BACKTICKED, BLOCK_COMMENT, DOUBLE_QUOTED, SINGLE_QUOTED
from ddm_core.dialects import INPUT

__all__ = [
    "Template", "Edit", "NameSlot", "from_edits", "from_tree", "table_marker", "suffixed_name", "QUOTED_OR_PARAM",
]  # fmt: skip

#: Quoted strings, quoted identifiers and comments (skipped) or a ``:pN`` placeholder / table marker.
QUOTED_OR_PARAM = re.compile(
    rf"{SINGLE_QUOTED}|{DOUBLE_QUOTED}|{BACKTICKED}"
    rf"|--(?=[\s\x00-\x1f]|\Z)[^\n]*|#[^\n]*|{BLOCK_COMMENT}"
    r"|:p(?P<param>\d+)\b"
    r"|__ddm_t(?P<table>\d+)__",
    re.S,
)


def table_marker(slot: int) -> str:
    """The identifier a logic table is renamed to in a tree before regeneration."""
    return f"__ddm_t{slot}__"


_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*\Z")


def suffixed_name(name: str, physical_table: str) -> str:
    """``name`` made unique per physical table: ``name_<physical table>`` (ShardingSphere's form)."""
    return f"{name}_{physical_table}"


def _unquoted(physical: str) -> str:
    """A physical table name as it is, without the backticks SQL text may need around it."""
    if physical[:1] == "`":
        return physical[1:-1].replace("``", "`")
    return physical


_FORMATTER = string.Formatter()


@dataclass(frozen=True, slots=True)
class Edit:
    """Replace ``text[start:end]`` by a table slot, a parameter slot, a name slot or new text.

    A name slot (``name`` with ``table``): the identifier ``name`` suffixed
    with the physical name of table slot ``table`` (:func:`suffixed_name`),
    backticked when ``quoted`` or when it needs to be.
    """

    start: int
    end: int
    table: int | None = None  # slot number of the logic table
    param: int | None = None  # N of :pN
    text: str | None = None
    name: str | None = None
    quoted: bool = False


class NameSlot(NamedTuple):
    """An identifier suffixed per physical table: field ``n<k>`` of a template's ``fmt``."""

    table: int  # the table slot whose physical name is the suffix
    name: str  # the name as written, unquoted
    quoted: bool  # written in backticks
    percent: bool = False  # "format" paramstyle: a literal % is written %%

    def render(self, physical: str) -> str:
        full = suffixed_name(self.name, _unquoted(physical))
        if self.quoted or not _PLAIN_NAME.match(full):
            full = "`" + full.replace("`", "``") + "`"
        return full.replace("%", "%%") if self.percent else full


class Template:
    """SQL with ``{k}`` table fields and paramstyle placeholders.

    Attributes:
        fmt: ``str.format`` pattern; field ``k`` is the physical name of table slot ``k``,
            field ``n<j>`` the name of :attr:`names` ``[j]`` (filled by :meth:`fill` only).
        params: For each placeholder in text order, the caller's parameter index.
        names: Name slots (per-physical-table object names), usually none.
    """

    __slots__ = ("fmt", "params", "names", "identity", "constant")

    def __init__(self, fmt: str, params: tuple[int, ...], names: tuple[NameSlot, ...] = ()) -> None:
        self.fmt = fmt
        self.params = params
        self.names = names
        # Every parameter once, in the caller's order: the common case needs no reordering.
        #: The unit's params are the bound ones in order (params_of is then ``tuple(bound)``).
        self.identity = params == tuple(range(len(params)))
        #: ``(text, first, end)`` when the SQL names no table and its params are ``bound[first:end]``
        #: in order (a VALUES row): what :meth:`fill` returns, without formatting (bulk INSERT rows).
        self.constant: tuple[str, int, int] | None = None
        if not names and all(field is None for _, field, _, _ in _FORMATTER.parse(fmt)):
            first = params[0] if params else 0
            if params == tuple(range(first, first + len(params))):
                self.constant = (fmt.format(), first, first + len(params))

    def fill(self, physical: Sequence[str], bound: Sequence[Any]) -> tuple[str, tuple[Any, ...]]:
        """The unit's SQL and params for these physical table names."""
        return self.text(physical), self.params_of(bound)

    def text(self, physical: Sequence[str]) -> str:
        """The unit's SQL for these physical table names (the same for every call)."""
        if self.names:
            named = {f"n{j}": slot.render(physical[slot.table]) for j, slot in enumerate(self.names)}
            return self.fmt.format(*physical, **named)
        return self.fmt.format(*physical)

    def params_of(self, bound: Sequence[Any]) -> tuple[Any, ...]:
        """The unit's params (the same for every node)."""
        if self.identity and len(bound) == len(self.params):
            return tuple(bound)
        return tuple([bound[i] for i in self.params])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Template) and (self.fmt, self.params, self.names) == (
            other.fmt,
            other.params,
            other.names,
        )

    def __hash__(self) -> int:
        return hash((self.fmt, self.params, self.names))

    def __repr__(self) -> str:
        names = f", {self.names!r}" if self.names else ""
        return f"Template({self.fmt!r}, {self.params!r}{names})"


def _escape(text: str, style: str) -> str:
    text = text.replace("{", "{{").replace("}", "}}")
    # pymysql interpolates with %, so a literal % must be doubled in "format" style.
    return text.replace("%", "%%") if style == "format" else text


def _slot(style: str) -> str:
    return "%s" if style == "format" else "?"


def from_edits(sql: str, edits: Sequence[Edit], style: str) -> Template:
    """Build a template by cutting ``edits`` (non-overlapping) out of ``sql``."""
    out: list[str] = []
    params: list[int] = []
    names: list[NameSlot] = []
    pos = 0
    for edit in sorted(edits, key=lambda e: e.start):
        out.append(_escape(sql[pos : edit.start], style))
        if edit.name is not None and edit.table is not None:
            out.append("{n%d}" % len(names))
            names.append(NameSlot(edit.table, edit.name, edit.quoted, style == "format"))
        elif edit.table is not None:
            out.append("{%d}" % edit.table)
        elif edit.param is not None:
            out.append(_slot(style))
            params.append(edit.param)
        else:
            out.append(_escape(edit.text or "", style))
        pos = edit.end
    out.append(_escape(sql[pos:], style))
    return Template("".join(out), tuple(params), tuple(names))


def from_tree(tree: exp.Expression, style: str, dialect: str = INPUT) -> Template:
    """Regenerate ``tree`` (tables renamed with :func:`table_marker`) into a template."""
    return from_generated(tree.sql(dialect=dialect), style)


def from_generated(sql: str, style: str) -> Template:
    """A template from generated SQL holding ``:pN`` placeholders and table markers."""
    edits = []
    for m in QUOTED_OR_PARAM.finditer(sql):
        if m.group("param") is not None:
            edits.append(Edit(m.start(), m.end(), param=int(m.group("param"))))
        elif m.group("table") is not None:
            edits.append(Edit(m.start(), m.end(), table=int(m.group("table"))))
    return from_edits(sql, edits, style)
