"""The backfill copies every column type exactly: the rows spelled as SQL literals by the source server.

A 1 -> 2 data source migration of a ``t_order`` holding one column of each
type the backfill spells as a literal (migrate/literals.py) — integers at
their limits, DECIMAL(65,30), FLOAT / DOUBLE at their limits and subnormals,
BIT, YEAR, DATE, DATETIME(6), TIMESTAMP(6), negative TIME(6), utf8mb4 text
with 4-byte characters, quotes, backslashes, NUL and Ctrl-Z, latin1 text,
ENUM, SET, JSON, BINARY, VARBINARY, BLOBs holding every byte value, NULL in
every nullable column — and a broadcast table of types it has no literal for
(INET6, UUID), copied the PyMySQL way.

The reference is independent of the backfill: the source rows read with
PyMySQL, placed by the scalar ``hashing.slot_of`` and the grown slot map.
Each copied row must equal its source row value for value and type (floats
bit for bit), and the server's own ``HEX()`` of every string and binary
column must match too.
"""

from __future__ import annotations

import random
from decimal import Decimal
from typing import Any, Iterator

import pytest

from ddm_core import load_config
from ddm_core.execute import Executor
from ddm_core.hashing import slot_of
from ddm_core.migrate import Connections, connector
from ddm_core.migrate.backfill import ScanCopier, backfill, backfill_scans
from ddm_core.migrate.literals import insert_statements
from ddm_core.migrate.phases import Phase
from ddm_core.migrate.plan import plan_migration
from ddm_core.migrate.state import MigrationLog
from ddm_core.slots import SlotMap
from migrate_support import TABLES_PER_SOURCE, reshard_docs
from services import fresh_mariadb_databases, mariadb_connect, mariadb_rows

COLUMNS = [
    ("order_id", "BIGINT NOT NULL PRIMARY KEY"),
    ("user_id", "BIGINT NOT NULL"),
    ("i8", "TINYINT"), ("u64", "BIGINT UNSIGNED"), ("i64", "BIGINT"),
    ("num", "DECIMAL(65,30)"), ("f4", "FLOAT"), ("f8", "DOUBLE"), ("bits", "BIT(13)"), ("yr", "YEAR"),
    ("d", "DATE"), ("dt", "DATETIME(6)"), ("ts", "TIMESTAMP(6) NULL"), ("tm", "TIME(6)"),
    ("c", "CHAR(10) CHARACTER SET utf8mb4"), ("vc", "VARCHAR(200) CHARACTER SET utf8mb4"),
    ("lat", "TEXT CHARACTER SET latin1"), ("e", "ENUM('a','b','c d')"), ("s", "SET('x','y','z')"),
    ("j", "JSON"), ("bin", "BINARY(4)"), ("vb", "VARBINARY(300)"), ("bl", "BLOB"), ("lb", "LONGBLOB"),
]
DDL = "CREATE TABLE t_order (" + ", ".join(f"{n} {t}" for n, t in COLUMNS) + ", KEY by_user (user_id))"
NAMES = [n for n, _ in COLUMNS]
#: Columns whose stored bytes the server's HEX() shows (strings and binaries).
HEXED = ["c", "vc", "lat", "e", "s", "j", "bin", "vb", "bl", "lb"]

EVERY_BYTE = bytes(range(256))
NASTY = "it's \\ a \"back\"slash \x00 nul \x1a ctrl-Z \n\r\t 😀𝄞 中文 \\' '\\"
EDGES: list[dict[str, Any]] = [
    {"i8": -128, "u64": 18446744073709551615, "i64": -9223372036854775808,
     "num": Decimal("-12345678901234567890123456789012345.123456789012345678901234567890"),
     "f4": 3.4028234663852886e38, "f8": 1.7976931348623157e308, "bits": 8191, "yr": 2155,
     "d": "9999-12-31", "dt": "9999-12-31 23:59:59.999999", "ts": "2038-01-18 03:14:07.999999",
     "tm": "838:59:59.000000", "c": "😀 ü", "vc": NASTY, "lat": "café ÿ ñ", "e": "c d", "s": "x,z",
     "j": '{"k": "v 😀", "n": [1, 2.5, null], "q": "\\"quoted\\" \\\\ \\u0000"}',
     "bin": b"\x00\x01\xff\x00", "vb": EVERY_BYTE, "bl": EVERY_BYTE * 3 + b"'\\\x00\x1a\"", "lb": b""},
    {"i8": 127, "u64": 0, "i64": 9223372036854775807, "num": Decimal("0.000000000000000000000000000001"),
     "f4": 1e-45, "f8": 5e-324, "bits": 0, "yr": 1901, "d": "1000-01-01", "dt": "1000-01-01 00:00:00.000000",
     "ts": "1971-01-01 00:00:01.000001", "tm": "-838:59:59.000000", "c": "", "vc": "", "lat": "", "e": "a",
     "s": "", "j": "[]", "bin": b"\x00\x00\x00\x00", "vb": b"", "bl": b"", "lb": bytes(range(255, -1, -1)) * 800},
    {"i8": 0, "u64": 1, "i64": -1, "num": Decimal("1.100000000000000000000000000000"), "f4": 0.1, "f8": 1 / 3,
     "bits": 5, "yr": 2024, "d": "2024-02-29", "dt": "2024-02-29 12:34:56.000001", "ts": "2024-06-01 10:00:00.5",
     "tm": "-00:00:00.000001", "c": "a'b\\c", "vc": "'", "lat": "\\", "e": "b", "s": "x,y,z",
     "j": '{"a": {"b": [true, false]}}', "bin": b"'\\\x00\x1a", "vb": b"\\", "bl": b"'", "lb": b"\x00"},
    {},  # NULL in every nullable column
]


