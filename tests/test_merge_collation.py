"""Strings merged across shards compare as their collation says, proven against MariaDB.

Three levels, each against the real server (MariaDB on 127.0.0.1:3306):

* the keys (:mod:`ddm_core.merge.collation`): every BMP character under
  ``utf8mb4_general_ci`` and the Unicode collations (and the supplementary
  planes that hold characters, under ``utf8mb4_unicode_ci`` /
  ``utf8mb4_unicode_520_ci``), and every latin1 byte under the latin1
  collations, is weighed as ``WEIGHT_STRING`` weighs it; MariaDB weighs two
  adjacent characters as each alone (no contractions: what the Unicode keys
  rely on); generated strings (case, accents, ligatures, combining marks,
  trailing spaces, tabs and newlines before and after spaces) compare under
  every supported collation exactly as ``STRCMP`` says;
* the merge engine on its own (both heap-merge twins): the rows of the report
  that found the problem;
* the executor and ``ddm proxy`` over two data sources against the same rows in
  one unsharded table: ORDER BY with LIMIT / OFFSET and tie-breaks, MIN / MAX,
  GROUP BY, DISTINCT and COUNT(DISTINCT) on generated data.

How results are compared: rows in a total order (the id breaks ties) must be
equal value for value, types included. Where one table shows *a* spelling of
equal strings — the value of a group, of a DISTINCT row, of MIN / MAX — the
spellings must be equal under the collation (and be ``str``), and every count
exact: MariaDB shows the first row of its scan, ddm-core the first in unit order.
"""

from __future__ import annotations

import fnmatch
import functools
import itertools
import random
import unicodedata
from collections import Counter
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ddm_core._fast import Implementation
from ddm_core.errors import CollationError
from ddm_core.execute import Executor
from ddm_core.merge import UnitRows, merge_results
from ddm_core.merge import uca
from ddm_core.merge.collation import BINARY, SUPPORTED, collation_for, collation_name, pad_key
from ddm_core.merge.spec import Aggregate, MergeSpec
from ddm_core.proxy import native_password_hash
from test_oracle import mariadb_oracle
from test_proxy_support import PASSWORD, USER, ProxyProcess, connect, write_config

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]

GENERAL, BIN, LATIN1, NOPAD_BIN, UNICODE = 45, 46, 8, 1070, 224

#: Characters whose comparisons differ between collations: case, accents, ß and ligatures (expansions
#: under the Unicode collations), Swedish letters, Cyrillic short i, Greek, the euro sign (byte 0x80 in
#: latin1), Thai and Lao vowels written before their consonant, combining marks (ignorable), spaces and
#: the characters weighing below or as the space (tab, newline, NEL, line separator, no-break space, NUL).
UTF8_ALPHABET = "aAáÁäÄbBcCeEéÉßsSåÅöÖøØüÜyYzZйиЙΣσς€ÆæŉnŒœﬁẞเกເກ\u0301\u0308 \t\n\x00\x85\u2028\xa0"
LATIN1_ALPHABET = "".join(ch for ch in UTF8_ALPHABET if ch.encode("cp1252", "ignore"))

strings = st.text(alphabet=UTF8_ALPHABET, max_size=6)
latin1_strings = st.text(alphabet=LATIN1_ALPHABET, max_size=6)

#: Collation ids by name (the ones ddm-core knows, matched or refused).
ID = {collation_name(cid): cid for cid in range(2048) if not collation_name(cid).startswith("collation id")}
#: Every collation ddm-core matches but ``binary``: each is compared with ``STRCMP`` below.
TEXT_COLLATIONS = [ID[name] for name in (
    "latin1_bin", "latin1_nopad_bin", "latin1_swedish_ci", "latin1_swedish_nopad_ci",
    "utf8mb3_bin", "utf8mb3_general_ci", "utf8mb3_general_nopad_ci", "utf8mb3_nopad_bin",
    "utf8mb3_unicode_520_ci", "utf8mb3_unicode_520_nopad_ci", "utf8mb3_unicode_ci", "utf8mb3_unicode_nopad_ci",
    "utf8mb4_bin", "utf8mb4_general_ci", "utf8mb4_general_nopad_ci", "utf8mb4_nopad_bin",
    "utf8mb4_unicode_520_ci", "utf8mb4_unicode_520_nopad_ci", "utf8mb4_unicode_ci", "utf8mb4_unicode_nopad_ci",
)]  # fmt: skip


def key_of(collation_id: int) -> Callable[[str], Any]:
    key = collation_for(collation_id).key
    return key if key is not None else (lambda s: s)


def sign(x: int) -> int:
    return (x > 0) - (x < 0)


# -- the server ---------------------------------------------------------------------------------


Sharded = tuple[dict[str, Any], Executor, Any]  # configuration, executor over it, the reference connection


