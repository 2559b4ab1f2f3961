"""The tables of ddm-core's own format: sharded tables, their algorithms and key generators, binding
groups, broadcast and single tables (docs/configuration.md#own-format).

The short form of a logic table::

    tables:
      - logicTable: t_order
        shardKey: user_id          # database shard column
        algorithm: slots           # database algorithm (default SLOTS, 1024 slots)
        shardCount: 4              # database shards = len(databases)
        tablePerShard: 4           # tables in each database
        databases: [ds_0, ds_1, ds_2, ds_3]   # or "ds_${0..3}"

giving physical tables ``t_order_${dbIndex}_${tableIndex}`` (``t_order_2_1``;
just ``t_order`` when ``tablePerShard`` is 1), the database chosen by SLOTS
over ``hash(user_id)`` (``slots: {ds_0: "0-255", ...}`` maps slots explicitly,
else they are spread evenly) and the table within it by ``hash(tableKey) %
tablePerShard`` (HASH_MOD; ``tableKey`` defaults to ``shardKey``).

Every part can be spelled out instead: ``dataNodes`` (inline expressions),
``databaseStrategy`` / ``tableStrategy`` (``kind``, ``columns``,
``algorithm``, ``props``), named ``algorithms`` and ``keyGenerators`` — which
is how :func:`ddm_core.metadata.dump.to_native` writes any configuration, a
converted ShardingSphere one included.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from dataclasses import dataclass
from typing import Any, Mapping

from ddm_core.metadata.build import Context
from ddm_core.metadata.fields import Section, canon
from ddm_core.metadata.limits import MAX_LOGIC_TABLES, MAX_SHARDS, MAX_TABLE_NODES, RANGES, shown_names, too_many
from ddm_core.metadata.model import (
    NO_SHARDING,
    AlgorithmSpec,
    DataNode,
    KeyGeneration,
    ShardedTable,
    SingleTable,
    Strategy,
    StrategyKind,
    freeze,
)
from ddm_core.metadata.nodes import expand_names, expand_nodes, name_problem
from ddm_core.metadata.problems import join_path

__all__ = [
    "DEFAULT_SLOT_COUNT",
    "BindingGroups",
    "read_algorithms",
    "read_binding_groups",
    "read_tables",
    "read_broadcast",
    "read_singles",
]

DEFAULT_SLOT_COUNT = 1024
_MOD_FAMILY = frozenset({"MOD", "HASH_MOD", "SALTED_MOD"})
_BIND_INHERITS = (
    "shardKey", "algorithm", "algorithmProps", "shardCount", "tablePerShard", "databases",
    "slotCount", "slots", "tableKey", "tableAlgorithm", "tableAlgorithmProps", "databaseStrategy",
    "tableStrategy",
)  # fmt: skip
_BIND_INHERITS_CANON = frozenset(canon(n) for n in _BIND_INHERITS)


def read_algorithms(top: Section, ctx: Context) -> None:
    """The named ``algorithms`` and ``keyGenerators`` (into ``ctx``, where tables look them up)."""
    for alg_name, spec in top.mapping("algorithms").items():
        path = join_path(top.field_path("algorithms"), str(alg_name))
        sec = Section(spec, path, ctx.problems, loose=True)
        ctx.algorithm(str(alg_name), sec.get("type"), sec.get("props"), path)
        sec.finish()
    for gen_name, spec in top.mapping("keyGenerators").items():
        path = join_path(top.field_path("keyGenerators"), str(gen_name))
        sec = Section(spec, path, ctx.problems, loose=True)
        ctx.key_generator(str(gen_name), sec.get("type"), sec.get("props"), path)
        sec.finish()


# -- tables ----------------------------------------------------------------------------------


class BindingGroups:
    """Binding groups as they are read: explicit ones first, then ``bindTo:`` joining or starting one."""

    def __init__(self) -> None:
        self.groups: list[list[str]] = []
        self._members: list[set[str]] = []
        self._first: dict[str, int] = {}  # lower-case table → the first group listing it

    def add(self, names: list[str]) -> int:
        self.groups.append(names)
        self._members.append({n.lower() for n in names})
        for n in names:
            self._first.setdefault(n.lower(), len(self.groups) - 1)
        return len(self.groups) - 1

    def bind(self, target: str, table: str) -> bool:
        """Put ``table`` in ``target``'s group; ``True`` when that starts a new group."""
        i = self._first.get(target.lower())
        if i is None:
            self.add([target, table])
            return True
        if table.lower() not in self._members[i]:
            self.groups[i].append(table)
            self._members[i].add(table.lower())
            self._first.setdefault(table.lower(), i)
        return False


