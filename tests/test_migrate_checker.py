"""The consistency checker on real MariaDB databases: injected differences are found exactly."""

from __future__ import annotations

import datetime as dt
import random
from typing import Any, Iterator

import numpy as np
import pytest
from click.testing import CliRunner

from ddm_core.cli import cli
from ddm_core.hashing import slot_of
from ddm_core.migrate import Connections
from ddm_core.migrate.checker import Checker, RowSource, SlotFilter
from migrate_support import reshard_configs, reshard_docs
from services import fresh_mariadb_databases, mariadb_connect

ROWS = 3000
TABLE = ("CREATE TABLE t_item (id BIGINT NOT NULL PRIMARY KEY, user_id BIGINT NOT NULL, note VARCHAR(40) NULL, "
         "amount DECIMAL(10,2) NOT NULL, ts DATETIME({p}) NULL, label VARCHAR(20) COLLATE {coll} NULL)")


def run(database: str, sql: str, params: Any = None, many: bool = False) -> list[Any]:
    conn = mariadb_connect(database=database)
    try:
        with conn.cursor() as cur:
            if many:
                cur.executemany(sql, params)
                return []
            cur.execute(sql, params)
            return list(cur.fetchall())
    finally:
        conn.close()


def _rows(n: int) -> list[tuple[Any, ...]]:
    base = dt.datetime(2024, 3, 1, 12, 0, 0)
    return [(i, i * 7 % 101, f"note {i}" if i % 5 else None, f"{i % 1000}.25", base + dt.timedelta(seconds=i,
             microseconds=(i % 1000) * 1000), f"Label {i % 9}") for i in range(1, n + 1)]


INSERT = "INSERT INTO t_item (id, user_id, note, amount, ts, label) VALUES (%s, %s, %s, %s, %s, %s)"


@pytest.fixture()
def two() -> Iterator[list[str]]:
    with fresh_mariadb_databases(2) as names:
        yield names


def _conns(names: list[str]) -> Connections:
    return Connections(reshard_configs(names, old_count=1)[1])  # ds_0 and ds_1


def _make(names: list[str], *, precision_b: int = 3, collation_b: str = "utf8mb4_general_ci") -> None:
    run(names[0], TABLE.format(p=3, coll="utf8mb4_general_ci"))
    run(names[1], TABLE.format(p=precision_b, coll=collation_b))
    rows = _rows(ROWS)
    run(names[0], INSERT, rows, many=True)
    run(names[1], INSERT, rows, many=True)


def test_identical_tables_are_consistent_in_every_chunk(two: list[str]) -> None:
    _make(two)
    with _conns(two) as conns:
        checker = Checker(RowSource(conns, [("ds_0", "t_item")]), RowSource(conns, [("ds_1", "t_item")]),
                          chunk_rows=400)
        report = checker.check()
    assert report.consistent and report.differences == []
    assert (report.rows_a, report.rows_b) == (ROWS, ROWS)
    assert report.chunks == ROWS // 400 + 1 and report.mismatched_chunks == 0
    assert report.notes == []


@pytest.mark.parametrize("hash_kind", ["crc32c", "md5"])
def test_missing_extra_changed_null_and_precision_rows_are_found_exactly(two: list[str], hash_kind: Any) -> None:
    _make(two, precision_b=6)
    a, b = two
    run(b, "DELETE FROM t_item WHERE id = 1234")                                     # missing
    run(b, INSERT, (ROWS + 50, 3, "new", "1.00", None, None))                         # extra
    run(b, "UPDATE t_item SET amount = amount + 1 WHERE id = 777")                    # changed value
    run(a, "UPDATE t_item SET note = NULL WHERE id = 2020")                           # NULL ...
    run(b, "UPDATE t_item SET note = '' WHERE id = 2020")                             # ... vs ''
    # DATETIME(3) vs DATETIME(6): the same instant is no difference; more digits on B is precision only.
    run(a, "UPDATE t_item SET ts = '2024-05-05 10:00:00.123' WHERE id IN (300, 301)")
    run(b, "UPDATE t_item SET ts = '2024-05-05 10:00:00.123000' WHERE id = 300")
    run(b, "UPDATE t_item SET ts = '2024-05-05 10:00:00.123456' WHERE id = 301")
    with _conns(two) as conns:
        report = Checker(RowSource(conns, [("ds_0", "t_item")], label="old"),
                         RowSource(conns, [("ds_1", "t_item")], label="new"), chunk_rows=500, leaf_rows=16,
                         hash=hash_kind).check()
    assert (report.missing, report.extra, report.differing, report.precision, report.collation) == (1, 1, 2, 1, 0)
    by_key = {d.key: d for d in report.differences}
    assert set(by_key) == {(1234,), (ROWS + 50,), (777,), (2020,), (301,)}
    assert by_key[(1234,)].kind == "missing" and by_key[(ROWS + 50,)].kind == "extra"
    (amount,) = by_key[(777,)].columns
    assert (amount.column, str(amount.old), str(amount.new), amount.kind) == ("amount", "777.25", "778.25", "value")
    (note,) = by_key[(2020,)].columns
    assert (note.column, note.old, note.new) == ("note", None, "")
    (ts,) = by_key[(301,)].columns
    assert ts.kind == "precision" and ts.new == dt.datetime(2024, 5, 5, 10, 0, 0, 123456)
    assert not report.consistent
    assert any("datetime(3)" in n and "datetime(6)" in n for n in report.notes)
    assert report.mismatched_chunks == 5  # ids 301, 777, 1234, 2020 and the open last chunk (3050)