@pytest.fixture(scope="module")
def shards() -> Iterator[Sharded]:
    """``t_s`` over two data sources (4 tables) and whole in one reference database (all dropped afterwards)."""
    used: dict[str, Any] = {}

    def config(urls: dict[str, Any]) -> dict[str, Any]:
        used.update(shard_config(urls))
        return used

    with mariadb_oracle("ddm_colx", ["ds_0", "ds_1"], config) as backend:
        backend.executor.execute(TABLE_DDL).close()
        query(backend.conn, TABLE_DDL)
        yield used, backend.executor, backend.conn


@pytest.fixture(scope="module")
def server(shards: Sharded) -> Any:
    """A raw connection to a fresh database: the reference one."""
    return shards[2]


def query(conn: Any, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(sql, params)
        return list(cur.fetchall())


def assert_same_order(keys: dict[Any, Any], weights: dict[Any, Any]) -> None:
    """``keys`` orders (and ties) the characters exactly as the server's ``weights`` do."""
    chars = sorted(weights, key=lambda c: (weights[c], c))
    for a, b in itertools.pairwise(chars):
        want = (weights[a] > weights[b]) - (weights[a] < weights[b])
        got = (keys[a] > keys[b]) - (keys[a] < keys[b])
        assert got == want, f"U+{ord(a):04X} vs U+{ord(b):04X}: the server says {want}, the key {got}"


# -- the keys against the server ------------------------------------------------------------------


def test_general_ci_weighs_every_bmp_character_as_mariadb(server: Any) -> None:
    rows = query(server, (
        # Each character followed by "x": a lone space would be trailing padding, weighed as nothing.
        "SELECT seq, WEIGHT_STRING(CONCAT(CONVERT(CHAR(seq USING utf32) USING utf8mb4), 'x') "
        "COLLATE utf8mb4_general_ci) "
        "FROM seq_0_to_65535 WHERE seq NOT BETWEEN 55296 AND 57343"
    ))  # fmt: skip
    assert len(rows) == 63488
    weights = {chr(cp): w for cp, w in rows}
    key = key_of(GENERAL)
    assert_same_order({ch: key(ch + "x") for ch in weights}, weights)
    # Beyond the BMP every character weighs as U+FFFD.
    for ch in ("😀", "𝔘", "\U00020000"):
        (same,), = query(server, "SELECT %s = _utf8mb4 X'EFBFBD' COLLATE utf8mb4_general_ci", [ch])
        assert same == 1 and key(ch) == key("\ufffd")


@pytest.mark.parametrize(
    "collation", ["latin1_swedish_ci", "latin1_swedish_nopad_ci", "latin1_bin", "latin1_nopad_bin"]
)
def test_latin1_collations_weigh_every_byte_as_mariadb(server: Any, collation: str) -> None:
    rows = query(server, (
        "SELECT CONVERT(CONVERT(UNHEX(LPAD(HEX(seq), 2, '0')) USING latin1) USING utf8mb4), "
        f"WEIGHT_STRING(CONCAT(CONVERT(UNHEX(LPAD(HEX(seq), 2, '0')) USING latin1), 'x') COLLATE {collation}) "
        "FROM seq_0_to_255"
    ))  # fmt: skip
    weights = dict(rows)
    assert len(weights) == 256
    cid = next(c for c in SUPPORTED if collation_name(c) == collation)
    key = key_of(cid)
    assert_same_order({ch: key(ch + "x") for ch in weights}, weights)


#: The Unicode collations that ignore trailing spaces (their NO PAD twins share the weights).
UNICODE_PADDED = ["utf8mb4_unicode_ci", "utf8mb3_unicode_ci", "utf8mb4_unicode_520_ci", "utf8mb3_unicode_520_ci"]


@pytest.mark.parametrize("collation", UNICODE_PADDED)
def test_unicode_collations_weigh_every_character_as_mariadb(server: Any, collation: str) -> None:
    charset = collation.split("_")[0]
    # Every BMP character; under utf8mb4 also every one of planes 1, 2 and 14 (where 5.2.0 lists
    # characters, and ignorable variation selectors) and every 61st code point of the others.
    top, where = 0xFFFF, "seq NOT BETWEEN 55296 AND 57343"
    if charset == "utf8mb4":
        top, where = 0x10FFFF, where + " AND (seq < 196608 OR seq BETWEEN 917504 AND 983039 OR seq % 61 = 0)"
    rows = query(server, (
        f"SELECT seq, WEIGHT_STRING(CONCAT(CONVERT(CHAR(seq USING utf32) USING {charset}), 'x') COLLATE {collation}) "
        f"FROM seq_0_to_{top} WHERE {where}"
    ))  # fmt: skip
    assert len(rows) == {"utf8mb3": 63488, "utf8mb4": 274063}[charset]  # the BMP but its surrogates (and the planes)
    weights = {chr(cp): w for cp, w in rows}
    key = key_of(ID[collation])
    assert_same_order({ch: key(ch + "x") for ch in weights}, weights)
    # A no-break space weighs as the space: trailing, it is padding too.
    (same,), = query(server, f"SELECT CONVERT(_utf8mb4 X'61C2A0' USING {charset}) COLLATE {collation} = 'a'")
    assert same == 1 and key("a\xa0") == key("a ") == key("a")


def adjacency_misses(server: Any, collation: str, first: Sequence[int], second: Sequence[int]) -> list[Any]:
    """Pairs of code points MariaDB weighs otherwise than each character alone (at most 20)."""
    for table, codes in (("pair_first", first), ("pair_second", second)):
        query(server, f"CREATE OR REPLACE TEMPORARY TABLE {table} (cp INT PRIMARY KEY)")
        with server.cursor() as cur:
            cur.executemany(f"INSERT INTO {table} VALUES (%s)", [(c,) for c in sorted(set(codes))])
    char = "CONVERT(CHAR({} USING utf32) USING utf8mb4)"
    pair = f"CONCAT({char.format('f.cp')}, {char.format('s.cp')})"
    alone = f"CONCAT(WEIGHT_STRING({char.format('f.cp')} COLLATE {collation}), " \
            f"WEIGHT_STRING({char.format('s.cp')} COLLATE {collation}))"  # fmt: skip
    return query(server, (
        f"SELECT f.cp, s.cp FROM pair_first f JOIN pair_second s "
        f"WHERE NOT (WEIGHT_STRING({pair} COLLATE {collation}) <=> {alone}) LIMIT 20"
    ))  # fmt: skip


@pytest.mark.parametrize("collation", ["utf8mb4_unicode_ci", "utf8mb4_unicode_520_ci"])
def test_mariadb_weighs_adjacent_characters_one_by_one(server: Any, collation: str) -> None:
    # A Unicode key is its characters' weights one after the other: it relies on the collation
    # having no contractions. Letters of Latin, Greek, Cyrillic, Thai, Lao (the vowels written
    # before their consonant) and Tibetan, and a sample of the BMP, each followed by every
    # combining mark, every Thai and Lao character, every printable ASCII character and a sample.
    rng = random.Random(23)
    bmp = [c for c in range(0x10000) if not 0xD800 <= c < 0xE000]
    scripts = [*range(0x41, 0x5B), *range(0x61, 0x7B), *range(0xC0, 0x250), *range(0x370, 0x530)]
    thai_lao = [*range(0xE01, 0xE5C), *range(0xE81, 0xEDE)]
    marks = [c for c in bmp if unicodedata.category(chr(c)).startswith("M")]
    first = scripts + thai_lao + [*range(0xF00, 0xFD0)] + rng.sample(bmp, 800)
    second = marks + thai_lao + [*range(0x20, 0x7F)] + rng.sample(bmp, 200)
    assert adjacency_misses(server, collation, first, second) == []


def test_the_adjacency_probe_finds_a_contraction(server: Any) -> None:
    # The probe above can fail: Czech sorts "ch" as one letter after "h".
    misses = adjacency_misses(server, "utf8mb4_czech_ci", [ord("c"), ord("C"), ord("a")], [ord("h"), ord("a")])
    assert (ord("c"), ord("h")) in misses and (ord("a"), ord("a")) not in misses


def padded_cmp(a: Sequence[int], b: Sequence[int], space: int) -> int:
    """MariaDB's PAD SPACE comparison of two weight lists: the shorter goes on with spaces."""
    n = max(len(a), len(b))
    x, y = [*a] + [space] * (n - len(a)), [*b] + [space] * (n - len(b))
    return (x > y) - (x < y)


@settings(max_examples=400, deadline=None, database=None)
@given(st.lists(st.text(st.characters(exclude_categories=("Cs",)) | st.sampled_from(UTF8_ALPHABET), max_size=5),
                min_size=2, max_size=6))  # fmt: skip
def test_unicode_keys_compare_as_the_weight_lists(values: list[str]) -> None:
    # Any characters (every plane, ignorable ones, expansions): a key compares as MariaDB compares
    # the strings' weight lists, PAD SPACE or NO PAD (the weights are the server's: see above).
    for version, padded in itertools.product(uca.VERSIONS, (True, False)):
        weights = uca.table(version).weights
        space = weights(0x20)[0]
        key = uca.key(version, padded)
        for a, b in itertools.product(values, repeat=2):
            wa, wb = ([w for ch in s for w in weights(ord(ch))] for s in (a, b))
            want = padded_cmp(wa, wb, space) if padded else (wa > wb) - (wa < wb)
            assert sign((key(a) > key(b)) - (key(a) < key(b))) == want, (version, padded, a, b)


def test_a_damaged_weight_file_is_refused_by_name() -> None:
    data = resources.files("ddm_core.merge").joinpath("data", uca.VERSIONS["400"]).read_bytes()
    with pytest.raises(CollationError, match="x.bin is not a ddm-core UCA weight file"):
        uca.UcaTable(b"PK" + data, "x.bin")
    with pytest.raises(CollationError, match="x.bin is damaged"):
        uca.UcaTable(data[:-40], "x.bin")


def test_the_weight_files_ship_with_the_package() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["ddm_core.merge"]
    manifest = (ROOT / "MANIFEST.in").read_text(encoding="utf-8").splitlines()
    for name in uca.VERSIONS.values():
        assert (ROOT / "src" / "ddm_core" / "merge" / "data" / name).is_file()
        assert any(fnmatch.fnmatch(f"data/{name}", p) for p in patterns), f"{name} is not in the wheel"
    assert "recursive-include src/ddm_core/merge/data *.bin" in manifest  # the sdist


def test_every_matched_collation_is_compared_with_strcmp() -> None:
    assert set(TEXT_COLLATIONS) == SUPPORTED - {BINARY}


@pytest.fixture(scope="module")
def strcmp_table(server: Any) -> str:
    columns = ", ".join(
        f"c{cid} VARCHAR(12) CHARACTER SET {collation_name(cid).split('_')[0]} COLLATE {collation_name(cid)}"
        for cid in TEXT_COLLATIONS
    )
    query(server, f"CREATE TABLE strs (i INT PRIMARY KEY, {columns})")
    return "strs"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture],
          database=None)  # fmt: skip
