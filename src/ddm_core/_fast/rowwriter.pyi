# Stub for the compiled ``rowwriter`` unit; ``rowwriter_py`` is its pure-Python twin.
from typing import Any, Callable, Iterable, Sequence

__all__ = [
    "text_rows", "binary_rows", "STRING", "BYTES", "TINY_TEXT", "ENCODER", "INT8", "UINT8", "INT16",
    "UINT16", "INT32", "UINT32", "INT64", "UINT64", "FLOAT", "DOUBLE", "DATETIME", "TIME", "TIME_TEXT",
    "MAX_PAYLOAD",
]

STRING: int
BYTES: int
TINY_TEXT: int
ENCODER: int
INT8: int
UINT8: int
INT16: int
UINT16: int
INT32: int
UINT32: int
INT64: int
UINT64: int
FLOAT: int
DOUBLE: int
DATETIME: int
TIME: int
TIME_TEXT: int
MAX_PAYLOAD: int

def text_rows(
    buffer: bytearray, seq: int, rows: Iterable[Sequence[Any]], kinds: bytes | Sequence[int],
    encoders: Sequence[Callable[[Any], bytes]],
) -> int: ...
def binary_rows(
    buffer: bytearray, seq: int, rows: Iterable[Sequence[Any]], kinds: bytes | Sequence[int],
    encoders: Sequence[Callable[[Any], bytes]],
) -> int: ...
