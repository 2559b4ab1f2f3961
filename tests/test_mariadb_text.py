"""``proxy/mariadb_text.py``: a decoded value spelled as MariaDB spells it in a text result.

The oracle is MariaDB itself: random floating point values (every magnitude, random bit patterns, round
numbers, many digits) stored in ``FLOAT`` and ``DOUBLE`` columns, and edge values of ``DATETIME(n)``,
``TIMESTAMP(n)``, ``TIME(n)`` and ``YEAR``, read back as MariaDB's own text; each value PyMySQL decodes from
that text must be spelled back to the very same text.
"""

from __future__ import annotations

import random
import struct
from datetime import datetime, timedelta
from typing import Any

import pytest

from services import fresh_mariadb_databases, mariadb_connect, require_module

require_module("mysql_mimic", "ddm proxy")
pymysql: Any = require_module("pymysql", "the MariaDB tests")

from mysql_mimic import ColumnType  # noqa: E402

from ddm_core.proxy.mariadb_text import NOT_FIXED, encoder_for, float_text  # noqa: E402

FLOAT_MAX = 3.4028234663852886e38


def _random_floats(rng: random.Random, count: int) -> list[float]:
    values: list[float] = [0.0, -0.0, 1.0, 0.1, 1e14, 1e15, 1e16, 1e-14, 1e-15, 16777216.0, 16777217.0,
                           0.30000000000000004, 123456789012345.67, 1234567890123456.7, 1.7976931348623157e308,
                           5e-324]  # fmt: skip
    while len(values) < count:
        pick = rng.random()
        if pick < 0.3:
            value = rng.uniform(-1, 1) * 10 ** rng.randint(-30, 30)
        elif pick < 0.5:
            value = float(rng.randint(1, 9)) * 10 ** rng.randint(-25, 25)
        elif pick < 0.7:
            value = round(rng.uniform(-1e6, 1e6), rng.randint(0, 8))
        elif pick < 0.85:
            value = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
            if value != value or abs(value) == float("inf"):
                continue
        else:
            value = rng.randint(-(10**18), 10**18) / 10 ** rng.randint(0, 20)
        values.append(value)
    return values


def _as_stored_float(value: float) -> float:
    """A value a FLOAT column takes (in its range; a subnormal one is 0 there)."""
    return value if 1.2e-38 < abs(value) < FLOAT_MAX else 1.5


def _as_text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _undecoded(database: str) -> Any:
    """A connection whose rows are the server's text: PyMySQL's encoders kept, no decoder."""
    conv = {k: v for k, v in pymysql.converters.conversions.items() if not isinstance(k, int)}
    return mariadb_connect(database=database, conv=conv)


@pytest.fixture(scope="module")
def database() -> Any:
    with fresh_mariadb_databases(1) as names:
        yield names[0]


def test_floats_and_doubles_are_spelled_as_mariadb_spells_them(database: str) -> None:
    values = _random_floats(random.Random(20261207), 6000)
    conn = _undecoded(database)
    try:
        with conn.cursor() as cur:
            cur.execute("CREATE TABLE f (i INT PRIMARY KEY, d DOUBLE, g FLOAT, p FLOAT(9,4))")
            rows = [(i, repr(v), repr(_as_stored_float(v)), repr(round(v % 1000, 3))) for i, v in enumerate(values)]
            cur.executemany("INSERT INTO f VALUES (%s, %s, %s, %s)", rows)
            cur.execute("SELECT d, g, p FROM f ORDER BY i")
            texts = [tuple(_as_text(x) for x in row) for row in cur.fetchall()]
    finally:
        conn.close()
    fixed = encoder_for(ColumnType.FLOAT, 4, lambda v: b"fallback")
    assert fixed is not None
    wrong = []
    for double, single, four in texts:
        if float_text(float(double), False) != double:
            wrong.append(("DOUBLE", double, float_text(float(double), False)))
        if float_text(float(single), True) != single:
            wrong.append(("FLOAT", single, float_text(float(single), True)))
        if fixed(float(four)) != four.encode():
            wrong.append(("FLOAT(9,4)", four, fixed(float(four))))
    assert not wrong, wrong[:10]


@pytest.mark.parametrize(("ddl", "column_type", "decimals", "values"), [
    ("v DATETIME(6)", ColumnType.DATETIME, 6,
     ["1000-01-01 00:00:00", "2024-02-29 23:59:58.000001", "9999-12-31 23:59:59.999999"]),
    ("v TIMESTAMP(3)", ColumnType.TIMESTAMP, 3,
     ["1970-01-01 00:00:01", "2024-02-29 12:00:00.5", "2038-01-19 03:14:07.999"]),
    ("v DATETIME", ColumnType.DATETIME, 0, ["1000-01-01 00:00:00", "2024-02-29 23:59:58"]),
    ("v TIME(6)", ColumnType.TIME, 6,
     ["00:00:00", "00:00:00.000001", "-838:59:59.999999", "100:00:00.123456", "-00:00:01"]),
    ("v TIME", ColumnType.TIME, 0, ["00:00:00", "12:34:56", "-26:00:05", "838:59:59"]),
    ("v YEAR", ColumnType.YEAR, 0, [0, 1901, 2155]),
])  # fmt: skip
def test_dates_times_and_years_are_spelled_as_mariadb_spells_them(
        database: str, ddl: str, column_type: Any, decimals: int, values: list[Any]) -> None:  # fmt: skip
    """Each value as PyMySQL decodes MariaDB's text of it (datetimes, timedeltas, ints), spelled back."""
    table = f"`{column_type.name}_{decimals}`"
    conn, raw = mariadb_connect(database=database), _undecoded(database)
    try:
        with conn.cursor() as cur, raw.cursor() as text:
            cur.execute(f"CREATE TABLE {table} (i INT PRIMARY KEY, {ddl})")
            cur.executemany(f"INSERT INTO {table} VALUES (%s, %s)", list(enumerate(values)))
            cur.execute(f"SELECT v FROM {table} ORDER BY i")
            text.execute(f"SELECT v FROM {table} ORDER BY i")
            rows = [(_as_text(t), d) for (t,), (d,) in zip(text.fetchall(), cur.fetchall())]
    finally:
        conn.close()
        raw.close()
    encode = encoder_for(column_type, decimals, lambda v: b"fallback")
    assert encode is not None
    for text, decoded in rows:
        assert isinstance(decoded, (datetime, timedelta, int)), decoded
        assert encode(decoded) == text.encode(), (text, decoded)
    assert encode("0000-00-00 00:00:00") == b"fallback"  # a zero date PyMySQL leaves as text: the column's own
    assert encoder_for(ColumnType.VARCHAR, NOT_FIXED, lambda v: b"") is None


def test_a_fraction_the_columns_decimals_cannot_hold_is_kept_whole() -> None:
    """A value the proxy made for a column it described with fewer decimals than the value has: all six digits,
    nothing dropped (MariaDB's own values always fit their column's)."""
    at = datetime(2024, 2, 29, 23, 59, 58, 123456)
    for decimals, text in ((0, b"2024-02-29 23:59:58.123456"), (3, b"2024-02-29 23:59:58.123456"),
                           (6, b"2024-02-29 23:59:58.123456")):  # fmt: skip
        encode = encoder_for(ColumnType.DATETIME, decimals, lambda v: b"")
        assert encode is not None and encode(at) == text
    encode = encoder_for(ColumnType.TIME, 2, lambda v: b"")
    assert encode is not None
    assert encode(timedelta(seconds=5, microseconds=500000)) == b"00:00:05.50"
    assert encode(-timedelta(seconds=5, microseconds=1)) == b"-00:00:05.000001"
