"""Routing hints: the per-context override the router reads.

A :class:`Hint` tells the router what the SQL text alone cannot: force a data
source or physical table, supply the value of a ``HINT``-kind strategy, route by
a named strategy with a shard-key value taken from the caller's arguments, or
send reads to the primary. The active hint lives in a :mod:`contextvars`
variable, so it is

* per thread: a thread starts with no hint and never sees another thread's;
* per asyncio task: a task inherits a copy of its creator's context when it is
  created, and what it sets afterwards never reaches its siblings or parent;
* always reset when its scope ends, exceptions included (``Token.reset``), so a
  worker thread reused by a pool never carries one request's shard key into the
  next request (the classic leak of thread-local hints in servlet-style thread
  pools; docs/architecture.md#hints-live-in-context-variables).

A hint is made active for a block::

    with hint(database="ds_1", force_primary=True):
        router.route("SELECT ...", params)          # sees the hint

or for the calls of a function by ``@shard_database`` (:mod:`ddm_core.hinting`,
the access layer), which nests its hint in the active one by the same rules
(:func:`merged`).

Precedence inside one hint is the router's business; the intended order is
``database``/``table`` (forced) over ``strategy``/``strategy_value`` over the
table's configured strategies fed by ``database_value``/``table_value``.

Caveat shared by every context variable: a ``with hint(...)`` block inside a
generator that *yields* inside the block leaks the hint to the consumer until
the generator resumes. Decorate the generator function with
``@shard_database`` instead; its wrapper sets the hint only while the
generator body runs.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final

from ddm_core.errors import ConfigError

__all__ = ["Hint", "HINT_VAR", "UNSET", "current_hint", "hint", "merged"]


@dataclass(frozen=True, slots=True)
class Hint:
    """One routing override, as the router sees it (immutable).

    Attributes:
        database: Force this data source name; routing skips the database strategy.
        table: Force this physical table name.
        database_value: Sharding value for tables whose database strategy is of
            kind ``HINT`` (``HINT_INLINE``); ``None`` means no value.
        table_value: Sharding value for tables whose table strategy is of kind ``HINT``.
        strategy: Id of a configured sharding algorithm that routes
            :attr:`strategy_value` (set by ``@shard_database``).
        strategy_value: The shard-key value :attr:`strategy` routes.
        force_primary: Reads go to the primary (read/write splitting bypassed).
        has_strategy_value: ``True`` when :attr:`strategy_value` was given, so a
            value of ``None`` is told apart from no value at all.
    """

    database: str | None = None
    table: str | None = None
    database_value: Any = None
    table_value: Any = None
    strategy: str | None = None
    strategy_value: Any = None
    force_primary: bool = False
    has_strategy_value: bool = False


#: The active hint of this thread / task. Whoever sets it resets it with the token ``set`` returned.
HINT_VAR: Final[contextvars.ContextVar[Hint | None]] = contextvars.ContextVar("ddm_core.hint", default=None)
_get = HINT_VAR.get
_set = HINT_VAR.set
_reset = HINT_VAR.reset


def current_hint() -> Hint | None:
    """The hint active in this thread / task, or ``None`` when there is none.

    Costs one context-variable lookup (tens of nanoseconds); the router calls it
    on every ``route()``.
    """
    return _get()


class _Unset:
    """Marker for "argument not given" where ``None`` is a meaningful value."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "..."


#: "Not given" for a value argument of :func:`merged` (``None`` is a value there).
UNSET: Final[Any] = _Unset()


def merged(
    parent: Hint | None,
    database: str | None,
    table: str | None,
    database_value: Any,
    table_value: Any,
    strategy: str | None,
    strategy_value: Any,
    force_primary: bool,
) -> Hint:
    """``parent`` with the given fields overridden; ``None``/:data:`UNSET` inherit.

    The nesting rules of :func:`hint` (and of ``@shard_database``): ``force_primary``
    can be switched on by an inner hint, never off.
    """
    if parent is None:
        parent = _EMPTY
    has_value = strategy_value is not UNSET
    # Same result as Hint(...), built through the slot descriptors: a frozen
    # dataclass __init__ costs one object.__setattr__ per field, twice as slow.
    new = _new_hint(Hint)
    _s_database(new, parent.database if database is None else database)
    _s_table(new, parent.table if table is None else table)
    _s_database_value(new, parent.database_value if database_value is UNSET else database_value)
    _s_table_value(new, parent.table_value if table_value is UNSET else table_value)
    _s_strategy(new, parent.strategy if strategy is None else strategy)
    _s_strategy_value(new, strategy_value if has_value else parent.strategy_value)
    _s_force_primary(new, force_primary or parent.force_primary)
    _s_has_strategy_value(new, has_value or parent.has_strategy_value)
    return new


_EMPTY: Final = Hint()
_new_hint: Final = object.__new__
(
    _s_database,
    _s_table,
    _s_database_value,
    _s_table_value,
    _s_strategy,
    _s_strategy_value,
    _s_force_primary,
    _s_has_strategy_value,
) = (
    vars(Hint)[name].__set__
    for name in (
        "database",
        "table",
        "database_value",
        "table_value",
        "strategy",
        "strategy_value",
        "force_primary",
        "has_strategy_value",
    )
)


@contextmanager
def hint(
    *,
    database: str | None = None,
    table: str | None = None,
    database_value: Any = UNSET,
    table_value: Any = UNSET,
    strategy: str | None = None,
    strategy_value: Any = UNSET,
    force_primary: bool = False,
) -> Iterator[Hint]:
    """Make a hint active for the ``with`` block and yield it.

    Hints nest: the inner hint overrides the fields it is given and inherits the
    rest from the enclosing one. ``database``/``table``/``strategy`` given as
    ``None`` and values not given at all inherit; a value given explicitly as
    ``None`` replaces the outer value. ``force_primary`` can only be switched
    on by an inner hint, never off (a forced-primary scope stays forced). On
    exit, normal or by exception, the enclosing hint (or none) is restored.

    Raises:
        ConfigError: ``database``/``table``/``strategy`` is not a string.
    """
    for field, given in (("database", database), ("table", table), ("strategy", strategy)):
        if given is not None and not isinstance(given, str):
            raise ConfigError(
                f"hint({field}=...) takes a name (str), got {type(given).__name__} {given!r}",
                field=field,
                value=given,
            )
    new = merged(
        _get(), database, table, database_value, table_value, strategy, strategy_value, bool(force_primary)
    )
    token = _set(new)
    try:
        yield new
    finally:
        _reset(token)
