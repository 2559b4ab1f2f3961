"""Hostile configurations: every load ends in a valid configuration or one clear ConfigError.

* Property tests mutate the example configurations (``examples/*.yaml`` and
  ``tests/configs/*.yaml``): values replaced by huge, negative, zero, 100- and
  5000-digit numbers, wrong types, NUL and invalid UTF-8 bytes, deep nesting,
  malformed URLs, oversized expansions; random bytes inserted and deleted. Each
  mutated file either loads — and is then a valid configuration (it survives a
  dump and reload unchanged) — or raises a ``ConfigValidationError`` whose
  message names the file and, for every problem, a field path. Any other
  exception fails the test. The same holds for mutated mappings given directly.
* The named bombs (alias expansion, huge ``tablePerShard``, deep nesting, a
  5000-digit number, invalid UTF-8, a NUL byte, a malformed URL, oversized
  expansions...) load in a subprocess under a 20 s timeout and a 1 GiB address
  space limit, so a regression fails the test instead of hanging or swapping CI.
  Each must end in a ``ConfigValidationError`` naming the field.
* Every numeric field is checked against its documented range, in both formats.
"""

from __future__ import annotations

import inspect
import json
import math
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ddm_core._fast import ids_py
from ddm_core.errors import ConfigError, ConfigValidationError
from ddm_core.metadata import PoolSettings, RuntimeSettings, dump_native, load_config
from ddm_core.metadata import limits
from ddm_core.metadata.model import ShardingConfig
from ddm_core.metadata import yaml_tags
from ddm_core.metadata.problems import Problems
from ddm_core.metadata.yaml_tags import LOADERS, Tagged, parse_yaml

ROOT = Path(__file__).resolve().parent.parent
CORPUS = sorted([ROOT / "examples" / "orders.yaml", ROOT / "examples" / "shardingsphere.yaml",
                 *(ROOT / "tests" / "configs").glob("*.yaml")])  # fmt: skip
DOC = ROOT / "docs" / "config-limits.md"


def _base_text(path: Path) -> str:
    # `password: ***` (redacted samples) is read by ddm-core but is not YAML for the span finder
    return re.sub(r":[ \t]+(\*+)[ \t]*$", r": '\1'", path.read_text(encoding="utf-8"), flags=re.M)


def _scalar_spans(text: str) -> list[tuple[int, int]]:
    """Byte spans of every scalar (keys and values) of ``text``."""
    node = yaml.compose(text, Loader=yaml.SafeLoader)
    spans: list[tuple[int, int]] = []
    todo = [node] if node is not None else []
    while todo:
        n = todo.pop()
        if isinstance(n, yaml.ScalarNode):
            start = len(text[: n.start_mark.index].encode("utf-8"))
            end = len(text[: n.end_mark.index].encode("utf-8"))
            spans.append((start, end))
        elif isinstance(n, yaml.MappingNode):
            todo.extend(x for pair in n.value for x in pair)
        elif isinstance(n, yaml.SequenceNode):
            todo.extend(n.value)
    return sorted(spans)


BASES = {p.name: _base_text(p) for p in CORPUS}
SPANS = {name: _scalar_spans(text) for name, text in BASES.items()}

#: Replacements for one scalar: what a careless edit, a bad generator or an attacker writes.
SNIPPETS: list[bytes] = [
    b"0", b"-1", b"1", b"2", b"2147483648", b"10000000", b"-9223372036854775809", b"9" * 100, b"9" * 5000,
    b"1" + b"0" * 12, b"0x" + b"f" * 40, b"1_000_000_000_000", b"190:20:30", b"1e400", b".nan", b"-.inf", b"0.5",
    b"true", b"null", b"~", b"''", b"'x'", b"[]", b"{}", b"[1, 2]", b"{a: 1}", b"[[1]]",
    b"!!binary AAAA", b"!!int abc", b"!!float x", b"!!bool maybe", b"!!set {a, b}", b"!!omap [a: 1]",
    b"!!timestamp 2020-13-45", b"2020-13-45", b"2020-01-01", b"!!python/tuple [1]", b"!SHARDING {}", b"!X",
    b"'mysql://[::1'", b"'mysql://[::1]:3306/x'", b"'jdbc:mysql://h:99999/x'", b"'mysql://h:0/x'",
    b"'mysql://:3306/x'", b"'sqlite://'", b"'sqlite:'", b"'postgresql://h/'", b"'mysql://h\xef\xbc\x83/x'",
    b"'a\x00b'", b"a\x00b", b"\xff\xfe", b"'\xc3('", b"\xed\xa0\x80", b"'\x07'", b"'\xef\xbb\xbf'",
    b"[" * 10_000 + b"]" * 10_000, b"{a: " * 300 + b"1" + b"}" * 300, b"*undefined", b"&a [*a]",
    b"'${0..99999999}'", b"'ds_${0..99999}'", b"'ds_${0..1}.t_${0..99999}'", b"'${'", b"'${ENV:DDM_NOT_SET_X}'",
    b"'${user_id % 0}'", b"'{logic:>999999999}'", b"'{logic.__class__}'", b"'{x}'", b"'*'", b"'*.*'",
    b"'a,b,,c'", b"' '", b"'" + b"x" * 5000 + b"'",
]  # fmt: skip

