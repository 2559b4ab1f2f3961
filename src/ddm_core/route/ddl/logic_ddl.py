"""A physical table's ``SHOW CREATE TABLE`` text and ``SHOW INDEX`` rows as its logic table's.

What a caller of the logic table sees (``SHOW CREATE TABLE t_order`` through the executor or the proxy,
answered by the first physical table) and what a migration creates new physical tables from: the table's
name is the logic one, a constraint's name loses the ``_<physical table>`` suffix the router gave it
(route/ddl/ddl_names.py), and the ``AUTO_INCREMENT=`` counter, one physical table's own, is dropped.
``SHOW INDEX FROM t_order`` answers the same way: the logic table's name, and an index InnoDB named after
a foreign key (the constraint's suffixed name) under the constraint's own name.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

__all__ = ["logic_ddl", "logic_show_create", "logic_show_index"]

_HEADER = re.compile(r"(\s*CREATE\s+TABLE\s+)(`(?:[^`]|``)+`|\S+)", re.IGNORECASE)
_AUTO_INCREMENT = re.compile(r"\s+AUTO_INCREMENT=\d+", re.IGNORECASE)
_REFERENCES = re.compile(r"(\bREFERENCES\s+)`([^`]+)`", re.IGNORECASE)


def logic_ddl(create_table: str, physical: str, logic: str) -> str:
    """``create_table`` (physical table ``physical``'s ``SHOW CREATE TABLE`` text) as logic table ``logic``'s."""
    quoted = logic.replace("`", "``")
    text = _HEADER.sub(lambda m: m.group(1) + f"`{quoted}`", create_table, count=1)
    # Constraint names carry "_<physical table>" (route/ddl/ddl_names.py); the router adds it back per table.
    text = re.sub(r"(CONSTRAINT\s+`(?:[^`]|``)+?)_" + re.escape(physical) + "`", r"\1`", text, flags=re.IGNORECASE)
    return _AUTO_INCREMENT.sub("", text)


def logic_show_create(logic: str, sharded: frozenset[str], row: Sequence[Any]) -> tuple[Any, ...]:
    """A ``SHOW CREATE TABLE`` row of a physical table — (its name, its text, ...) — as the logic table's.

    ``sharded``: the configuration's sharded tables (lower case). A foreign key names the physical table it
    references on the same node; where that is a sharded table's name followed by the shown table's own
    suffix (``t_order_0_1`` beside ``t_order_item_0_1``: tables bound to each other), it names the logic
    table instead."""
    physical, text = _text(row[0]), _text(row[1])
    text = logic_ddl(text, physical, logic)
    suffix = physical[len(logic) :] if physical.lower().startswith(logic.lower()) else ""
    if suffix:

        def referenced(m: re.Match[str]) -> str:
            name = m.group(2)
            base = name[: -len(suffix)] if name.endswith(suffix) else ""
            return m.group(1) + (f"`{base}`" if base.lower() in sharded else m.group(0)[len(m.group(1)) :])

        text = _REFERENCES.sub(referenced, text)
    return (logic, text, *row[2:])


def logic_show_index(logic: str, row: Sequence[Any]) -> tuple[Any, ...]:
    """A ``SHOW INDEX`` row of a physical table — (its name, ``Non_unique``, ``Key_name``, ...) — as the logic
    table's: its name, and a key named ``<constraint>_<physical table>`` (the index InnoDB made for a foreign
    key the router suffixed) under ``<constraint>``."""
    physical, key = _text(row[0]), _text(row[2])
    suffix = "_" + physical
    if key.lower().endswith(suffix.lower()) and len(key) > len(suffix):
        key = key[: -len(suffix)]
    return (logic, row[1], key, *row[3:])


def _text(value: Any) -> str:
    """A SHOW row's name or text, whether the driver read it as text or as bytes."""
    return bytes(value).decode("utf8", "replace") if isinstance(value, (bytes, bytearray)) else str(value)
