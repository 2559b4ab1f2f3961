# Stub for the compiled ``ordered`` unit; ``ordered_py`` is its pure-Python twin.

__all__ = [
    "merge_ordered", "text_rows", "KEY_BYTES", "KEY_ASCII", "KEY_ASCII_FOLD", "KEY_PAD", "KEY_PAD_FOLD", "KEY_SIGNED",
    "KEY_UNSIGNED",
]

KEY_BYTES: int
KEY_ASCII: int
KEY_ASCII_FOLD: int
KEY_PAD: int
KEY_PAD_FOLD: int
KEY_SIGNED: int
KEY_UNSIGNED: int

def merge_ordered(answers: list[bytes], backend_eof: bool, keys: list[tuple[int, int, bool]], distinct: bool,
                  offset: int, limit: int, visible: int = -1) -> bytes | None: ...
def text_rows(answers: list[bytes], backend_eof: bool
              ) -> tuple[list[bytes], int, list[list[bytes | None]], bytes] | None: ...