HOSTILE_NUMBERS = st.one_of(
    st.integers(-(10**40), 10**40), st.sampled_from([0, -1, 2**31, 2**31 - 1, 2**63, -(2**63) - 1, 10**12])
).map(lambda n: str(n).encode())

_EDIT = st.one_of(
    st.tuples(st.just("value"), st.one_of(st.sampled_from(SNIPPETS), HOSTILE_NUMBERS)),
    st.tuples(st.just("insert"), st.one_of(st.binary(min_size=1, max_size=6), st.sampled_from(SNIPPETS))),
    st.tuples(st.just("delete"), st.integers(1, 24)),
)


@st.composite
def mutated_files(draw: st.DrawFn) -> tuple[str, bytes]:
    """``(corpus file name, mutated bytes)``: one to three edits of one example configuration."""
    name = draw(st.sampled_from(sorted(BASES)))
    data = BASES[name].encode("utf-8")
    spans = SPANS[name]
    edits: list[tuple[int, int, bytes]] = []
    for kind, arg in draw(st.lists(_EDIT, min_size=1, max_size=3)):
        if kind == "value":
            start, end = spans[draw(st.integers(0, len(spans) - 1))]
            edits.append((start, end, arg))
        elif kind == "insert":
            at = draw(st.integers(0, len(data)))
            edits.append((at, at, arg))
        else:
            at = draw(st.integers(0, len(data) - 1))
            edits.append((at, min(len(data), at + arg), b""))
    last = len(data) + 1
    for start, end, new in sorted(edits, reverse=True):  # back to front; drop overlapping edits
        if end <= last:
            data = data[:start] + new + data[end:]
            last = start
    return name, data


def _assert_clear(exc: ConfigError, origin: str) -> None:
    """The error is the validation error, names ``origin`` and gives every problem a field path."""
    assert isinstance(exc, ConfigValidationError), f"{type(exc).__name__}: {exc}"
    assert exc.problems, str(exc)
    message = str(exc)
    for problem in exc.problems:
        assert problem.path, f"problem without a field path: {problem}"
        assert f"{origin}: {problem.path}: " in message


def _assert_valid(config: ShardingConfig) -> None:
    """A loaded configuration is self-consistent: written out and read back, it is the same.

    (Compared as written: a NaN prop, which YAML can hold, is not equal to itself.)
    """
    assert isinstance(config, ShardingConfig)
    text = dump_native(config, secrets="keep")
    assert dump_native(load_config(text, check_env=False), secrets="keep") == text


def _load_checked(path: Path) -> None:
    try:
        config = load_config(path, check_env=False)
    except ConfigError as exc:
        _assert_clear(exc, str(path))
    else:
        _assert_valid(config)


# -- property tests -----------------------------------------------------------------------------------------