def read_binding_groups(top: Section, ctx: Context) -> BindingGroups:
    """The explicit binding groups (``bindingTables``); ``bindTo:`` on the tables then joins or starts more."""
    groups = BindingGroups()
    bpath = top.field_path("bindingTables", "bindingGroups")
    for i, item in enumerate(top.list("bindingTables", "bindingGroups")):
        groups.add(_name_list(item, join_path(bpath, i), ctx))
        ctx.paths.binding_groups.append(join_path(bpath, i))
    return groups


def read_tables(top: Section, ctx: Context, groups: BindingGroups) -> dict[str, ShardedTable]:
    """``tables`` (a list, or a mapping by logic table), each in the short or the spelled-out form."""
    raw = top.get("tables")
    tpath = top.field_path("tables")
    entries: list[tuple[str, Any]] = []
    if isinstance(raw, list):
        entries = [(join_path(tpath, i), item) for i, item in enumerate(raw)]
    elif isinstance(raw, Mapping):  # mapping form: {t_order: {...}}
        for key, item in raw.items():
            item = dict(item) if isinstance(item, Mapping) else item
            if isinstance(item, dict):
                item.setdefault("logicTable", key)
            entries.append((join_path(tpath, str(key)), item))
    elif raw is not None:
        ctx.problems.add(tpath, f"must be a list of tables, not {raw!r}", raw)
    if too_many(len(entries), MAX_LOGIC_TABLES, "logic tables", tpath, ctx.problems):
        return {}

    by_name: dict[str, tuple[str, Any]] = {}
    for path, item in entries:
        if isinstance(item, Mapping):
            logic = next((v for k, v in item.items() if canon(str(k)) in ("logictable", "name")), None)
            if isinstance(logic, str):
                by_name.setdefault(logic.lower(), (path, item))

    tables: dict[str, ShardedTable] = {}
    seen: set[str] = set()
    for path, item in entries:
        if ctx.names.spent:
            break  # the problem is reported; the remaining tables would only repeat it
        item = _with_binding(item, path, by_name, ctx, groups)
        table = _table(Section(item, path, ctx.problems, loose=True), ctx)
        if table is None:
            continue
        if table.name.lower() in seen:
            ctx.problems.add(path, f"duplicate logic table {table.name!r}", table.name)
            continue
        seen.add(table.name.lower())
        tables[table.name] = table
        ctx.paths.tables[table.name] = path
    return tables


def _with_binding(
    item: Any, path: str, by_name: dict[str, tuple[str, Any]], ctx: Context, groups: BindingGroups
) -> Any:
    """Apply ``bindTo: other``: copy the other table's sharding fields not given here."""
    if not isinstance(item, Mapping):
        return item
    keys = {canon(str(k)): k for k in item}
    if "bindto" not in keys:
        return item
    target = item[keys["bindto"]]
    logic = next((item[keys[k]] for k in ("logictable", "name") if k in keys), None)
    bpath = join_path(path, str(keys["bindto"]))
    found = by_name.get(target.lower()) if isinstance(target, str) else None
    if found is None or target.lower() == str(logic).lower():
        ctx.problems.add(bpath, f"bindTo names {target!r}, which is not another logic table here", target)
        return {k: v for k, v in item.items() if k != keys["bindto"]}
    merged = {k: v for k, v in item.items() if k != keys["bindto"]}
    own = set(keys)
    for key, value in found[1].items():
        if canon(str(key)) in _BIND_INHERITS_CANON and canon(str(key)) not in own:
            merged[key] = value
    if groups.bind(target, str(logic)):
        ctx.paths.binding_groups.append(bpath)
    return merged


