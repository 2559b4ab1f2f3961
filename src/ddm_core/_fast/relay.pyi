# Stub for the compiled ``relay`` unit; ``relay_py`` is its pure-Python twin.
from typing import Any, Callable

from typing_extensions import disjoint_base

__all__ = ["ResultRelay", "ok_fields", "FIRST", "OK", "ERROR", "HEADER", "ROWS", "DONE", "UNEXPECTED", "MISMATCH"]

FIRST: int
OK: int
ERROR: int
HEADER: int
ROWS: int
DONE: int
UNEXPECTED: int
MISMATCH: int

def ok_fields(payload: bytes) -> tuple[int, int, int, int]: ...

@disjoint_base  # a cdef class: its C layout cannot be combined
class ResultRelay:
    seq: int
    columns: list[bytes]
    first: bytes
    rows: int
    status: int
    unit: int
    statuses: list[int]
    def __init__(self, seq: int, client_eof: bool, backend_eof: bool, count_rows: bool) -> None: ...
    @property
    def state(self) -> int: ...
    def concatenate(self, units: int) -> None: ...
    def rest(self) -> bytes: ...
    def take(self) -> bytes: ...
    def feed(self, data: bytes) -> int: ...
    def header(self, payloads: list[bytes], status: int) -> int: ...
    def pump(self, data: bytes, client: Any, header_for: Callable[[list[bytes]], tuple[list[bytes], int]]) -> int: ...