@given(utf8=st.lists(strings, min_size=2, max_size=10), latin1=st.lists(latin1_strings, min_size=10, max_size=10))
def test_keys_compare_strings_as_mariadb_strcmp(
    server: Any, strcmp_table: str, utf8: list[str], latin1: list[str]
) -> None:
    query(server, f"DELETE FROM {strcmp_table}")
    values = []
    for i, s in enumerate(utf8):
        values.append([i] + [latin1[i] if collation_name(cid).startswith("latin1") else s for cid in TEXT_COLLATIONS])
    with server.cursor() as cur:
        cur.executemany(f"INSERT INTO {strcmp_table} VALUES ({', '.join(['%s'] * len(values[0]))})", values)
    pairs = ", ".join(f"STRCMP(a.c{cid}, b.c{cid})" for cid in TEXT_COLLATIONS)
    got = query(server, f"SELECT a.i, b.i, {pairs} FROM {strcmp_table} a JOIN {strcmp_table} b")
    stored = {row[0]: row[1:] for row in values}
    for a, b, *cmps in got:
        for n, (cid, server_says) in enumerate(zip(TEXT_COLLATIONS, cmps)):
            key = key_of(cid)
            x, y = key(stored[a][n]), key(stored[b][n])
            assert sign((x > y) - (x < y)) == server_says, (
                f"{collation_name(cid)}: {stored[a][n]!r} vs {stored[b][n]!r}: the server says {server_says}"
            )


