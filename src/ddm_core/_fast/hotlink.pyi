# Stub for the compiled ``hotlink`` unit; ``hotlink_py`` is its pure-Python twin.
from typing import Any, Callable

from typing_extensions import disjoint_base

__all__ = ["HeaderMemo", "LinkProtocol", "HotStatement", "LinkStack", "LOST", "frame"]

LOST: int
HIGH_WATER: int
LOW_WATER: int
DRAIN_POLL: float
MEMO_LIMIT: int
RECENT: int

def frame(payload: bytes, seq: int = 0) -> bytes: ...

@disjoint_base  # a cdef class: its C layout cannot be combined
class HeaderMemo:
    header_for: Callable[[list[bytes]], tuple[list[bytes], int]]
    session: Any
    conn: Any
    announced: Any
    def __init__(self, header_for: Callable[[list[bytes]], tuple[list[bytes], int]], session: Any, conn: Any,
                 announced: Any) -> None: ...
    def __call__(self, definitions: list[bytes]) -> tuple[list[bytes], int]: ...

@disjoint_base
class LinkProtocol:
    transport: Any
    loop: Any
    closed: bool
    read_bound: float | None
    prepared: Any
    config: Any
    key: Any
    idle_since: float
    @property
    def answering(self) -> bool: ...
    def send(self, payload: bytes, relay: Any, client: Any, header_for: Any, on_end: Any) -> None: ...
    def connection_made(self, transport: Any) -> None: ...
    def data_received(self, data: bytes) -> None: ...
    def end(self, state: int) -> None: ...
    def unasked(self, data: bytes) -> None: ...

@disjoint_base
class HotStatement:
    runtime: Any
    link: Any
    plan: Any
    started: float
    relay: Any
    header_for: Any
    client: Any
    on_end: Any
    done_with: Any
    cid: int | None
    fired: bool
    bounded: bool
    done: bool
    cancel_at: float | None
    abort_at: float | None
    def __init__(self, runtime: Any, link: Any, plan: Any, started: float, relay: Any, header_for: Any, client: Any,
                 on_end: Any, done_with: Any = None, cid: int | None = None) -> None: ...
    def start(self, style: str, values: bytes | None) -> None: ...
    def execute(self, stmt_id: int, values: bytes) -> None: ...
    def prepare_first(self, values: bytes) -> None: ...
    def abandon(self) -> None: ...
    def check(self, now: float) -> None: ...
    def ended(self, link: Any, state: int) -> None: ...
    def failed(self, link: Any, state: int) -> None: ...

@disjoint_base
class LinkStack:
    _idle: dict[tuple[str, str], list[Any]]
    _config: Any
    _sweeper: Any
    closed: bool
    idle_seconds: float
    def take(self, data_source: str, pool: Any, config: Any) -> Any: ...
    def give(self, link: Any) -> None: ...
    def _reset(self, config: Any) -> None: ...
    def _grow(self, key: tuple[str, str], pool: Any) -> None: ...
    def _sweep(self) -> None: ...
