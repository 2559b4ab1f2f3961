# Stub for the compiled ``hotmany`` unit; ``hotmany_py`` is its pure-Python twin.
from typing import Any, Callable

from typing_extensions import disjoint_base

__all__ = ["ConcatenatedAnswers", "WholeAnswers", "AnswerEnd", "TAKE_LIMIT", "READ_SIZE"]

READ_SIZE: int
TAKE_LIMIT: int

@disjoint_base  # a cdef class: its C layout cannot be combined
class AnswerEnd:
    backend_eof: bool
    continued: bool
    buf: bytearray
    at: int
    end: int
    seq: int
    state: int
    count: int
    defs: int
    status: int
    def __init__(self, backend_eof: bool) -> None: ...
    def feed(self, data: bytes) -> int: ...

@disjoint_base  # a cdef class: its C layout cannot be combined
class _PartsReader:
    sent: Any
    loop: Any
    deadlines: Any
    cancel_at: float | None
    abort_at: float | None
    part: int
    done: bool
    watches: Any
    def __init__(self, sent: Any, loop: Any, deadlines: Any) -> None: ...
    def start(self) -> None: ...
    def check(self, now: float) -> None: ...
    def abandon(self) -> None: ...
    def carried(self) -> dict[int, bytes]: ...

@disjoint_base
class ConcatenatedAnswers(_PartsReader):
    relay: Any
    header_for: Callable[[list[bytes]], tuple[list[bytes], int]]
    conversions_for: Callable[[list[bytes]], bytes | None] | None
    relayed: Callable[[bytes], None]
    framed_over: Callable[[int, bytes, dict[int, bytes]], None]
    fresh_over: Callable[[dict[int, bytes]], None]
    pending: bool
    state: int
    def __init__(self, sent: Any, loop: Any, deadlines: Any, relay: Any,
                 header_for: Callable[[list[bytes]], tuple[list[bytes], int]],
                 conversions_for: Callable[[list[bytes]], bytes | None] | None, relayed: Callable[[bytes], None],
                 framed_over: Callable[[int, bytes, dict[int, bytes]], None],
                 fresh_over: Callable[[dict[int, bytes]], None]) -> None: ...
    def is_closing(self) -> bool: ...
    def write(self, data: bytes) -> None: ...

@disjoint_base
class WholeAnswers(_PartsReader):
    taken: Callable[[list[bytes], list[int]], None]
    fresh_over: Callable[[dict[int, bytes]], None]
    def __init__(self, sent: Any, loop: Any, deadlines: Any, taken: Callable[[list[bytes], list[int]], None],
                 fresh_over: Callable[[dict[int, bytes]], None]) -> None: ...