def test_pad_space_keys() -> None:
    # The shorter string is padded with spaces: a tab sorts before the padding, "x" after it.
    assert pad_key("a") == pad_key("a   ")
    assert pad_key("a\t") < pad_key("a") < pad_key("a x") < pad_key("ax")
    assert pad_key("a \t") < pad_key("a") and pad_key("a\t") < pad_key("a \t")
    assert pad_key("") == pad_key(" ") and pad_key("\n") < pad_key("")


def test_an_unsupported_collation_is_refused_by_name() -> None:
    # A language collation tailors the Unicode weights (German phone-book order: ä = ae).
    with pytest.raises(CollationError) as info:
        collation_for(ID["utf8mb4_german2_ci"], "name")
    assert "utf8mb4_german2_ci" in str(info.value) and "'name'" in str(info.value)
    assert info.value.collation == "utf8mb4_german2_ci"
    assert "utf8mb4_unicode_ci" in str(info.value)  # among the ones to compare on instead
    with pytest.raises(CollationError, match="collation id 99999"):
        collation_for(99999)


# -- the merge engine on its own --------------------------------------------------------------------

REPORT = list(enumerate(["a", "a", "A", "B", "B", "b ", "c", "e", "é", "Zz"], 1))  # (id, name) of the report


def unit_rows(
    rows: list[tuple[Any, ...]], order: Sequence[tuple[int, bool]], collation_id: int
) -> list[tuple[Any, ...]]:
    """Rows as one shard returns them: sorted by ``(column, descending)`` keys under the collation."""
    key = key_of(collation_id)
    out = list(rows)
    for col, desc in reversed(order):  # stable sorts, least significant key first
        out.sort(key=lambda r: key(r[col]) if isinstance(r[col], str) else r[col], reverse=desc)
    return out