def _table(sec: Section, ctx: Context) -> ShardedTable | None:
    logic = sec.str("logicTable", "name", required=True)
    why = name_problem(logic, "logic table name") if logic is not None else None
    if why is not None:
        ctx.problems.add(sec.field_path("logicTable", "name"), why, logic)
    if logic is None or why is not None:
        sec.finish()
        return None
    explicit = sec.has("databaseStrategy", "tableStrategy", "dataNodes")
    simple = sec.has("shardKey", "databases", "shardCount", "tablePerShard", "algorithm")
    if explicit and not sec.has("databases") and not sec.has("shardKey"):
        table = _explicit_table(sec, logic, ctx)
    elif simple or explicit:
        table = _simple_table(sec, logic, ctx)
    else:
        ctx.problems.add(
            sec.path, f"table {logic!r} needs shardKey + databases, or dataNodes + strategies", logic
        )
        table = None
    sec.finish()
    return table


@dataclass(frozen=True)
class _Shape:
    """What the short form's size fields say: where the table lives and how many tables it has."""

    databases: list[str]
    shard_count: int
    per_shard: int
    shard_key: str | None


def _simple_table(sec: Section, logic: str, ctx: Context) -> ShardedTable | None:
    """The short form (``shardKey`` + ``databases`` + sizes), any part of it spelled out instead."""
    shape = _shape(sec, logic, ctx)
    if shape is None:
        return None
    db_strategy = _database_strategy(sec, logic, shape, ctx)
    tb_strategy = _table_strategy(sec, logic, shape, ctx)
    nodes = _short_form_nodes(sec, logic, shape, ctx)
    if nodes is None:
        return None
    ctx.paths.data_nodes[logic] = sec.field_path("dataNodes", "databases")
    ctx.paths.database_strategy[logic] = sec.field_path("databaseStrategy", "algorithm", "shardKey")
    ctx.paths.table_strategy[logic] = sec.field_path(
        "tableStrategy", "tableAlgorithm", "tableKey", "tablePerShard"
    )
    return _sharded_table(sec, logic, nodes, db_strategy, tb_strategy, ctx)


def _shape(sec: Section, logic: str, ctx: Context) -> _Shape | None:
    """Databases, shardCount and tablePerShard, checked (sizes included) before anything is built."""
    dpath = sec.field_path("databases")
    databases = (
        expand_names(
            sec.get("databases"), ctx.problems, dpath, budget=ctx.names, limit=MAX_SHARDS, what="data sources"
        )
        if sec.has("databases")
        else []
    )
    if not databases:
        ctx.problems.add(dpath, f"table {logic!r} must list the data sources it is sharded over", None)
        return None
    counts = Counter(databases)
    if len(counts) != len(databases):
        dup = sorted(d for d, n in counts.items() if n > 1)
        ctx.problems.add(dpath, f"lists data source(s) {shown_names(dup)} more than once", dup)
    shard_count = sec.int("shardCount", default=len(databases), bounds=RANGES["tables.shardCount"])
    if shard_count != len(databases):
        ctx.problems.add(
            sec.field_path("shardCount"),
            f"shardCount is {shard_count} but databases lists {len(databases)} data source(s) "
            f"({shown_names(databases)}); each database shard needs its own data source",
            shard_count,
        )
    per_shard = sec.int("tablePerShard", default=1, bounds=RANGES["tables.tablePerShard"])
    if len(databases) * per_shard > MAX_TABLE_NODES:
        ctx.problems.add(
            sec.field_path("tablePerShard"),
            f"{len(databases)} databases × tablePerShard {per_shard} = {len(databases) * per_shard} physical "
            f"tables; one logic table has at most {MAX_TABLE_NODES}",
            per_shard,
        )
        return None
    return _Shape(databases, shard_count, per_shard, sec.str("shardKey", "shardColumn"))


def _slot_settings(sec: Section) -> tuple[int, Any]:
    """``(slot count, explicit slot map or None)`` from ``slotCount`` / ``slots`` (``slots: 1024`` is a count)."""
    bounds = RANGES["tables.slotCount"]
    slot_count = sec.int("slotCount", default=None, bounds=bounds)
    slots = sec.get("slots")
    if isinstance(slots, int) and not isinstance(slots, bool):
        why = bounds.problem(slots)
        if why is not None:
            sec.problems.add(sec.field_path("slots"), why, slots)
        elif slot_count is None:
            slot_count = slots
        slots = None
    return slot_count or bounds.default or DEFAULT_SLOT_COUNT, slots


