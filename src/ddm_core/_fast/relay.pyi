# Stub for the compiled ``relay`` unit; ``relay_py`` is its pure-Python twin.
from typing import Any, Callable

from typing_extensions import disjoint_base

__all__ = [
    "ResultRelay", "ok_fields", "FIRST", "OK", "ERROR", "HEADER", "ROWS", "DONE", "UNEXPECTED", "MISMATCH",
    "AS_STRING", "AS_DECIMAL", "AS_INT8", "AS_UINT8", "AS_INT16", "AS_UINT16", "AS_INT32", "AS_UINT32", "AS_INT64",
    "AS_UINT64", "AS_FLOAT", "AS_DOUBLE", "AS_DATETIME", "AS_TIME", "AS_NULL", "datetime_field",
]

FIRST: int
OK: int
ERROR: int
HEADER: int
ROWS: int
DONE: int
UNEXPECTED: int
MISMATCH: int
AS_STRING: int
AS_DECIMAL: int
AS_INT8: int
AS_UINT8: int
AS_INT16: int
AS_UINT16: int
AS_INT32: int
AS_UINT32: int
AS_INT64: int
AS_UINT64: int
AS_FLOAT: int
AS_DOUBLE: int
AS_DATETIME: int
AS_TIME: int
AS_NULL: int

def ok_fields(payload: bytes) -> tuple[int, int, int, int]: ...
def datetime_field(text: bytes) -> bytes | None: ...

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
    def convert(self, kinds: bytes) -> None: ...
    def rest(self) -> bytes: ...
    def take(self) -> bytes: ...
    def feed(self, data: bytes) -> int: ...
    def header(self, payloads: list[bytes], status: int) -> int: ...
    def pump(self, data: bytes, client: Any, header_for: Callable[[list[bytes]], tuple[list[bytes], int]]) -> int: ...
