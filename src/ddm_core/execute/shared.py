"""What the executor and its transactions share: per-call defaults, lanes, the bound transaction.

One home for the pieces both :mod:`ddm_core.execute.executor` and
:mod:`ddm_core.execute.transaction` use, so neither imports the other's
private names.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ddm_core.errors import DdmError
from ddm_core.execute.pools import Borrowed, EndpointPool
from ddm_core.route.placeholders import translate
from ddm_core.route.plan import RouteUnit

if TYPE_CHECKING:
    from ddm_core.execute.transaction import Transaction

__all__ = ["DEFAULT", "CURRENT_TX", "Lane", "style_of"]


class _Default:
    def __repr__(self) -> str:
        return "DEFAULT"


#: "Use the executor's setting" for per-call options.
DEFAULT: Any = _Default()

#: The transaction bound by ``with executor.transaction():`` in this context.
CURRENT_TX: ContextVar[Transaction | None] = ContextVar("ddm_transaction", default=None)


@dataclass(slots=True)
class Lane:
    """Units that run one after another on one connection (one unit outside transactions).

    Attributes:
        pool: Where the connection comes from.
        items: ``(unit index in the plan, unit)`` pairs, in order.
        pinned: A transaction's connection to run them on (``None``: borrow per unit).
    """

    pool: EndpointPool
    items: list[tuple[int, RouteUnit]]
    pinned: Borrowed | None = None


def style_of(sql: str) -> str:
    """The paramstyle family the caller wrote ``sql`` in: ``"qmark"`` for ``?``, else ``"format"``."""
    if "?" not in sql:
        return "format"  # no ``?`` at all: nothing to translate (and no refusal to raise and catch)
    try:
        return translate(sql).style  # cached: the router translated the same text
    except DdmError:
        return "format"