def _database_strategy(sec: Section, logic: str, shape: _Shape, ctx: Context) -> Strategy:
    """``databaseStrategy`` as written, else ``algorithm`` (default SLOTS) over ``shardKey``."""
    slot_count, slots = _slot_settings(sec)
    if sec.has("databaseStrategy"):
        return _strategy(sec.section("databaseStrategy"), f"{logic}.database", ctx)
    if shape.shard_count == 1 and not sec.has("algorithm"):
        return NO_SHARDING
    if shape.shard_key is None:
        ctx.problems.add(
            sec.field_path("shardKey"), f"table {logic!r} shards databases but names no shardKey", None
        )
    alg_type = sec.str("algorithm", default="SLOTS")
    user, user_paths = _user_props(sec, "algorithmProps")
    defaults: dict[str, Any] = {}
    default_paths: dict[str, str] = {}
    if _type_of(alg_type, ctx) == "SLOTS":
        bits = slot_count.bit_length() - 1
        if slot_count != 1 << bits or not 1 <= bits <= 16:
            ctx.problems.add(
                sec.field_path("slotCount", "slots"),
                f"slot count must be a power of two from 2 to 65536, not {slot_count}",
                slot_count,
            )
        defaults["slot-bits"] = bits
        default_paths["slot-bits"] = sec.field_path("slotCount", "slots")
        if slots is not None:
            user["slots"] = slots
            user_paths["slots"] = sec.field_path("slots")
    elif slots is not None or sec.has("slotCount"):
        ctx.problems.add(
            sec.field_path("slots", "slotCount"),
            f"slots only apply to algorithm SLOTS, not {alg_type!r}",
            slots,
        )
    if sec.has("ranges"):
        user["ranges"] = sec.get("ranges")
        user_paths["ranges"] = sec.field_path("ranges")
    return _short_strategy(
        sec, "algorithm", alg_type, shape.shard_key, f"{logic}.database", ctx,
        user=(user, user_paths),
        defaults=(defaults, default_paths),
        # len(databases), not shardCount: a wrong shardCount is reported once, above, not again here
        shards=(len(shape.databases), sec.field_path("shardCount", "databases")),
    )  # fmt: skip


def _table_strategy(sec: Section, logic: str, shape: _Shape, ctx: Context) -> Strategy:
    """``tableStrategy`` as written, else ``tableAlgorithm`` (default HASH_MOD) over ``tableKey``."""
    if sec.has("tableStrategy"):
        return _strategy(sec.section("tableStrategy"), f"{logic}.table", ctx)
    if shape.per_shard == 1 and not sec.has("tableAlgorithm"):
        return NO_SHARDING
    table_key = sec.str("tableKey", "tableShardKey", default=shape.shard_key)
    if table_key is None:
        ctx.problems.add(
            sec.field_path("tableKey"),
            f"table {logic!r} shards tables but names no tableKey or shardKey",
            None,
        )
    alg_type = sec.str("tableAlgorithm", default="HASH_MOD")
    return _short_strategy(
        sec, "tableAlgorithm", alg_type, table_key, f"{logic}.table", ctx,
        user=_user_props(sec, "tableAlgorithmProps"),
        shards=(shape.per_shard, sec.field_path("tablePerShard")),
    )  # fmt: skip


def _short_form_nodes(sec: Section, logic: str, shape: _Shape, ctx: Context) -> list[DataNode] | None:
    """``dataNodes`` as written (their count must fit the shape), else named by ``tablePattern``."""
    expected = shape.shard_count * shape.per_shard
    if sec.has("dataNodes"):
        npath = sec.field_path("dataNodes")
        if sec.get("tablePattern") is not None:
            ctx.problems.add(
                sec.field_path("tablePattern"),
                "give tablePattern or dataNodes, not both",
                sec.get("tablePattern"),
            )
        nodes = expand_nodes(sec.get("dataNodes"), ctx.problems, npath, budget=ctx.names, limit=MAX_TABLE_NODES)
        if nodes and len(nodes) != expected:
            ctx.problems.add(
                npath,
                f"lists {len(nodes)} physical tables but shardCount × tablePerShard = "
                f"{shape.shard_count} × {shape.per_shard} = {expected}",
                len(nodes),
            )
        return nodes
    pattern = sec.str("tablePattern", default="{logic}_{db}_{table}" if shape.per_shard > 1 else "{logic}")
    ppath = sec.field_path("tablePattern")
    why = _pattern_problem(pattern) or name_problem(pattern.format(logic=logic, db=0, table=0), "table name")
    if why is not None:
        ctx.problems.add(ppath, f"bad pattern {pattern!r} ({why}); use {{logic}}, {{db}}, {{table}}", pattern)
        return None
    if not ctx.names.charge(len(shape.databases) * shape.per_shard, sec.field_path("tablePerShard"), ctx.problems):
        return None
    return [
        DataNode(ds, pattern.format(logic=logic, db=d, table=t))
        for d, ds in enumerate(shape.databases)
        for t in range(shape.per_shard)
    ]