@pytest.mark.parametrize("collation_id", [GENERAL, UNICODE], ids=collation_name)
def test_merge_engine_follows_the_collation(impl: Implementation, collation_id: int) -> None:
    merge = functools.partial(merge_results, heap_merge=impl.merge.heap_merge)
    collation = collation_for(collation_id)
    key = key_of(collation_id)
    odd, even = [r for r in REPORT if r[0] % 2], [r for r in REPORT if not r[0] % 2]
    desc = (("id",), ("name",))

    def units(order: tuple[tuple[int, bool], ...]) -> list[UnitRows]:
        return [UnitRows(desc, unit_rows(part, order, collation_id)) for part in (odd, even)]

    order = ((1, False), (0, False))
    assert [r[0] for r in merge(MergeSpec(order_by=order), units(order), collations=[None, collation])] == list(
        range(1, 11)
    )
    # DESC with a window: equal names fall through to the id.
    order = ((1, True), (0, False))
    windowed = merge(MergeSpec(order_by=order, offset=2, limit=4), units(order), collations=[None, collation])
    assert [r[0] for r in windowed] == [9, 7, 4, 5]

    # MIN / MAX over partial rows: Zz is the largest, a spelling of "a" the smallest.
    partial = [UnitRows((("mx",), ("mn",)), [("é", "a")]), UnitRows((("mx",), ("mn",)), [("Zz", "A")])]
    spec = MergeSpec(aggregates=(Aggregate("MAX", 0, (0,)), Aggregate("MIN", 1, (1,))))
    assert merge(spec, partial, collations=[collation, collation]).fetchall() == [("Zz", "a")]

    # GROUP BY name with COUNT(*), streamed (units sorted by name) and hashed (ORDER BY the count).
    def grouped(order_by: tuple[tuple[int, bool], ...]) -> list[tuple[Any, ...]]:
        parts = []
        for part in (odd, even):
            counts: dict[str, list[Any]] = {}
            for _, name in part:
                counts.setdefault(key(name), [name, 0])[1] += 1
            rows = unit_rows([tuple(v) for v in counts.values()], ((0, False),), collation_id)
            parts.append(UnitRows((("name",), ("n",)), rows))
        spec = MergeSpec(group_by=(0,), aggregates=(Aggregate("COUNT", 1, (1,)),), order_by=order_by)
        return merge(spec, parts, collations=[collation, None]).fetchall()

    want = {"a": 3, "b": 3, "c": 1, "e": 2, "zz": 1}
    for order_by in (((0, False),), ((1, True), (0, False))):
        got = grouped(order_by)
        assert {key(n): c for n, c in got} == {key(n): c for n, c in want.items()}
        assert len(got) == 5

    # DISTINCT and COUNT(DISTINCT): five names.
    sorted_names = [unit_rows([(n,) for _, n in part], ((0, False),), collation_id) for part in (odd, even)]
    names = [UnitRows((("name",),), rows) for rows in sorted_names]
    assert len(merge(MergeSpec(distinct=True, order_by=((0, False),)), names, collations=[collation]).fetchall()) == 5
    spec = MergeSpec(aggregates=(Aggregate("COUNT", 0, (0,), distinct=True),))
    names = [UnitRows((("n",),), rows) for rows in sorted_names]
    assert merge(spec, names, collations=[collation]).fetchall() == [(5,)]


_SPELLINGS = ["a", "A", "a ", "A  ", "á", "b", "B", "", " ", "ß", "ss", "Zz", "zZ "]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    parts=st.lists(st.lists(st.tuples(st.sampled_from([*_SPELLINGS, None]), st.sampled_from([1, 2, None]))), min_size=1, max_size=4),
    name_first=st.booleans(), name_desc=st.booleans(), n_desc=st.booleans(), both=st.booleans(),
    collation_id=st.sampled_from([GENERAL, BIN, UNICODE]), offset=st.integers(0, 3), limit=st.none() | st.integers(0, 5),
)  # fmt: skip
def test_distinct_sorted_on_its_columns_keeps_what_the_set_keeps(
    impl: Implementation, parts: list[list[tuple[Any, Any]]], name_first: bool, name_desc: bool, n_desc: bool,
    both: bool, collation_id: int, offset: int, limit: int | None,
) -> None:  # fmt: skip
    """A DISTINCT whose columns are exactly the sort's keeps the first row of each run of equal rows (the
    engine's path without a set); with a HAVING in the way it takes the set of rows seen: same rows, same order."""
    merge = functools.partial(merge_results, heap_merge=impl.merge.heap_merge)
    collation = collation_for(collation_id)
    if both:
        order = ((0, name_desc), (1, n_desc)) if name_first else ((1, n_desc), (0, name_desc))
        desc, rows = (("name",), ("n",)), parts
    else:
        order, desc, rows = ((0, name_desc),), (("name",),), [[r[:1] for r in part] for part in parts]
    units = [UnitRows(desc, _sorted_with_nulls(part, order, collation_id)) for part in rows]
    collations = [collation, None][: len(desc)]
    runs = merge(MergeSpec(distinct=True, order_by=order, offset=offset, limit=limit), units, collations=collations)
    spec = MergeSpec(distinct=True, order_by=order, offset=offset, limit=limit, having=lambda row: True)
    seen = merge(spec, [UnitRows(u.description, list(u.rows)) for u in units], collations=collations)
    got, want = runs.fetchall(), seen.fetchall()
    assert [tuple(map(repr, r)) for r in got] == [tuple(map(repr, r)) for r in want]


