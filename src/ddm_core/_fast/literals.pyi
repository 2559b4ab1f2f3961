# Stub for the compiled ``literals`` unit; ``literals_py`` is its pure-Python twin.
import re
from typing import Any

__all__ = ["LITERALS", "split", "skeleton", "fill", "string_value", "STRING", "NUMBER", "NEGATIVE"]

LITERALS: re.Pattern[str]
STRING: int
NUMBER: int
NEGATIVE: int

def split(sql: str) -> list[str | None]: ...
def skeleton(parts: list[str | None]) -> tuple[tuple[str | None, ...], tuple[str | None, ...], tuple[bool, ...]]: ...
def fill(parts: list[str | None], choice: tuple[tuple[int, int], ...]) -> tuple[str, list[Any]]: ...
def string_value(token: str) -> str: ...
