"""GTID positions (MariaDB lists, MySQL sets) and how the cut-over's replay filter orders changes by them."""

from __future__ import annotations

import pytest

from ddm_core.cutover.state import Switch
from ddm_core.cutover.sync import _holders
from ddm_core.errors import CutoverError
from ddm_core.migrate.gtid import advance, gtid_at, is_after, is_mariadb, merge, server_gtid

UUID_A = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
UUID_B = "4f22fb58-82db-22f2-af44-d91bb0530673"


def test_mariadb_positions_advance_per_domain_and_order_by_sequence() -> None:
    assert is_mariadb("0-1-42,1-3-7") and is_mariadb("0-2-43") and not is_mariadb(f"{UUID_A}:1-5")
    assert advance("", "0-1-1") == "0-1-1"
    assert advance("0-1-41,1-3-7", "0-2-42") == "0-2-42,1-3-7"  # the promoted server continues domain 0
    assert advance("0-1-41", "2-1-5") == "0-1-41,2-1-5"
    assert is_after("0-2-43", "0-1-42") and not is_after("0-1-42", "0-1-42") and not is_after("0-1-3", "0-2-42")
    assert is_after("1-1-1", "0-1-42"), "a domain the position has not seen yet"
    assert merge(["0-1-40,1-1-9", "0-2-45", ""]) == "0-2-45,1-1-9"


def test_mysql_sets_grow_and_contain() -> None:
    assert advance(f"{UUID_A}:1-5", f"{UUID_A}:6") == f"{UUID_A}:1-6"
    assert advance(f"{UUID_A}:1-5", f"{UUID_A}:8") == f"{UUID_A}:1-5:8"
    assert advance("", f"{UUID_B.upper()}:3") == f"{UUID_B}:3"
    assert merge([f"{UUID_A}:1-5", f"{UUID_A}:6-9,{UUID_B}:1"]) == f"{UUID_A}:1-9,{UUID_B}:1"
    assert not is_after(f"{UUID_A}:4", f"{UUID_A}:1-5") and is_after(f"{UUID_A}:7", f"{UUID_A}:1-5:9")
    assert is_after(f"{UUID_B}:1", f"{UUID_A}:1-5")


def test_server_gtid_reads_mariadb_or_falls_back_to_mysql() -> None:
    def mariadb(sql: str, params: object) -> list[tuple[object, ...]]:
        if sql.startswith("SELECT BINLOG_GTID_POS"):
            return [("0-1-41",)]
        return [("0-1-42, 1-3-7", 1)]

    def mysql(sql: str, params: object) -> list[tuple[object, ...]]:
        if "gtid_binlog_pos" in sql or "BINLOG_GTID_POS" in sql:
            raise RuntimeError("(1193, \"Unknown system variable 'gtid_binlog_pos'\")")
        return [(f"{UUID_A}:1-27,\n{UUID_B}:1-3", 7)]

    assert server_gtid(mariadb) == ("0-1-42,1-3-7", 1)
    assert gtid_at(mariadb, "binlog.000001", 400) == "0-1-41"
    assert server_gtid(mysql) == (f"{UUID_A}:1-27,{UUID_B}:1-3", 7)
    assert gtid_at(mysql, "binlog.000001", 400) is None


OLD, NEW = "127.0.0.1:3307", "127.0.0.1:3308"


def _switch(at: tuple[object, ...]) -> Switch:
    """Buckets 1 and 2 moved to the shards at ``at`` on the old legacy primary."""
    return Switch(frozenset({1, 2}), "shards", {OLD: at}, {})


def test_a_switch_orders_changes_by_file_on_its_server_and_by_gtid_on_a_promoted_replica() -> None:
    switch = _switch(("binlog.000001", 900, "0-1-50", 1))
    on_shards = [False, True, True, False]
    # On the server that recorded it: by file and offset.
    assert _holders([switch], "legacy", OLD, ("binlog.000001", 901, "0-1-51", 1), 4).tolist() == on_shards
    assert not _holders([switch], "legacy", OLD, ("binlog.000001", 900, "0-1-50", 1), 4).any()
    # The promoted replica has its own files (same names, other offsets): its changes are ordered by GTID.
    assert _holders([switch], "legacy", NEW, ("binlog.000001", 300, "0-1-51", 2), 4).tolist() == on_shards
    assert not _holders([switch], "legacy", NEW, ("binlog.000001", 5000, "0-1-49", 2), 4).any()
    assert _holders([switch], "legacy", NEW, ("binlog.000002", 10, "0-2-60", 2), 4).tolist() == on_shards
    # Same address, another server behind it: GTID too.
    assert not _holders([switch], "legacy", OLD, ("binlog.000001", 5000, "0-1-49", 2), 4).any()
    # A switch recorded without GTIDs cannot be placed on another server: refused, never guessed.
    with pytest.raises(CutoverError, match="without GTIDs"):
        _holders([_switch(("binlog.000001", 900))], "legacy", NEW, ("binlog.000001", 300, "0-1-51", 2), 4)