def _sorted_with_nulls(rows: list[tuple[Any, ...]], order: tuple[tuple[int, bool], ...], collation_id: int
                      ) -> list[tuple[Any, ...]]:  # fmt: skip
    """:func:`unit_rows` with NULLs where MariaDB puts them: first ascending, last descending."""
    key = key_of(collation_id)
    out = list(rows)
    for col, desc in reversed(order):
        out.sort(key=lambda r: (False,) if r[col] is None else (True, key(r[col]) if isinstance(r[col], str) else r[col]),
                 reverse=desc)  # fmt: skip
    return out


# -- through the executor and the proxy, against one unsharded table -------------------------------

#: The sharded table's string columns: one per collation below, all holding the same string.
STRING_COLUMNS = {
    "g": "utf8mb4_general_ci", "b": "utf8mb4_bin", "l": "latin1_swedish_ci", "n": "utf8mb4_general_nopad_ci",
    "u": "utf8mb4_unicode_ci", "v": "utf8mb4_unicode_520_nopad_ci",
    "r": "utf8mb4_german2_ci",  # refused: German phone-book order tailors the Unicode weights
}  # fmt: skip
TABLE_DDL = "CREATE TABLE t_s (id INT NOT NULL PRIMARY KEY, " + ", ".join(
    f"{col} VARCHAR(12) CHARACTER SET {name.split('_')[0]} COLLATE {name}" for col, name in STRING_COLUMNS.items()
) + ")"
#: The columns of collations ddm-core matches.
COLUMNS = {col: ID[name] for col, name in STRING_COLUMNS.items() if col != "r"}


def shard_config(urls: dict[str, Any]) -> dict[str, Any]:
    names = list(urls)
    return {
        "dataSources": urls,
        "pool": {"maxSize": 6, "minIdle": 1, "acquireTimeoutMs": 3000},
        "tables": [{"logicTable": "t_s", "shardKey": "id", "algorithm": "mod", "shardCount": len(names),
                    "databases": names, "tablePerShard": 2}],
        "defaultDataSource": names[0],
        "runtime": {"allowFullRoute": True, "allowDmlFullRoute": True, "fullRouteThreshold": 8, "sqlComment": False},
    }  # fmt: skip


def load(executor: Executor, ref: Any, rows: list[tuple[int, str | None]]) -> None:
    """``(id, string)`` rows, the string in every string column, sharded and into the reference table."""
    executor.execute("DELETE FROM t_s").close()
    query(ref, "DELETE FROM t_s")
    if not rows:
        return
    row = "(" + ", ".join(["%s"] * (1 + len(STRING_COLUMNS))) + ")"
    sql = f"INSERT INTO t_s (id, {', '.join(STRING_COLUMNS)}) VALUES " + ", ".join([row] * len(rows))
    flat = [v for i, s in rows for v in (i, *[s] * len(STRING_COLUMNS))]
    executor.execute(sql, flat).close()
    query(ref, sql, flat)


def same_under(collation_id: int | None, got: Any, want: Any) -> bool:
    """Equal values of equal types; strings equal under the collation (any spelling one table could show)."""
    if got is None or want is None:
        return got is want
    if type(got) is not type(want):
        return False
    if isinstance(got, str) and collation_id is not None:
        key = key_of(collation_id)
        return bool(key(got) == key(want))
    return bool(got == want)


def assert_rows(
    got: list[tuple[Any, ...]], want: list[tuple[Any, ...]], collations: Sequence[int | None], sql: str
) -> None:
    assert len(got) == len(want), f"{sql}: {len(got)} rows, one table {len(want)}\n{got}\n{want}"
    for g, w in zip(got, want):
        assert all(same_under(c, x, y) for c, x, y in zip(collations, g, w)), f"{sql}:\n  got  {got}\n  want {want}"


