# Stub for the compiled ``point`` unit; ``point_py`` is its pure-Python twin.
from typing import Any, Callable, Sequence, final

from typing_extensions import TypeAlias

__all__ = ["PointPath", "PointFront", "MEMO_LIMIT"]

MEMO_LIMIT: int

#: ``(sources, as_tuple, scalar, period, floor, hasher)``; a source is ``(param index, constant)``
#: (a type alias of the stub only; the twins take plain tuples).
_LevelSpec: TypeAlias = tuple[tuple[tuple[int, Any], ...], bool, Callable[[Any], int], int, bool, Callable[[Any], int] | None]

@final  # a final cdef class
class PointPath:
    def __init__(
        self, names: Sequence[Any] | None, count: int, normalized: Sequence[int], db: _LevelSpec | None,
        tb: Sequence[_LevelSpec | None], lut: Sequence[Sequence[int]], nodes: dict[int, tuple[Any, Any, Any, Any]],
        params: Sequence[int] | None, unit_type: type, plan_type: type, head: Any, tail: tuple[Any, ...],
    ) -> None: ...
    def route(self, params: Any) -> Any: ...

@final  # a final cdef class
class PointFront:
    hits: int
    def __init__(self, cache: dict[Any, Any], holder: Any, config: Any, hint: Callable[[], Any], enabled: bool) -> None: ...
    def route(self, sql: Any, params: Any) -> Any: ...
