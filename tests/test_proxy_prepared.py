"""COM_STMT_EXECUTE payloads read into values (ddm_core.proxy.prepared), as libmariadb sends them.

libmariadb (sysbench, the C client) sends the parameter types with the first
execute of a statement only; later executes set new-params-bound to 0.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest

from services import require_module

require_module("mysql_mimic", "ddm proxy")

from mysql_mimic.charset import CharacterSet  # noqa: E402
from mysql_mimic.constants import DEFAULT_SERVER_CAPABILITIES  # noqa: E402
from mysql_mimic.errors import MysqlError  # noqa: E402
from mysql_mimic.prepared import PreparedStatement  # noqa: E402
from mysql_mimic.types import Capabilities  # noqa: E402

from ddm_core.proxy.prepared import read_execute  # noqa: E402

LONGLONG, VAR_STRING = 0x08, 0xFD


def _execute(stmt_id: int, values: list[Any], *, with_types: bool, attributes: bool) -> bytes:
    out = struct.pack("<IBI", stmt_id, 0, 1)
    if attributes:
        out += bytes([len(values)])  # parameter count (length-encoded)
    bitmap = 0
    for i, v in enumerate(values):
        if v is None:
            bitmap |= 1 << i
    out += bitmap.to_bytes((len(values) + 7) // 8, "little") + bytes([1 if with_types else 0])
    if with_types:
        for v in values:
            out += bytes([VAR_STRING if isinstance(v, str) else LONGLONG, 0]) + (b"\x00" if attributes else b"")
    for v in values:
        if isinstance(v, str):
            raw = v.encode()
            out += bytes([len(raw)]) + raw
        elif v is not None:
            out += struct.pack("<q", v)
    return out


@pytest.mark.parametrize("attributes", [True, False])
def test_types_of_the_first_execute_serve_the_later_ones(attributes: bool) -> None:
    caps = DEFAULT_SERVER_CAPABILITIES if attributes else DEFAULT_SERVER_CAPABILITIES & ~Capabilities.CLIENT_QUERY_ATTRIBUTES
    stmt = PreparedStatement(stmt_id=7, sql="SELECT c FROM t WHERE id = ? AND c = ?", num_params=2)
    types: dict[int, bytes] = {}

    def get(i: int) -> Any:
        assert i == 7
        return stmt

    first = read_execute(_execute(7, [5, "x' OR '1'='1"], with_types=True, attributes=attributes), caps,
                         CharacterSet.utf8mb4, get, types)  # fmt: skip
    assert first.params == [5, "x' OR '1'='1"] and not first.use_cursor
    later = read_execute(_execute(7, [6, None], with_types=False, attributes=attributes), caps,
                         CharacterSet.utf8mb4, get, types)  # fmt: skip
    assert later.params == [6, None]


def test_an_execute_without_types_and_none_remembered_is_refused() -> None:
    stmt = PreparedStatement(stmt_id=1, sql="SELECT ?", num_params=1)
    with pytest.raises(MysqlError):
        read_execute(_execute(1, [1], with_types=False, attributes=True), DEFAULT_SERVER_CAPABILITIES,
                     CharacterSet.utf8mb4, lambda i: stmt, {})  # fmt: skip


def test_the_prepare_response_names_a_selects_columns() -> None:
    # libmariadb (sysbench) reads no result of a statement whose prepare announced no columns.
    from ddm_core.proxy.masking import projection_names

    assert projection_names("SELECT c FROM sbtest1 WHERE id BETWEEN ? AND ?") == ["c"]
    assert projection_names("SELECT SUM(k), c AS x, t.pad FROM sbtest1 t WHERE id = ?") == ["SUM(k)", "x", "pad"]
    assert projection_names("SELECT a FROM t UNION SELECT b FROM u") == ["a"]
    assert projection_names("SELECT * FROM sbtest1 WHERE id = ?") is None  # names unknown until it runs
    assert projection_names("UPDATE sbtest1 SET k = k + 1 WHERE id = ?") is None
    assert projection_names("SELECT FROM WHERE") is None