def assert_groups(got: list[tuple[Any, ...]], want: list[tuple[Any, ...]], collation_id: int, sql: str) -> None:
    """Rows (group value, exact values...): the same groups under the collation, in any order."""
    key = key_of(collation_id)

    def table(rows: list[tuple[Any, ...]]) -> Counter[tuple[Any, ...]]:
        assert all(r[0] is None or type(r[0]) is str for r in rows), rows
        return Counter((None if r[0] is None else key(r[0]), *((type(v), v) for v in r[1:])) for r in rows)

    assert table(got) == table(want), f"{sql}:\n  got  {got}\n  want {want}"


#: (id, string) rows (latin1's alphabet, which every column can hold). No string ends in NUL: under a
#: NO PAD collation MariaDB 10.11 itself orders '' before '\x00' for ORDER BY but after it for GROUP BY
#: ... ORDER BY (seen with utf8mb4_general_nopad_ci), so no merge can match both.
generated_rows = st.lists(
    st.tuples(st.integers(1, 10_000), st.one_of(st.none(), latin1_strings.map(lambda v: v.rstrip("\x00")))),
    max_size=24, unique_by=lambda r: r[0],
)


def queries(draw: st.DrawFn) -> tuple[str, str, list[int | None]]:
    """One query over a drawn column: (kind, sql, collation per result column)."""
    col = draw(st.sampled_from(sorted(COLUMNS)))
    cid = COLUMNS[col]
    direction = draw(st.sampled_from(["", " DESC"]))
    window = draw(st.sampled_from(["", " LIMIT 5", " LIMIT 4 OFFSET 2", " LIMIT 3 OFFSET 7"]))
    kind = draw(st.sampled_from(["order", "minmax", "group", "group_by_count", "distinct", "count_distinct"]))
    if kind == "order":
        tie = draw(st.sampled_from(["id", "id DESC"]))
        return kind, f"SELECT id, {col} FROM t_s ORDER BY {col}{direction}, {tie}{window}", [None, cid]
    if kind == "minmax":
        return kind, f"SELECT MIN({col}), MAX({col}), COUNT({col}) FROM t_s", [cid, cid, None]
    if kind == "group":
        sql = f"SELECT {col}, COUNT(*), MIN(id) FROM t_s GROUP BY {col} ORDER BY {col}{direction}"
        return kind, sql, [cid, None, None]
    if kind == "group_by_count":
        return kind, f"SELECT {col}, COUNT(*) FROM t_s GROUP BY {col} ORDER BY COUNT(*) DESC, {col}", [cid, None]
    if kind == "distinct":
        return kind, f"SELECT DISTINCT {col} FROM t_s ORDER BY {col}{direction}{window}", [cid]
    return kind, f"SELECT COUNT(DISTINCT {col}), COUNT(*) FROM t_s", [None, None]


def assert_same_answer(kind: str, sql: str, collations: list[int | None], got: list[Any], want: list[Any]) -> None:
    """``got`` is an answer one table could have given to ``sql``."""
    if kind == "order":
        assert_rows(got, want, [None, None], sql)  # total order: the very rows, exact spellings
    elif kind in ("group", "group_by_count", "distinct"):
        # Ordered by the group value (then unique): the same groups in the same order under the collation.
        assert_rows(got, want, collations, sql)
        assert_groups(got, want, collations[0] or GENERAL, sql)
    else:
        assert_rows(got, want, collations, sql)


def run_executor(executor: Executor, sql: str) -> list[tuple[Any, ...]]:
    with executor.execute(sql) as result:
        return result.fetchall()


@settings(max_examples=80, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])  # fmt: skip
@given(rows=generated_rows, data=st.data())
def test_executor_merges_strings_as_one_table(
    shards: Sharded, rows: list[tuple[int, str | None]], data: st.DataObject
) -> None:
    _, executor, ref = shards
    load(executor, ref, rows)
    for _ in range(4):
        kind, sql, collations = data.draw(st.composite(queries)(), label="query")
        assert_same_answer(kind, sql, collations, run_executor(executor, sql), query(ref, sql))


@pytest.mark.parametrize("col", ["g", "u"])
def test_executor_answers_the_report(shards: Sharded, col: str) -> None:
    _, executor, ref = shards
    load(executor, ref, REPORT)
    assert run_executor(executor, f"SELECT MAX({col}), MIN({col}) FROM t_s")[0][0] == "Zz"
    sql = f"SELECT id, {col} FROM t_s ORDER BY {col}, id"
    assert run_executor(executor, sql) == query(ref, sql)
    sql = f"SELECT id, {col} FROM t_s ORDER BY {col} DESC, id LIMIT 4 OFFSET 2"
    assert run_executor(executor, sql) == query(ref, sql)
    sql = f"SELECT {col}, COUNT(*) FROM t_s GROUP BY {col}"
    assert_groups(run_executor(executor, sql), query(ref, sql), COLUMNS[col], sql)
    assert len(run_executor(executor, f"SELECT DISTINCT {col} FROM t_s")) == 5
    assert run_executor(executor, f"SELECT COUNT(DISTINCT {col}) FROM t_s") == [(5,)]