_PATTERN_FIELDS = frozenset({"logic", "db", "table"})
_PATTERN_SPEC = re.compile(r"[<>^=]?[0+-]?[0-9]{0,2}[ds]?")  # padding like {table:02d}, no huge widths


def _pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` cannot name tables (``None`` when it can): only the three fields, small specs."""
    try:
        for _text, name, spec, conversion in string.Formatter().parse(pattern):
            if name is None:
                continue
            if name not in _PATTERN_FIELDS or conversion is not None:
                return f"unknown field {{{name}}}"
            if spec and not _PATTERN_SPEC.fullmatch(spec):
                return f"format {spec!r} is not a padding like 02d"
        pattern.format(logic="t", db=0, table=0)
    except (ValueError, KeyError, IndexError) as exc:
        return str(exc)
    return None


_SHORT_FORM_ONLY = (
    "shardCount", "tablePerShard", "algorithm", "algorithmProps", "slotCount", "slots", "ranges",
    "tableKey", "tableAlgorithm", "tableAlgorithmProps", "tablePattern",
)  # fmt: skip


def _explicit_table(sec: Section, logic: str, ctx: Context) -> ShardedTable | None:
    for name in _SHORT_FORM_ONLY:
        if sec.get(name) is not None:
            ctx.problems.add(
                sec.field_path(name),
                f"{name} belongs to the short form (with shardKey + databases); "
                "with dataNodes alone, spell the strategies out",
                sec.get(name),
            )
    npath = sec.field_path("dataNodes")
    if not sec.has("dataNodes"):
        ctx.problems.add(npath, f"table {logic!r} needs dataNodes (or shardKey + databases)", None)
        return None
    nodes = expand_nodes(sec.get("dataNodes"), ctx.problems, npath, budget=ctx.names, limit=MAX_TABLE_NODES)
    db_strategy = (
        _strategy(sec.section("databaseStrategy"), f"{logic}.database", ctx)
        if sec.has("databaseStrategy")
        else NO_SHARDING
    )
    tb_strategy = (
        _strategy(sec.section("tableStrategy"), f"{logic}.table", ctx)
        if sec.has("tableStrategy")
        else NO_SHARDING
    )
    ctx.paths.data_nodes[logic] = npath
    ctx.paths.database_strategy[logic] = sec.field_path("databaseStrategy")
    ctx.paths.table_strategy[logic] = sec.field_path("tableStrategy")
    return _sharded_table(sec, logic, nodes, db_strategy, tb_strategy, ctx)


def _sharded_table(
    sec: Section, logic: str, nodes: list[DataNode], db_strategy: Strategy, tb_strategy: Strategy, ctx: Context
) -> ShardedTable:
    """The table either form describes, with the fields both forms share (keyGenerator, auto, columns)."""
    return ShardedTable(
        name=logic,
        data_nodes=tuple(nodes),
        database_strategy=db_strategy,
        table_strategy=tb_strategy,
        key_generation=_key_generation(sec, logic, ctx, _slot_bits(db_strategy, tb_strategy)),
        auto=bool(sec.bool("auto", default=False)),
        columns=freeze(dict(sec.mapping("columns"))),
    )


def _user_props(sec: Section, field_name: str) -> tuple[dict[str, Any], dict[str, str]]:
    props = dict(sec.mapping(field_name))
    return props, {str(k): join_path(sec.field_path(field_name), str(k)) for k in props}


def _type_of(ref: str, ctx: Context) -> str:
    """The algorithm type ``ref`` stands for (a configured algorithm's type, or ``ref`` itself)."""
    spec = ctx.algorithms.get(ref)
    return spec.type if spec is not None else ref.strip().upper()


def _algorithm_ref(
    ref: str,
    user: dict[str, Any],
    user_paths: dict[str, str],
    defaults: dict[str, Any],
    default_paths: dict[str, str],
    new_name: str,
    path: str,
    ctx: Context,
) -> AlgorithmSpec | None:
    """A configured algorithm (``algorithms:`` name) or a new one of type ``ref``.

    ``user`` props were written on the table; ``defaults`` are derived from
    its shape (``sharding-count`` from ``tablePerShard``...) and yield to them.
    """
    if ref in ctx.algorithms:
        if user:
            ctx.problems.add(
                path,
                f"{ref!r} names a configured algorithm; give its props under algorithms.{ref}, "
                f"not here ({', '.join(sorted(user))})",
                sorted(user),
            )
        return ctx.algorithms[ref]
    props = {**defaults, **user}
    return ctx.algorithm(
        new_name, ref, props, path, prop_paths={**default_paths, **user_paths}, type_path=path
    )


def _short_strategy(
    sec: Section,
    alg_field: str,
    alg_type: str,
    column: str | None,
    new_name: str,
    ctx: Context,
    *,
    user: tuple[dict[str, Any], dict[str, str]],
    shards: tuple[int, str],
    defaults: tuple[dict[str, Any], dict[str, str]] | None = None,
) -> Strategy:
    """The short form's STANDARD strategy on ``column``: algorithm ``alg_type``, named in ``alg_field``.

    Args:
        user: The props written on the table, and their paths.
        shards: The number of shards at this level and its path: the MOD
            family's ``sharding-count`` default.
        defaults: Further props derived from the table's shape, and their
            paths; like ``shards`` they yield to ``user``.
    """
    props, prop_paths = defaults or ({}, {})
    if _type_of(alg_type, ctx) in _MOD_FAMILY:
        props["sharding-count"], prop_paths["sharding-count"] = shards
    spec = _algorithm_ref(alg_type, *user, props, prop_paths, new_name, sec.field_path(alg_field), ctx)
    return Strategy(StrategyKind.STANDARD, (column,) if column else (), spec)


def _strategy(sec: Section, default_name: str, ctx: Context) -> Strategy:
    kind_text = (sec.str("kind", "type", default="standard") or "standard").lower()
    try:
        kind = StrategyKind(kind_text)
    except ValueError:
        ctx.problems.add(
            sec.field_path("kind", "type"),
            f"must be standard, complex, hint or none, not {kind_text!r}",
            kind_text,
        )
        sec.finish()
        return NO_SHARDING
    columns = tuple(str(c) for c in sec.list("columns", "column", split=True))
    if kind is StrategyKind.NONE:
        sec.mark("algorithm", "props")
        sec.finish()
        return NO_SHARDING
    ref = sec.str("algorithm", required=True)
    user, user_paths = _user_props(sec, "props")
    spec = (
        _algorithm_ref(ref, user, user_paths, {}, {}, default_name, sec.field_path("algorithm"), ctx)
        if ref
        else None
    )
    want = {
        StrategyKind.STANDARD: "exactly one column",
        StrategyKind.COMPLEX: "at least one column",
        StrategyKind.HINT: "no columns",
    }
    bad = (
        (kind is StrategyKind.STANDARD and len(columns) != 1)
        or (kind is StrategyKind.COMPLEX and not columns)
        or (kind is StrategyKind.HINT and columns)
    )
    if bad:
        ctx.problems.add(
            sec.field_path("columns", "column"),
            f"a {kind.value} strategy takes {want[kind]}, not {list(columns)}",
            list(columns),
        )
    sec.finish()
    return Strategy(kind, columns, spec)


def _slot_bits(*strategies: Strategy) -> int | None:
    """Slot bits of the first SLOTS / GENE strategy (a GENE key generator's default gene bits)."""
    for strategy in strategies:
        bits = getattr(strategy.sharder, "slot_bits", None) or getattr(strategy.sharder, "gene_bits", None)
        if isinstance(bits, int):
            return bits
    return None


def _key_generation(sec: Section, logic: str, ctx: Context, slot_bits: int | None) -> KeyGeneration | None:
    if not sec.has("keyGenerator"):
        return None
    raw = sec.get("keyGenerator")
    path = sec.field_path("keyGenerator")
    kg = Section(raw, path, ctx.problems, loose=True)
    column = kg.str("column", required=True)
    ref = kg.str("generator", "name")
    if ref is not None:
        spec = ctx.key_generators.get(ref)
        if spec is None:
            ctx.problems.add(
                kg.field_path("generator", "name"),
                f"unknown key generator {ref!r} (configured: {shown_names(sorted(ctx.key_generators))})",
                ref,
            )
        kg.finish()
        ctx.paths.key_generation[logic] = path
        return KeyGeneration(column, spec) if column and spec else None
    gen_type = kg.str("type", default="SNOWFLAKE")
    props: dict[str, Any] = dict(kg.mapping("props"))
    for field_name, prop in (
        ("workerId", "worker-id"),
        ("geneBits", "gene-bits"),
        ("shardColumn", "shard-column"),
        ("workerBits", "worker-bits"),
    ):
        value = kg.get(field_name)
        if value is not None:
            props[prop] = value
    if gen_type.upper() == "GENE" and "gene-bits" not in props and slot_bits:
        props["gene-bits"] = slot_bits  # default: the table's slot bits
    kg.finish()
    spec = ctx.key_generator(f"{logic}.{column or 'key'}", gen_type, props, path)
    ctx.paths.key_generation[logic] = path
    return KeyGeneration(column, spec) if column and spec else None


# -- broadcast and single tables -------------------------------------------------------------


def _name_list(value: Any, path: str, ctx: Context) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [p.strip() for p in value.split(",") if p.strip()]
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        out: list[str] = []
        for v in value:
            out.extend(p.strip() for p in v.split(",") if p.strip())
        return out
    ctx.problems.add(path, f"must be a list of table names, not {value!r}", value)
    return []


def read_broadcast(top: Section, ctx: Context) -> list[str]:
    """``broadcastTables``, each once."""
    broadcast: list[str] = []
    broadcast_seen: set[str] = set()
    for t in _name_list(top.get("broadcastTables"), top.field_path("broadcastTables"), ctx):
        if t.lower() in broadcast_seen:
            ctx.problems.add(top.field_path("broadcastTables"), f"broadcast table {t!r} is listed twice", t)
            continue
        broadcast.append(t)
        broadcast_seen.add(t.lower())
        ctx.paths.broadcast[t] = top.field_path("broadcastTables")
    return broadcast


def read_singles(top: Section, ctx: Context) -> tuple[dict[str, SingleTable], list[str]]:
    """``singleTables`` (``ds.table`` entries or a table → data source mapping) and their ``*`` patterns."""
    raw = top.get("singleTables")
    path = top.field_path("singleTables")
    singles: dict[str, SingleTable] = {}
    seen: set[str] = set()
    patterns: list[str] = []
    items: list[tuple[str, str, Any]] = []
    if isinstance(raw, Mapping):
        items = [(join_path(path, str(k)), str(k), v) for k, v in raw.items()]
    elif isinstance(raw, list):
        for i, entry in enumerate(raw):
            if isinstance(entry, str) and "." in entry:
                ds, _, table = entry.partition(".")
                items.append((join_path(path, i), table, ds))
            else:
                ctx.problems.add(join_path(path, i), f"must be data_source.table, not {entry!r}", entry)
    elif raw is not None:
        ctx.problems.add(path, f"must map table → data source, not {raw!r}", raw)
    for ipath, table, ds in items:
        if not isinstance(ds, str) or not ds:
            ctx.problems.add(ipath, f"must name a data source, not {ds!r}", ds)
        elif "*" in table or "*" in ds:
            patterns.append(f"{ds}.{table}")
        elif table.lower() in seen:
            ctx.problems.add(ipath, f"duplicate single table {table!r}", table)
        else:
            seen.add(table.lower())
            singles[table] = SingleTable(table, ds)
            ctx.paths.single[table] = ipath
    return singles, patterns