def test_corpus_loads_unmutated() -> None:
    # The mutations start from valid configurations (one refused on purpose: an !ENCRYPT rule).
    loaded = 0
    for path in CORPUS:
        try:
            config = load_config(path, check_env=False)
        except ConfigError as exc:
            _assert_clear(exc, str(path))
        else:
            _assert_valid(config)
            loaded += 1
    assert loaded >= len(CORPUS) - 1 >= 10


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=mutated_files(), loader=st.sampled_from(LOADERS))
def test_mutated_files_load_or_fail_clearly(
    case: tuple[str, bytes], loader: type, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # Both YAML loaders (libyaml's parser when installed, and the pure-Python one) are guarded alike.
    name, data = case
    path = tmp_path_factory.mktemp("hostile") / name
    path.write_bytes(data)
    default = yaml_tags.DEFAULT_LOADER
    yaml_tags.DEFAULT_LOADER = loader
    try:
        _load_checked(path)
    finally:
        yaml_tags.DEFAULT_LOADER = default


def _paths(doc: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every position of a parsed document (mapping keys and list indices)."""
    found = [path]
    inner = doc.value if isinstance(doc, Tagged) else doc
    if isinstance(inner, dict):
        for k, v in inner.items():
            found += _paths(v, (*path, k))
    elif isinstance(inner, list):
        for i, v in enumerate(inner):
            found += _paths(v, (*path, i))
    return found


def _replace(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    """``doc`` with the value at ``path`` replaced (unchanged when an earlier edit removed ``path``)."""
    if not path:
        return value
    inner = doc.value if isinstance(doc, Tagged) else doc
    if isinstance(inner, dict) and path[0] in inner:
        copy: Any = dict(inner)
    elif isinstance(inner, list) and isinstance(path[0], int) and path[0] < len(inner):
        copy = list(inner)
    else:
        return doc
    copy[path[0]] = _replace(copy[path[0]], path[1:], value)
    return Tagged(doc.tag, copy, doc.line) if isinstance(doc, Tagged) else copy


def _nested(depth: int) -> list[Any]:
    root: list[Any] = []
    node = root
    for _ in range(depth):
        node.append([])
        node = node[0]
    return root


def _cycle() -> dict[str, Any]:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    return loop


def _laughs() -> list[Any]:
    value: list[Any] = ["lol"]
    for _ in range(9):
        value = [value] * 9
    return value


PY_VALUES = st.one_of(
    st.integers(-(10**40), 10**40),
    st.sampled_from([0, -1, 10**100, 10**5000, -(10**5000), 2**63, math.nan, math.inf, 1.5, True, None, b"\xff",
                     "a\x00b", "\udcff", "", " ", "mysql://[::1", "ds_${0..99999999}", [], {}, {1, "a"}, (1, 2),
                     {(1, 2): 3}, {1: "a", "b": 2}, object()]),  # fmt: skip
    st.builds(_nested, st.sampled_from([100, 10_000])),
    st.builds(_cycle),
    st.builds(_laughs),
    st.text(max_size=20),
)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_mutated_mappings_load_or_fail_clearly(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(BASES)))
    problems = Problems(name)
    doc = parse_yaml(BASES[name], problems)
    assert not problems and isinstance(doc, dict)
    positions = _paths(doc)  # of the original: a hostile value (a cycle) is not walked
    for _ in range(data.draw(st.integers(1, 3))):
        doc = _replace(doc, data.draw(st.sampled_from(positions)), data.draw(PY_VALUES))
    try:
        config = load_config(doc, check_env=False) if isinstance(doc, dict) else None
    except ConfigError as exc:
        _assert_clear(exc, "<dict>")
    else:
        if config is not None:
            _assert_valid(config)


# -- the named bombs, each in a guarded subprocess --------------------------------------------------------------

#: The bombs' own small bases (not the examples, which other changes may reword).
ORDERS = """\
name: order-service
dataSources:
  ds_0: sqlite:///data/ds_0.db
  ds_1: sqlite:///data/ds_1.db
pool: {maxSize: 20, minIdle: 5, acquireTimeoutMs: 3000}
tables:
  - logicTable: t_order
    shardKey: user_id
    slotCount: 1024
    tablePerShard: 4
    databases: [ds_0, ds_1]
    keyGenerator: {column: order_id, type: snowflake}
"""
SS = """\
dataSources:
  ds0:
    props: {jdbcUrl: 'jdbc:mysql://10.0.1.10:3306/order_0', maximumPoolSize: 50}
  ds1:
    props: {jdbcUrl: 'jdbc:mysql://10.0.1.11:3306/order_1', maximumPoolSize: 50}
rules:
  - !SHARDING
    tables:
      t_order:
        actualDataNodes: ds$->{0..1}.t_order_$->{0..15}
        tableStrategy: {standard: {shardingColumn: user_id, shardingAlgorithmName: tbl}}
    shardingAlgorithms:
      tbl: {type: INLINE, props: {algorithm-expression: 't_order_${user_id % 16}'}}
"""


def _laughs_yaml(indent: str, levels: int = 9, width: int = 9) -> str:
    lines = [f'{indent}a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels + 1):
        lines.append(f"{indent}a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


def _sub(text: str, old: str, new: str) -> bytes:
    assert old in text, old
    return text.replace(old, new, 1).encode("utf-8")


_BIG_LIST = ", ".join(["'ds_${0..1}.t_${0..49999}'"] * 200)
_AUTO = "    autoTables:\n      t_big:\n        actualDataSources: ds0\n        shardingStrategy:\n" \
        "          standard: {shardingColumn: id, shardingAlgorithmName: big}\n" \
        "    shardingAlgorithms:\n      big: {type: MOD, props: {sharding-count: 10000000}}\n"

#: name → (file bytes, the field path the error must name; ``None``: it must load).
BOMBS: dict[str, tuple[bytes, str | None]] = {
    "laughs_under_columns": (
        _sub(ORDERS, "    keyGenerator:", "    columns:\n" + _laughs_yaml("      ") + "    keyGenerator:"),
        "tables[0].columns",
    ),
    "laughs_top_level": (_laughs_yaml("").encode() + ORDERS.encode(), "a"),
    "collection_as_key": (b"a0: &a0 [1, 2]\n? *a0\n: 1\n" + ORDERS.encode(), "<root>"),
    "alias_cycle": (ORDERS.encode() + b"props: &p {x: *p}\n", "props.x"),
    "table_per_shard_2147483648": (_sub(ORDERS, "tablePerShard: 4", "tablePerShard: 2147483648"),
                                   "tables[0].tablePerShard"),
    "table_per_shard_10_7": (_sub(ORDERS, "tablePerShard: 4", "tablePerShard: 10000000"), "tables[0].tablePerShard"),
    "slot_count_2_40": (_sub(ORDERS, "slotCount: 1024", f"slotCount: {2**40}"), "tables[0].slotCount"),
    "databases_10_8": (_sub(ORDERS, "databases: [ds_0, ds_1]", "databases: ds_${0..99999999}"), "tables[0].databases"),
    "databases_twice_50000": (_sub(ORDERS, "databases: [ds_0, ds_1]", "databases: 'ds_${0..49999}, ds_${0..49999}'"),
                              "tables[0].databases"),
    "data_nodes_200_big": (_sub(ORDERS, "    databases: [ds_0, ds_1]",
                                f"    databases: [ds_0, ds_1]\n    dataNodes: [{_BIG_LIST}]"), "tables[0].dataNodes"),
    "nesting_10000_flow": (ORDERS.encode() + b"props: " + b"[" * 10_000 + b"]" * 10_000 + b"\n", "props"),
    "nesting_10000_block": (ORDERS.encode() + b"props:\n  " + b"- " * 10_000 + b"x\n", "props"),
    "int_5000_digits": (_sub(ORDERS, "maxSize: 20", "maxSize: " + "9" * 5000), "pool.maxSize"),
    "int_100_digits": (_sub(ORDERS, "maxSize: 20", "maxSize: " + "9" * 100), "pool.maxSize"),
    "acquire_timeout_10_12": (_sub(ORDERS, "acquireTimeoutMs: 3000", "acquireTimeoutMs: 1000000000000"),
                              "pool.acquireTimeoutMs"),
    "invalid_utf8": (_sub(ORDERS, "name: order-service", "name: order-XX").replace(b"XX", b"\xff\xfe"), "name"),
    "nul_byte": (_sub(ORDERS, "name: order-service", "name: order-\x00"), "name"),
    "bad_url": (_sub(ORDERS, "ds_0: sqlite:///data/ds_0.db", "ds_0: mysql://[::1"), "dataSources.ds_0.url"),
    "ss_pool_5000_digits": (_sub(SS, "maximumPoolSize: 50", "maximumPoolSize: " + "9" * 5000),
                            "dataSources.ds0.props.maximumPoolSize"),
    "ss_data_nodes_10_8": (_sub(SS, "t_order_$->{0..15}", "t_order_$->{0..99999999}"),
                           "rules[0].tables.t_order.actualDataNodes"),
    "ss_auto_table_10_7": (_sub(SS, "    shardingAlgorithms:\n", _AUTO),
                           "rules[0].autoTables.t_big.shardingStrategy"),
    "blank_lines_1_mib": (ORDERS.encode() + b"\n" * ((1 << 20) - len(ORDERS) - 1), None),
    "oversized_2_mib": (ORDERS.encode() + b"#" * (2 << 20), "<document>"),
}  # fmt: skip

#: Mappings given directly: built in the child (they are Python objects, not text).
DICT_BOMBS: dict[str, tuple[str, str]] = {
    "dict_laughs": ("lol = ['lol']\nfor _ in range(9):\n    lol = [lol] * 9\ndoc['props'] = {'x': lol}", "props.x"),
    "dict_cycle": ("loop = {}\nloop['self'] = loop\ndoc['props'] = loop", "props.self"),
    "dict_nesting_10000": ("node = root = []\nfor _ in range(10_000):\n    node.append([])\n    node = node[0]\n"
                           "doc['props'] = {'x': root}", "props.x"),
    "dict_int_5000_digits": ("doc['pool'] = {'maxSize': 10 ** 5000}", "pool.maxSize"),
    "dict_table_per_shard_10_7": ("doc['tables'][0]['tablePerShard'] = 10 ** 7", "tables[0].tablePerShard"),
    "dict_text_2_mib": ("doc['name'] = 'x' * (2 << 20)", "name"),
}  # fmt: skip

_CHILD = textwrap.dedent(
    """
    import json, resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
    from ddm_core.errors import ConfigError
    from ddm_core.metadata import load_config, yaml_tags
    from ddm_core.metadata.problems import Problems
    yaml_tags.DEFAULT_LOADER = next(l for l in yaml_tags.LOADERS if l.__name__ == sys.argv[1])
    cases = json.loads(sys.stdin.read())
    def report(name, load):
        try:
            load()
            out = {"name": name, "type": None, "message": "loaded", "problems": []}
        except ConfigError as exc:
            problems = [[p.path, p.message] for p in getattr(exc, "problems", ())]
            out = {"name": name, "type": type(exc).__name__, "message": str(exc)[:4000], "problems": problems}
        except BaseException as exc:
            out = {"name": name, "type": type(exc).__name__, "message": str(exc)[:4000], "problems": []}
        print(json.dumps(out), flush=True)
    for name, path in cases["files"]:
        report(name, lambda: load_config(path, check_env=False))
    for name, code in cases["dicts"]:
        doc = yaml_tags.parse_yaml(cases["base"], Problems("base"))
        exec(code, {"doc": doc})
        report(name, lambda: load_config(doc, check_env=False))
    """
)


@pytest.mark.parametrize("loader", [cls.__name__ for cls in LOADERS])
def test_named_bombs_fail_clearly_and_fast(loader: str, tmp_path: Path) -> None:
    files = []
    for name, (data, _field) in BOMBS.items():
        path = tmp_path / f"{name}.yaml"
        path.write_bytes(data)
        files.append((name, str(path)))
    cases = {"base": ORDERS, "files": files, "dicts": [(n, code) for n, (code, _) in DICT_BOMBS.items()]}
    try:
        run = subprocess.run(
            [sys.executable, "-c", _CHILD, loader],
            input=json.dumps(cases), capture_output=True, text=True, timeout=20,
        )  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        done = [json.loads(line)["name"] for line in out.splitlines()]
        pending = [n for n in [*BOMBS, *DICT_BOMBS] if n not in done]
        pytest.fail(f"loading hung for 20 s at {pending[:1]} (finished: {done})")
    results = {r["name"]: r for r in map(json.loads, run.stdout.splitlines())}
    assert len(results) == len(BOMBS) + len(DICT_BOMBS), run.stderr[-2000:]
    expected = {**{n: (files[i][1], f) for i, (n, (_, f)) in enumerate(BOMBS.items())},
                **{n: ("<dict>", f) for n, (_, f) in DICT_BOMBS.items()}}  # fmt: skip
    for name, (origin, field) in expected.items():
        result = results[name]
        if field is None:
            assert result["type"] is None, f"{name}: {result['type']}: {result['message']}"
            continue
        assert result["type"] == "ConfigValidationError", f"{name}: {result['type']}: {result['message']}"
        assert origin in result["message"], name
        assert any(path.startswith(field) for path, _ in result["problems"]), f"{name}: {result['problems']}"


def test_blank_lines_bomb_is_empty_not_slow() -> None:
    # The redaction pass once rescanned every run of blank lines from each line start.
    with pytest.raises(ConfigValidationError, match="empty"):
        load_config("\n" * 200_000 + "\n")


# -- each numeric field has a range, checked at load -------------------------------------------------------------

NATIVE = "dataSources:\n  ds_0: sqlite:///a.db\n  ds_1: sqlite:///b.db\n"
SS_DS = "dataSources:\n  ds_0:\n    jdbcUrl: jdbc:mysql://h0:3306/x\n"


def _problem(source: str, path: str) -> str:
    with pytest.raises(ConfigValidationError) as info:
        load_config(source, check_env=False)
    found = [p.message for p in info.value.problems if p.path == path]
    assert found, f"nothing at {path}: {info.value}"
    return found[0]


@pytest.mark.parametrize(
    ("source", "path", "fragment"),
    [
        (NATIVE + "pool: {maxSize: 0}\n", "pool.maxSize", "from 1 to 1000, not 0"),
        (NATIVE + "pool: {maxSize: 1001}\n", "pool.maxSize", "from 1 to 1000, not 1001"),
        (NATIVE + "pool: {acquireTimeoutMs: 0}\n", "pool.acquireTimeoutMs", "from 1 to 600000, not 0"),
        (NATIVE + "pool: {acquireTimeoutMs: 1000000000000}\n", "pool.acquireTimeoutMs", "not 1000000000000"),
        (NATIVE + "pool: {maxLifetimeMs: 500}\n", "pool.maxLifetimeMs", "0 (off) or an integer from 1000"),
        (NATIVE + "pool: {minIdle: '²'}\n", "pool.minIdle", "must be an integer from 0 to 1000, not '²'"),
        (NATIVE + "runtime: {slowSqlMs: -1}\n", "runtime.slowSqlMs", "0 (off) or an integer from 1 to 3600000, not -1"),
        (NATIVE + "runtime: {maxOffset: 10000001}\n", "runtime.maxOffset", "from 0 to 10000000"),
        (NATIVE + "runtime: {fullRouteThreshold: 65537}\n", "runtime.fullRouteThreshold", "from 0 to 65536"),
        (NATIVE + "tables:\n  - {logicTable: t, shardKey: k, databases: [ds_0, ds_1], shardCount: 0}\n",
         "tables[0].shardCount", "from 1 to 1024, not 0"),
        (NATIVE + "tables:\n  - {logicTable: t, shardKey: k, databases: [ds_0, ds_1], tablePerShard: 40000}\n",
         "tables[0].tablePerShard", "80000 physical tables; one logic table has at most 65536"),
        (NATIVE + "tables:\n  - {logicTable: t, shardKey: k, databases: [ds_0, ds_1], slots: 131072}\n",
         "tables[0].slots", "from 2 to 65536, not 131072"),
        (NATIVE + "tables:\n  - {logicTable: t, shardKey: k, databases: [ds_0, ds_1],"
                  " keyGenerator: {column: id, type: snowflake, workerId: 1024}}\n",
         "tables[0].keyGenerator.props.worker-id", "from 0 to 1023, not 1024"),
        (NATIVE + "tables:\n  - {logicTable: t, shardKey: k, databases: [ds_0, ds_1],"
                  " keyGenerator: {column: id, type: gene, shardColumn: k, workerId: 64}}\n",
         "tables[0].keyGenerator.props.worker-id", "below 2 ** worker-bits = 64"),
        (NATIVE + "tables:\n  - {logicTable: t, shardKey: k, databases: [ds_0, ds_1], slotCount: 65536,"
                  " keyGenerator: {column: id, type: gene, shardColumn: k}}\n",
         "tables[0].keyGenerator.props.gene-bits", "worker-bits 6 + gene-bits 16 leave no sequence bit"),
        ("dataSources:\n  ds_0: mysql://h:0/x\n", "dataSources.ds_0.url", "from 1 to 65535, not 0"),
        ("dataSources:\n  ds_0: {url: sqlite:///a.db, weight: -1}\n", "dataSources.ds_0.weight", "not -1"),
        (SS_DS + "    maximumPoolSize: " + "9" * 25 + "\n", "dataSources.ds_0.maximumPoolSize", "from 1 to 1000"),
        (SS_DS + "    connectionTimeout: 0\n", "dataSources.ds_0.connectionTimeout", "from 1 to 600000, not 0"),
        (SS_DS + "    maxWait: -1\n", "dataSources.ds_0.maxWait", "from 1 to 600000, not -1"),
        (SS_DS + "rules:\n- !SHARDING\n  keyGenerators:\n    s: {type: SNOWFLAKE, props: {max-vibration-offset: 4096}}\n",
         "rules[0].keyGenerators.s.props.max-vibration-offset", "from 0 to 4095, not 4096"),
        (SS_DS + "rules:\n- !SHARDING\n  shardingAlgorithms:\n    m: {type: MOD, props: {sharding-count: '" + "9" * 40
               + "'}}\n", "rules[0].shardingAlgorithms.m.props.sharding-count", "must fit a signed 64-bit integer"),
        (SS_DS + "  ds_1:\n    jdbcUrl: jdbc:mysql://h1:3306/x\nrules:\n- !READWRITE_SPLITTING\n  dataSources:\n"
                 "    rw: {writeDataSourceName: ds_0, readDataSourceNames: [ds_1], loadBalancerName: lb}\n"
                 "  loadBalancers:\n    lb: {type: WEIGHT, props: {ds_1: 10001}}\n",
         "rules[0].loadBalancers.lb.props.ds_1", "weight must be an integer from 0 to 10000, not 10001"),
    ],
)  # fmt: skip
def test_numeric_field_out_of_range(source: str, path: str, fragment: str) -> None:
    assert fragment in _problem(source, path)


def test_ranges_accept_their_bounds() -> None:
    low = load_config(NATIVE + "pool: {maxSize: 1, minIdle: 0, acquireTimeoutMs: 1, idleTimeoutMs: 0, maxLifetimeMs: 0}\n"
                      "runtime: {slowSqlMs: 0, maxOffset: 0, fullRouteThreshold: 0}\n")  # fmt: skip
    assert low.data_sources["ds_0"].pool == PoolSettings(1, 0, 1, 0, 0)
    high = load_config(NATIVE + "pool: {maxSize: 1000, minIdle: 1000, acquireTimeoutMs: 600000,"
                       " idleTimeoutMs: 86400000, maxLifetimeMs: 86400000}\n")  # fmt: skip
    assert high.data_sources["ds_0"].pool == PoolSettings(1000, 1000, 600000, 86_400_000, 86_400_000)


def test_range_defaults_are_the_model_defaults() -> None:
    pool, runtime, r = PoolSettings(), RuntimeSettings(), limits.RANGES
    assert (r["pool.maxSize"].default, r["pool.minIdle"].default, r["pool.acquireTimeoutMs"].default,
            r["pool.idleTimeoutMs"].default, r["pool.maxLifetimeMs"].default) == (
        pool.max_size, pool.min_idle, pool.acquire_timeout_ms, pool.idle_timeout_ms, pool.max_lifetime_ms)
    assert (r["runtime.fullRouteThreshold"].default, r["runtime.maxOffset"].default,
            r["runtime.slowSqlMs"].default) == (runtime.full_route_threshold, runtime.max_offset, runtime.slow_sql_ms)
    gene = inspect.signature(ids_py.GeneIdGenerator).parameters
    keys = limits.KEY_GENERATOR_RANGES
    assert keys["worker-bits"].default == gene["worker_bits"].default
    assert keys["max-backward-ms"].default == gene["max_backward_ms"].default
    assert keys["epoch-ms"].default == gene["epoch_ms"].default  # fmt: skip
    for bounds in [*r.values(), *keys.values()]:
        assert bounds.default is None or bounds.accepts(bounds.default)


def test_limits_document_lists_every_range_and_bound() -> None:
    rows = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("| `"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            rows[cells[0].strip("`")] = cells
    for name, bounds in [*limits.RANGES.items(), *limits.KEY_GENERATOR_RANGES.items()]:
        assert name in rows, f"{name} is not in {DOC.name}"
        span = f"{bounds.low} – {bounds.high}"
        assert rows[name][1] == (f"0 (off) or {span}" if bounds.off else span), rows[name]
        default = rows[name][2]
        assert default == str(bounds.default) if bounds.default is not None else not default.isdigit(), rows[name]
        assert rows[name][3] == bounds.unit, rows[name]
    for const in ("MAX_DOCUMENT_BYTES", "MAX_DEPTH", "MAX_ALIASES", "MAX_VALUES", "MAX_INT_DIGITS",
                  "MAX_DATA_SOURCES", "MAX_LOGIC_TABLES", "MAX_SHARDS", "MAX_TABLE_NODES", "MAX_CONFIG_NAMES"):  # fmt: skip
        assert const in rows, f"{const} is not in {DOC.name}"
        assert rows[const][1].split()[0] == str(getattr(limits, const)), rows[const]


# -- the text paths: bytes, files, strings ---------------------------------------------------------------------


def test_bytes_source_with_invalid_utf8_names_the_field() -> None:
    with pytest.raises(ConfigValidationError) as info:
        load_config(NATIVE.encode() + b"name: caf\xe9\n")
    assert [p.path for p in info.value.problems] == ["name"]
    assert "invalid UTF-8 byte 0xe9" in str(info.value) and "<string>: name: " in str(info.value)


def test_string_with_a_lone_surrogate_names_the_field() -> None:
    with pytest.raises(ConfigValidationError, match=r"name: contains the unpaired surrogate U\+D800"):
        load_config(NATIVE + "name: a\ud800b\n")


def test_refused_character_outside_a_value_is_placed_by_line_and_column() -> None:
    with pytest.raises(ConfigValidationError) as info:
        load_config(NATIVE + "# a comment with a NUL \x00 in it\n")
    assert [p.path for p in info.value.problems] == ["<line 4, column 24>"]


def test_value_the_constructor_cannot_read_names_its_field() -> None:
    message = _problem(NATIVE + "tables:\n  - {logicTable: t, shardKey: k, databases: [ds_0, 2020-13-45]}\n",
                       "tables[0].databases[1]")  # fmt: skip
    assert "'2020-13-45' cannot be read as timestamp" in message and "quote it" in message


def test_syntax_error_names_the_field_being_read() -> None:
    with pytest.raises(ConfigValidationError) as info:
        load_config(NATIVE + "pool: {maxSize: [1, 2}\n")
    problem = info.value.problems[0]
    assert problem.path.startswith("<line 4, column") and "while reading pool.maxSize" in problem.message


def test_oversized_string_source_is_refused_before_parsing() -> None:
    with pytest.raises(ConfigValidationError) as info:
        load_config(NATIVE + "#" * limits.MAX_DOCUMENT_BYTES)
    assert [p.path for p in info.value.problems] == ["<document>"]


def test_a_document_at_the_size_limit_loads(tmp_path: Path) -> None:
    text = NATIVE + "#" * (limits.MAX_DOCUMENT_BYTES - len(NATIVE) - 1) + "\n"
    path = tmp_path / "big.yaml"
    path.write_text(text, encoding="utf-8")
    assert len(path.read_bytes()) == limits.MAX_DOCUMENT_BYTES
    assert set(load_config(path).data_sources) == {"ds_0", "ds_1"}


@pytest.mark.parametrize(
    ("pattern", "fragment"),
    [("'{logic:>999999999}'", "is not a padding"), ("'{logic.__class__}'", "unknown field"), ("'{x}'", "unknown field"),
     ("'{logic'", "bad pattern")],
)  # fmt: skip
def test_table_pattern_takes_only_its_three_fields_and_small_paddings(pattern: str, fragment: str) -> None:
    source = NATIVE + f"tables:\n  - {{logicTable: t, shardKey: k, databases: [ds_0, ds_1], tablePattern: {pattern}}}\n"
    assert fragment in _problem(source, "tables[0].tablePattern")


def test_table_pattern_padding_still_works() -> None:
    source = NATIVE + "tables:\n  - {logicTable: t, shardKey: k, databases: [ds_0, ds_1], tablePerShard: 2,\n" \
                      "      tablePattern: '{logic}_{db}_{table:02d}'}\n"  # fmt: skip
    assert load_config(source).table("t").all_tables == ("t_0_00", "t_0_01", "t_1_00", "t_1_01")