def _rows(count: int, seed: int) -> list[tuple[Any, ...]]:
    """The edge rows, then random ones; every row a full tuple in COLUMNS order."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        values: dict[str, Any] = dict(EDGES[i]) if i < len(EDGES) else {
            "i8": rng.randint(-128, 127), "u64": rng.getrandbits(64), "i64": rng.getrandbits(63) - (1 << 62),
            "num": Decimal(rng.randint(-10**20, 10**20)) / Decimal(10**rng.randint(0, 30)),
            "f4": rng.uniform(-1e6, 1e6), "f8": rng.uniform(-1e300, 1e300) * rng.random() ** 40,
            "bits": rng.randrange(8192), "yr": rng.randint(1901, 2155), "d": f"{rng.randint(1000, 9999)}-07-14",
            "dt": f"2031-03-{rng.randint(1, 28):02d} 01:02:03.{rng.randrange(10**6):06d}",
            "ts": f"2001-09-09 01:46:{rng.randint(10, 59)}.{rng.randrange(10**6):06d}",
            "tm": f"{rng.randint(-838, 838)}:{rng.randint(0, 59):02d}:00.{rng.randrange(10**6):06d}",
            "c": rng.choice(["x", "😀", "ü'"]), "vc": "".join(rng.choice(NASTY) for _ in range(rng.randint(0, 60))),
            "lat": "".join(rng.choice("aé\\'\"ÿ\n") for _ in range(rng.randint(0, 30))),
            "e": rng.choice(["a", "b", "c d", None]), "s": rng.choice(["", "y", "x,z", None]),
            "j": f'{{"i": {i}, "s": "{rng.choice(["😀", "x", "ü"])}"}}',
            "bin": rng.randbytes(4), "vb": rng.randbytes(rng.randint(0, 300)),
            "bl": rng.randbytes(rng.randint(0, 2000)), "lb": rng.randbytes(rng.randint(0, 5000)),
        }
        out.append((i + 1, rng.randrange(1, 1 << 40), *(values.get(n) for n in NAMES[2:])))
    return out


@pytest.fixture()
def two() -> Iterator[list[str]]:
    with fresh_mariadb_databases(2) as names:
        yield names


def _setup(names: list[str], rows: list[tuple[Any, ...]]) -> tuple[Any, Any]:
    """``t_order`` (every type) and ``t_dict`` (INET6, UUID) on ds_0, their targets on ds_1, dual write completed."""
    old_doc, new_doc = reshard_docs(names, old_count=1)
    old, new = load_config(old_doc), load_config(new_doc)
    with Executor(old, timeout=20.0, load_schema=False) as ex:
        ex.execute(DDL).close()
    conn = mariadb_connect(database=names[0], charset="utf8mb4")
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE t_dict (id INT NOT NULL PRIMARY KEY, addr INET6, uid UUID, name VARCHAR(40))")
        marks = ", ".join(["%s"] * len(NAMES))
        for t in range(TABLES_PER_SOURCE):  # every other row in each physical table: both scans copy
            cur.executemany(f"INSERT INTO t_order_0_{t} ({', '.join(NAMES)}) VALUES ({marks})", rows[t::2])
        cur.executemany("INSERT INTO t_dict VALUES (%s, %s, %s, %s)",
                        [(1, "::1", "123e4567-e89b-12d3-a456-426614174000", "ü 😀"), (2, None, None, None),
                         (3, "2001:db8::ff00:42:8329", "00000000-0000-0000-0000-000000000000", "'\\")])
        # the targets by hand (prepare's DDL parser does not read INET6 / UUID), like their sources
        for table in [f"t_order_0_{t}" for t in range(TABLES_PER_SOURCE)] + ["t_dict"]:
            cur.execute(f"CREATE TABLE `{names[1]}`.{table.replace('_0_', '_1_')} LIKE `{names[0]}`.{table}")
    conn.close()
    with MigrationLog(connector(old, "ds_0"), "types") as log:
        log.create_table()
        for phase in (Phase.PREPARE, Phase.DUAL_WRITE):
            log.enter(phase)
            log.complete(phase)
    return old, new


def _same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """Value for value and type for type; floats bit for bit (-0.0 and NaN included)."""
    return len(a) == len(b) and all(
        type(x) is type(y) and (x.hex() == y.hex() if isinstance(x, float) else x == y) for x, y in zip(a, b))


def test_every_copied_type_round_trips_exactly(two: list[str]) -> None:
    rows = _rows(120, seed=2029)
    old, new = _setup(two, rows)
    with Connections(old, new) as conns, MigrationLog(connector(old, "ds_0"), "types") as log:
        plan = plan_migration(old, new, count="none", rate=1.0)
        copiers = {s.physical: ScanCopier(s, old, conns) for s in backfill_scans(old, new, plan)}
        assert all(copiers[f"t_order_0_{t}"].literal is not None for t in range(TABLES_PER_SOURCE))
        assert copiers["t_dict"].literal is None  # INET6 / UUID: the PyMySQL way
        result = backfill(old, new, plan, conns, log, batch=7)  # many batches, the last one short
        assert log.state().completed
    grown, _ = SlotMap.even(1, 10).moved_to(2)
    cols = ", ".join(NAMES)
    hexed = ", ".join(f"HEX({c})" for c in HEXED)
    lost = differing = unexpected = moved = 0
    for t in range(TABLES_PER_SOURCE):
        source = {r[0]: r for r in mariadb_rows(two[0], f"SELECT {cols} FROM t_order_0_{t}")}
        source_hex = {r[0]: r for r in mariadb_rows(two[0], f"SELECT order_id, {hexed} FROM t_order_0_{t}")}
        target = {r[0]: r for r in mariadb_rows(two[1], f"SELECT {cols} FROM t_order_1_{t}")}
        target_hex = {r[0]: r for r in mariadb_rows(two[1], f"SELECT order_id, {hexed} FROM t_order_1_{t}")}
        want = {k for k, r in source.items() if grown.node_of(slot_of(int(r[1]), 10)) == 1}
        moved += len(want)
        lost += len(want - target.keys())
        unexpected += len(target.keys() - want)
        differing += sum(1 for k in want & target.keys()
                         if not _same(source[k], target[k]) or source_hex[k] != target_hex[k])
    assert (lost, differing, unexpected) == (0, 0, 0)
    assert 20 < moved < 100 and result.rows_copied == moved + 3  # + t_dict's 3 rows
    # the edge rows, read back from wherever they are, are what was written
    wrote = {r[0]: r for r in rows[: len(EDGES)]}
    for t in range(TABLES_PER_SOURCE):
        for db, table in ((two[0], f"t_order_0_{t}"), (two[1], f"t_order_1_{t}")):
            got = mariadb_rows(db, f"SELECT order_id, user_id, i8, u64, i64, num, vc, vb, bl, lb FROM {table} "
                                   f"WHERE order_id <= {len(EDGES)}")
            for r in got:
                w = wrote[r[0]]
                assert r == tuple(w[i] for i in (0, 1, 2, 3, 4, 5, 15, 21, 22, 23))
    dict_source = mariadb_rows(two[0], "SELECT id, addr, uid, name FROM t_dict ORDER BY id")
    assert mariadb_rows(two[1], "SELECT id, addr, uid, name FROM t_dict ORDER BY id") == dict_source
    # the batch check's source digest, summed from the hashes read with the literals, is the source's
    # digest of the same keys computed apart (every type, NULLs included), and it is not empty
    with Connections(old, new) as conns:
        for scan in backfill_scans(old, new, plan):
            copier = ScanCopier(scan, old, conns)
            if copier.literal is None:
                continue
            for rows in copier.read(13):
                for i, sent in enumerate(copier.write_read(rows)):
                    assert sent.digest is not None and sent.digest.rows == len(sent.keys)
                    assert sent.digest == copier.sources[i].digest_of_keys(sent.keys, copier.checkers[i].shape_a)


def test_insert_statements_fill_each_statement_up_to_the_limit() -> None:
    rng = random.Random(7)
    values = [b"(" + str(i).encode() + b",'" + b"x" * rng.randint(0, 90) + b"')" for i in range(2000)]
    values.append(b"(" + b"y" * 5000 + b")")  # longer than the limit on its own: sent alone
    head, tail = b"INSERT INTO t (a, b) VALUES ", b" ON DUPLICATE KEY UPDATE b = VALUES(b)"
    for limit in (300, 4096, 1 << 20):
        statements = list(insert_statements(head, tail, values, limit))
        sent = [v for s in statements for v in s[len(head):len(s) - len(tail)].split(b",(")]
        assert len(sent) == len(values)  # every tuple once, in order
        assert all(s.startswith(head) and s.endswith(tail) for s in statements)
        assert all(len(s) <= limit for s in statements if len(s) - len(head) - len(tail) < 5000)
        if limit == 1 << 20:
            assert len(statements) == 1
        else:  # filled: no two neighbours would have fitted in one
            sizes = [len(s) - len(head) - len(tail) for s in statements]
            assert all(a + b + 1 > limit - len(head) - len(tail) for a, b in zip(sizes, sizes[1:]))