def test_collation_only_differences_are_reported_as_such(two: list[str]) -> None:
    _make(two, collation_b="utf8mb4_bin")
    run(two[1], "UPDATE t_item SET label = 'LABEL 3' WHERE id = 30")  # 'Label 3' in A
    run(two[1], "UPDATE t_item SET label = 'other' WHERE id = 31")
    with _conns(two) as conns:
        report = Checker(RowSource(conns, [("ds_0", "t_item")]), RowSource(conns, [("ds_1", "t_item")]),
                         chunk_rows=1000).check()
    assert (report.collation, report.differing, report.missing, report.extra) == (1, 1, 0, 0)
    assert any("collation utf8mb4_general_ci" in n and "utf8mb4_bin" in n for n in report.notes)


def test_sample_mode_compares_random_keys_field_by_field(two: list[str]) -> None:
    _make(two)
    run(two[1], "DELETE FROM t_item WHERE id <= 1500")  # half of B is gone
    with _conns(two) as conns:
        report = Checker(RowSource(conns, [("ds_0", "t_item")]), RowSource(conns, [("ds_1", "t_item")])).sample(
            200, random.Random(7))
    assert report.rows_a == 200
    assert report.missing == 200 - report.rows_b and 50 < report.missing < 150
    assert all(d.kind == "missing" and d.key[0] <= 1500 for d in report.differences)


def test_slot_filtered_sides_over_several_tables(two: list[str]) -> None:
    """Old side: two physical tables filtered to some slots; new side: one table with exactly those rows."""
    old, _ = reshard_configs(two, old_count=1)
    table = old.table("t_order")
    assert table is not None
    wanted = set(range(0, 1024, 3))
    for name in ("t_order_0_0", "t_order_0_1"):
        run(two[0], f"CREATE TABLE {name} (order_id BIGINT NOT NULL PRIMARY KEY, user_id BIGINT NOT NULL, "
                    "note VARCHAR(20))")
    run(two[1], "CREATE TABLE t_order_1_0 (order_id BIGINT NOT NULL PRIMARY KEY, user_id BIGINT NOT NULL, "
                "note VARCHAR(20))")
    rows = [(i, i * 13 % 997, f"n{i}") for i in range(1, 4001)]
    run(two[0], "INSERT INTO t_order_0_0 VALUES (%s, %s, %s)", rows[::2], many=True)
    run(two[0], "INSERT INTO t_order_0_1 VALUES (%s, %s, %s)", rows[1::2], many=True)
    # the reference: slot of each row by the scalar hash, not the checker's batch path
    moving = [r for r in rows if slot_of(r[1], 10) in wanted]
    unwanted = next(r for r in rows if slot_of(r[1], 10) not in wanted)
    run(two[1], "INSERT INTO t_order_1_0 VALUES (%s, %s, %s)", moving, many=True)
    run(two[1], "INSERT INTO t_order_1_0 VALUES (%s, %s, %s)", unwanted, many=False)  # not in these slots
    with _conns(two) as conns:
        slots = SlotFilter.of_table(table, wanted)
        a = RowSource(conns, [("ds_0", "t_order_0_0"), ("ds_0", "t_order_0_1")], slots=slots)
        b = RowSource(conns, [("ds_1", "t_order_1_0")], slots=slots)
        report = Checker(a, b, chunk_rows=700).check()
        assert report.consistent and report.rows_a == report.rows_b == len(moving)
        gone = moving[len(moving) // 2]
        run(two[1], "DELETE FROM t_order_1_0 WHERE order_id = %s", (gone[0],))
        report = Checker(a, b, chunk_rows=700, leaf_rows=8).check()
    assert (report.missing, report.extra, report.duplicated, report.differing) == (1, 0, 0, 0)
    assert report.differences[0].key == (gone[0],)
    # the same key in two tables of a side: a duplicate, whose count alone already differs
    run(two[1], "CREATE TABLE t_order_1_1 LIKE t_order_1_0")
    run(two[1], "INSERT INTO t_order_1_1 VALUES (%s, %s, %s)", moving[0])
    run(two[1], "INSERT INTO t_order_1_0 VALUES (%s, %s, %s)", gone)
    with _conns(two) as conns:
        b2 = RowSource(conns, [("ds_1", "t_order_1_0"), ("ds_1", "t_order_1_1")], slots=slots)
        report = Checker(RowSource(conns, a.parts, slots=slots), b2, chunk_rows=700, leaf_rows=8).check()
    assert (report.missing, report.extra, report.duplicated, report.differing) == (0, 0, 1, 0)
    assert [d.key for d in report.differences] == [(moving[0][0],)]
    assert np.asarray(slots.keep([gone[1], unwanted[1]])).tolist() == [True, False]


def test_ddm_verify_command(two: list[str], tmp_path: Any) -> None:
    import yaml

    _make(two)
    run(two[1], "DELETE FROM t_item WHERE id = 10")
    _, new = reshard_docs(two, old_count=1)
    path = tmp_path / "ddm.yaml"
    path.write_text(yaml.safe_dump(new))
    runner = CliRunner()
    result = runner.invoke(cli, ["verify", "--config", str(path), "--a", "ds_0.t_item", "--b", "ds_1.t_item",
                                 "--chunk-rows", "500"])
    assert result.exit_code == 1, result.output
    assert "1 missing, 0 extra, 0 duplicated, 0 differing" in result.output and "(10): missing" in result.output
    run(two[1], INSERT, _rows(10)[-1])
    result = runner.invoke(cli, ["verify", "--config", str(path), "--a", "ds_0.t_item", "--b", "ds_1.t_item"])
    assert result.exit_code == 0, result.output
    assert "consistent" in result.output
    result = runner.invoke(cli, ["verify", "--config", str(path), "--a", "ds_0.t_item", "--b", "ds_1.t_item",
                                 "--sample", "50"])
    assert result.exit_code == 0 and "50 rows" in result.output, result.output
