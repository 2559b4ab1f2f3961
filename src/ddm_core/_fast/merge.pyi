# Stub for the compiled ``merge`` unit; ``merge_py`` is its pure-Python twin.
from typing import Any, Iterable, Iterator, Sequence, final


__all__ = ["heap_merge", "HeapMerge", "check_merge_args"]

_Row = Sequence[Any]

@final  # a final cdef class
class HeapMerge(Iterator[_Row]):
    """Made by :func:`heap_merge` only (the twins' constructors differ)."""

    def __iter__(self) -> HeapMerge: ...
    def __next__(self) -> _Row: ...
    def close(self) -> None: ...

def check_merge_args(
    keys: Sequence[tuple[int, bool]], offset: int, limit: int | None
) -> tuple[tuple[int, ...], tuple[bool, ...]]: ...
def heap_merge(
    sources: Iterable[Iterable[_Row]],
    keys: Sequence[tuple[int, bool]],
    *,
    offset: int = 0,
    limit: int | None = None,
) -> HeapMerge: ...
