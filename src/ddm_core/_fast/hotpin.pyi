# Stub for the compiled ``hotpin`` unit; ``hotpin_py`` is its pure-Python twin.
from typing import Any, Callable, final

from typing_extensions import disjoint_base

__all__ = ["PinRead", "PinWatches", "UNSENT", "LOST", "CLOSED", "PAUSED", "ENDED", "FIRED", "EXPIRED", "BROKE", "OPENING", "READ_SIZE"]

READ_SIZE: int
HIGH_WATER: int
UNSENT: int
LOST: int
CLOSED: int
PAUSED: int
ENDED: int
FIRED: int
EXPIRED: int
BROKE: int
OPENING: int

@final  # a final cdef class
class PinWatches:
    def watch(self, loop: Any, sock: Any, fd: int, callback: Callable[[], None]) -> None: ...
    def park(self, fd: int) -> None: ...
    def drop(self) -> None: ...
    def __len__(self) -> int: ...

@disjoint_base  # a cdef class: its C layout cannot be combined
class PinRead:
    runtime: Any
    session: Any
    plan: Any
    started: float
    relay: Any
    header_for: Any
    client: Any
    on_end: Callable[[int, Any], None]
    done_with: Callable[[], None] | None
    cid: Any
    tx: Any
    pin: Any
    loop: Any
    pool: Any
    driver: Any
    raw: Any
    sock: Any
    fd: int
    cursor: Any
    sql: str | None
    style: str | None
    deadline: float | None
    answer_by: float | None
    cancel_at: float | None
    abort_at: float | None
    fired: bool
    opening: Any
    watched: bool
    watches: Any
    done: bool
    def __init__(self, runtime: Any, session: Any, plan: Any, started: float, relay: Any, header_for: Any,
                 client: Any, on_end: Callable[[int, Any], None], done_with: Callable[[], None] | None, cid: Any,
                 tx: Any, pin: Any, loop: Any) -> None: ...
    def start(self, style: str, values: bytes | None, stmt_id: int | None, sock: Any, opening: Any) -> None: ...
    def check(self, now: float) -> None: ...
    def leave(self) -> None: ...
    def rare(self, what: int, arg: Any) -> None: ...
    def abandon(self) -> None: ...
