# Stub for the compiled ``hotfront`` unit; ``hotfront_py`` is its pure-Python twin.
from typing import Any, Callable, final

__all__ = ["HotFront", "COM_QUERY", "COM_STMT_EXECUTE"]

COM_QUERY: int
COM_STMT_EXECUTE: int

@final  # a final cdef class
class HotFront:
    session: Any
    conn: Any
    runtime: Any
    done_with: Callable[[], None] | None
    taken: int
    def __init__(self, session: Any, conn: Any, runtime: Any, terms: tuple[Any, ...]) -> None: ...
    def hot(self, command: int, payload: bytes) -> bool: ...
    def read_query(self, payload: bytes) -> tuple[str, str, list[Any] | None, None, None] | None: ...
    def read_execute(self, payload: bytes) -> tuple[str, str, list[Any], Any, bytes] | None: ...
