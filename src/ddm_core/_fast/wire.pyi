# Stub for the compiled ``wire`` unit; ``wire_py`` is its pure-Python twin.
from typing import Any, Callable, Sequence

__all__ = ["read_columns", "read_rows", "EOF", "ERROR", "OUT_OF_SEQUENCE", "LOST", "UNEXPECTED"]

EOF: int
ERROR: int
OUT_OF_SEQUENCE: int
LOST: int
UNEXPECTED: int

def read_columns(read: Callable[[int], bytes], seq: int, count: int) -> tuple[tuple[bytes, ...], int, bytes, int]: ...
def read_rows(
    read: Callable[[int], bytes], seq: int, converters: Sequence[tuple[Any, Any]]
) -> tuple[list[tuple[Any, ...]], int, bytes, int]: ...