def test_executor_refuses_a_collation_it_cannot_match(shards: Sharded) -> None:
    _, executor, ref = shards
    load(executor, ref, REPORT)
    with pytest.raises(CollationError) as info:
        run_executor(executor, "SELECT id, r FROM t_s ORDER BY r, id")
    assert "utf8mb4_german2_ci" in str(info.value) and "'r'" in str(info.value)
    with pytest.raises(CollationError, match="utf8mb4_german2_ci"):
        run_executor(executor, "SELECT r, COUNT(*) FROM t_s GROUP BY r")
    # Not compared, not refused: the column is only carried along.
    sql = "SELECT id, r FROM t_s ORDER BY id"
    assert run_executor(executor, sql) == query(ref, sql)
    sql = "SELECT id, r FROM t_s ORDER BY r COLLATE utf8mb4_bin, id"  # the caller picks a comparable collation
    assert run_executor(executor, sql) == query(ref, sql)


def test_proxy_merges_strings_as_one_table(
    shards: Sharded, tmp_path: Any
) -> None:
    config, executor, ref = shards
    load(executor, ref, [*REPORT, (20, "É"), (21, None), (22, "Æ"), (23, "ae"), (24, "ß"), (25, "ss")])
    proxied = {**config, "proxy": {"users": [{"name": USER, "passwordHash": native_password_hash(PASSWORD)}]}}
    proxy = ProxyProcess(write_config(proxied, tmp_path / "collation.yaml")).start()
    try:
        client = connect(proxy.port)
        try:
            for col, cid in sorted(COLUMNS.items()):
                checks = [
                    ("order", f"SELECT id, {col} FROM t_s ORDER BY {col}, id", [None, cid]),
                    ("order", f"SELECT id, {col} FROM t_s ORDER BY {col} DESC, id LIMIT 4 OFFSET 2", [None, cid]),
                    ("minmax", f"SELECT MIN({col}), MAX({col}) FROM t_s", [cid, cid]),
                    ("group", f"SELECT {col}, COUNT(*) FROM t_s GROUP BY {col} ORDER BY {col}", [cid, None]),
                    ("group_by_count", f"SELECT {col}, COUNT(*) FROM t_s GROUP BY {col} "
                                       f"ORDER BY COUNT(*) DESC, {col}", [cid, None]),
                    ("distinct", f"SELECT DISTINCT {col} FROM t_s ORDER BY {col}", [cid]),
                    ("count_distinct", f"SELECT COUNT(DISTINCT {col}) FROM t_s", [None]),
                ]  # fmt: skip
                for kind, sql, collations in checks:
                    assert_same_answer(kind, sql, collations, query(client, sql), query(ref, sql))
        finally:
            client.close()
    finally:
        proxy.stop()


@settings(max_examples=300, deadline=None, database=None)
@given(st.lists(st.one_of(st.none(), strings), max_size=8))
def test_plain_strings_need_no_keys(values: list[str | None]) -> None:
    # When utf8mb4_bin says Python's order is already its order for a column, it is.
    collation = collation_for(BIN)
    assert collation.plain is not None and collation.key is not None
    rows = [(v,) for v in values]
    if not collation.plain(rows, 0):
        assert any(v is not None and (v.endswith(" ") or not v.isprintable()) for v in values)
        return
    strs = [v for v in values if v is not None]
    for a, b in itertools.product(strs, repeat=2):
        assert ((a < b), (a == b)) == ((collation.key(a) < collation.key(b)), (collation.key(a) == collation.key(b)))


def test_a_ddl_statement_makes_the_executor_ask_for_collations_again(shards: Sharded) -> None:
    _, executor, ref = shards
    load(executor, ref, REPORT)
    sql = "SELECT DISTINCT g FROM t_s"
    assert len(run_executor(executor, sql)) == 5  # utf8mb4_general_ci, now known for this statement
    to_bin = "ALTER TABLE t_s MODIFY g VARCHAR(12) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
    back = "ALTER TABLE t_s MODIFY g VARCHAR(12) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci"
    executor.execute(to_bin).close()
    query(ref, to_bin)
    try:
        got, want = run_executor(executor, sql), query(ref, sql)
        assert sorted(got) == sorted(want) and len(got) == 8  # a, A, B, b , c, e, é, Zz
    finally:
        executor.execute(back).close()
        query(ref, back)
