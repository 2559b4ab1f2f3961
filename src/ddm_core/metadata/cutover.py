"""The ``cutover:`` block of a configuration version: a gray cut-over from a legacy database, bucket by bucket.

A logic table lives as one physical table on a legacy data source while its
sharded layout is an ordinary configuration. During the cut-over every
instance follows versions that are the sharded configuration plus this block,
which says per bucket of the shard key where reads and writes go
(docs/cutover.md#routing)::

    cutover:
      name: orders-go
      table: t_order               # SLOTS (or GENE) database algorithm, not bound to other tables
      legacy: {name: legacy, url: mysql://127.0.0.1:3307/shop, table: orders}
      buckets: 100                 # 1..slot count
      preGray: "0-9"               # buckets not named are normal
      gray: "10-19"
      rollback: ""
      paused: "5"                  # writes refused while a transition drains
      fenceAfterSeconds: 5

Buckets are slot-aligned: ``bucket = slot * buckets // slot_count`` — the one
formula the router and the sync engine share (:func:`~ddm_core.metadata.buckets.bucket_lookup`).
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from ddm_core.algorithms.slot_based import GeneAlgorithm, SlotsAlgorithm, slot_layout_spec
from ddm_core.errors import CutoverConfigError, DdmError
from ddm_core.metadata.buckets import (
    DUAL_STATES,
    L_AUTHORITATIVE,
    STATE_FIELDS,
    BucketState,
    bucket_lookup,
    bucket_slots,
    cutover_error,
    format_buckets,
    parse_buckets,
)
from ddm_core.metadata.build import Context, ParseConfig
from ddm_core.metadata.dump import cutover_block, native_copy
from ddm_core.metadata.fields import Section
from ddm_core.metadata.model import CutoverRouting, DataNode, DataSource, ShardedTable, ShardingConfig, thaw
from ddm_core.metadata.nodes import name_problem
from ddm_core.metadata.slot_moves import sharder_bits
from ddm_core.slots import SlotMap

# The block's vocabulary is defined below it and re-exported here: the states and bucket arithmetic in
# buckets.py, the routing value in model.py (a ShardingConfig holds it), the error in ddm_core.errors.
__all__ = [
    "BucketState",
    "CutoverConfigError",
    "CutoverRouting",
    "CutoverSpec",
    "DUAL_STATES",
    "L_AUTHORITATIVE",
    "bucket_lookup",
    "bucket_slots",
    "cutover_document",
    "cutover_routing",
    "format_buckets",
    "parse_buckets",
    "slot_count_of",
]


_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
_MAX_BUCKETS = 1 << 16  # the most slots a SLOTS / GENE table has


def slot_count_of(table: ShardedTable) -> int:
    """The slot count of a table sharded by SLOTS or GENE.

    Raises:
        CutoverConfigError: another database algorithm (naming ``cutover.table``).
    """
    sharder = table.database_strategy.sharder
    if not isinstance(sharder, (SlotsAlgorithm, GeneAlgorithm)):
        kind = table.database_strategy.algorithm.type if table.database_strategy.algorithm else "none"
        raise cutover_error(
            "table", f"table {table.name!r} shards databases by {kind}; a cut-over needs SLOTS (or GENE): "
            "its buckets are groups of slots", table.name,
        )  # fmt: skip
    return 1 << sharder_bits(sharder)


# -- the routing ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CutoverSpec:
    """The block as read from a document, before the base configuration exists (the loader's step)."""

    name: str
    table: str
    legacy: DataSource
    legacy_name: str
    legacy_table: str | None
    buckets: int
    states: tuple[BucketState, ...]
    paused: frozenset[int]
    fence_after_s: float


def _check_values(name: Any, buckets: Any, fence: Any) -> list[tuple[str, str, Any]]:
    """``(field, problem, value)`` for each bad scalar of the block."""
    out: list[tuple[str, str, Any]] = []
    if not isinstance(name, str) or _NAME.fullmatch(name) is None:
        out.append(("name", f"must be 1 to 64 of A-Z a-z 0-9 _ . : -, not {name!r}", name))
    if isinstance(buckets, bool) or not isinstance(buckets, int) or not 1 <= buckets <= _MAX_BUCKETS:
        out.append(("buckets", f"must be a whole number from 1 to the table's slot count, not {buckets!r}", buckets))
    if isinstance(fence, bool) or not isinstance(fence, (int, float)) or not (fence > 0 and math.isfinite(fence)):
        out.append(("fenceAfterSeconds", f"must be a number of seconds > 0, not {fence!r}", fence))
    return out


def _states(sets: Mapping[BucketState, frozenset[int]], buckets: int) -> tuple[BucketState, ...]:
    """One state per bucket; a bucket named by two states is refused."""
    out = [BucketState.NORMAL] * buckets
    named: dict[int, str] = {}
    for field_name, state in STATE_FIELDS:
        for b in sorted(sets.get(state, ())):
            if b in named:
                raise cutover_error(field_name, f"bucket {b} is also in cutover.{named[b]}", b)
            named[b] = field_name
            out[b] = state
    return tuple(out)


def cutover_routing(
    base: ShardingConfig,
    *,
    name: str,
    table: str,
    legacy: DataSource,
    legacy_table: str | None = None,
    buckets: int = 100,
    states: tuple[BucketState, ...] | None = None,
    paused: Iterable[int] = (),
    fence_after_s: float = 5.0,
    parse: ParseConfig,
) -> CutoverRouting:
    """The routing of a cut-over of ``table`` from ``legacy`` onto ``base`` (what the loader attaches).

    ``parse`` loads the derived configuration that places each bucket on a node of its state.

    Raises:
        CutoverConfigError: a value is out of range, the table cannot be cut over, or the
            legacy data source's name is one of ``base``'s (each naming ``cutover.<field>``).
    """
    problems = _check_values(name, buckets, fence_after_s)
    if problems:
        raise cutover_error(*problems[0])
    if base.migration is not None:
        raise CutoverConfigError(
            f"cutover: this version also carries migration {base.migration.name!r}; a cut-over and a "
            "migration cannot run in one version", field="cutover",
        )  # fmt: skip
    t = base.table(table)
    if t is None:
        raise cutover_error("table", f"{table!r} is not a sharded table of the configuration", table)
    group = base.binding_group_of(t.name)
    if group is not None and len(group.tables) > 1:
        raise cutover_error("table", f"{t.name!r} is bound to {', '.join(x for x in group.tables if x != t.name)}; "
                            "cut over bound tables together is not supported", table)  # fmt: skip
    slot_count = slot_count_of(t)
    if buckets > slot_count:
        too_many = f"must be from 1 to the slot count of {t.name!r} ({slot_count}), not {buckets}"
        raise cutover_error("buckets", too_many, buckets)
    if legacy.name in base.data_sources:
        raise cutover_error("legacy.name", f"{legacy.name!r} is a data source of the configuration; the legacy "
                            "database needs a name of its own", legacy.name)  # fmt: skip
    all_states = tuple(states) if states is not None else (BucketState.NORMAL,) * buckets
    if len(all_states) != buckets:
        raise cutover_error("buckets", f"{buckets} buckets but {len(all_states)} states were given", buckets)
    paused_set = frozenset(int(b) for b in paused)
    outside = sorted(b for b in paused_set if not 0 <= b < buckets)
    if outside:
        raise cutover_error("paused", f"bucket {outside[0]} is outside 0..{buckets - 1}", outside[0])
    states_config, node_states = _states_config(base, t, slot_count, all_states, paused_set, name, parse)
    lt = legacy_table or t.name
    why = name_problem(lt, "table name")
    if why is not None:
        raise cutover_error("legacy.table", why, lt)
    return CutoverRouting(
        name, t.name, legacy, legacy.name, lt, buckets, all_states, paused_set, float(fence_after_s),
        slot_count, states_config, _legacy_config(base, t, legacy, lt), node_states,
    )  # fmt: skip


def _node_name(state: BucketState, paused: bool) -> str:
    return f"cut_{state.value}" + ("_paused" if paused else "")


def _states_config(
    base: ShardingConfig, t: ShardedTable, slot_count: int, states: tuple[BucketState, ...],
    paused: frozenset[int], name: str, parse: ParseConfig,
) -> tuple[ShardingConfig, dict[str, tuple[BucketState, bool]]]:
    """``t`` with its database algorithm's slot map pointing each slot at its bucket's state node."""
    node_states: dict[str, tuple[BucketState, bool]] = {}
    bucket_node = np.empty(len(states), dtype=np.int32)
    for b, state in enumerate(states):
        key = _node_name(state, b in paused)
        node_states.setdefault(key, (state, b in paused))
        bucket_node[b] = list(node_states).index(key)
    names = list(node_states)
    slot_nodes = bucket_node[bucket_lookup(slot_count, len(states))]
    strategy = t.database_strategy
    algorithm = strategy.algorithm
    assert algorithm is not None  # slot_count_of checked it is SLOTS / GENE
    props = thaw(algorithm.props)
    props["slots"] = slot_layout_spec(SlotMap(slot_nodes, len(names)), names)
    entry: dict[str, Any] = {
        "logicTable": t.name,
        "dataNodes": [f"{n}.{t.name}" for n in names],
        "databaseStrategy": {
            "kind": strategy.kind.value, "columns": list(strategy.columns), "algorithm": algorithm.name,
        },
    }
    doc: dict[str, Any] = {
        "dataSources": {n: "sqlite::memory:" for n in names},  # never connected
        "algorithms": {algorithm.name: {"type": algorithm.type, "props": props}},
        "tables": [entry],
        # every statement the shards accept must route here too: nothing is refused for its reach
        "runtime": {"allowFullRoute": True, "allowDmlFullRoute": True, "fullRouteThreshold": 0, "maxOffset": 10**7},
    }
    gen = t.key_generation
    if gen is not None:  # the same generator: INSERT keys and GENE ids route as on the shards
        spec = gen.generator
        doc["keyGenerators"] = {spec.name: {"type": spec.type, **({"props": thaw(spec.props)} if spec.props else {})}}
        entry["keyGenerator"] = {"column": gen.column, "generator": spec.name}
    config = parse(doc, origin=f"cutover {name!r} states", format="native", check_env=False)
    return config, node_states


def _legacy_config(base: ShardingConfig, t: ShardedTable, legacy: DataSource, legacy_table: str) -> ShardingConfig:
    """``t`` as the one legacy table, keeping its key generation (INSERTs reuse the shards' keys)."""
    table = ShardedTable(t.name, (DataNode(legacy.name, legacy_table),), key_generation=t.key_generation)
    generators = {} if t.key_generation is None else {t.key_generation.generator.name: t.key_generation.generator}
    return ShardingConfig(
        {legacy.name: legacy}, {t.name: table}, runtime=base.runtime, key_generators=generators, name=base.name,
    )  # fmt: skip


# -- documents -----------------------------------------------------------------------------------


def cutover_document(
    base: ShardingConfig | Mapping[str, Any],
    *,
    name: str,
    table: str,
    legacy: Mapping[str, Any],
    buckets: int = 100,
    states: Mapping[int, BucketState] = {},
    paused: Iterable[int] = (),
    fence_after_s: float = 5.0,
) -> dict[str, Any]:
    """The document to publish during a cut-over: ``base`` plus the ``cutover:`` block (deep copies).

    Args:
        base: The sharded configuration (a native document or a loaded configuration).
        name, table, buckets, fence_after_s: The block's values.
        legacy: The legacy data source as a native mapping (``name``, ``url``, ... and ``table``).
        states: Bucket → state; buckets not given are normal.
        paused: Buckets whose writes are refused meanwhile.

    Raises:
        CutoverConfigError: a value is out of range (naming ``cutover.<field>``). The
            table and the legacy data source are checked when the document is loaded.
    """
    problems = _check_values(name, buckets, fence_after_s)
    if problems:
        raise cutover_error(*problems[0])
    if not isinstance(legacy, Mapping) or not legacy.get("name"):
        raise cutover_error("legacy", f"must be a data source mapping with a name, not {legacy!r}", legacy)
    for field_name, numbers in (("states", states.keys()), ("paused", paused)):
        outside = sorted(int(b) for b in numbers if not 0 <= int(b) < buckets)
        if outside:
            raise cutover_error(field_name, f"bucket {outside[0]} is outside 0..{buckets - 1}", outside[0])
    doc = native_copy(base)
    doc.pop("migration", None)
    doc["cutover"] = cutover_block(name, table, legacy, buckets, states, paused, fence_after_s)
    return doc


# -- loading -------------------------------------------------------------------------------------


_FIELDS = ("name", "table", "legacy", "buckets", "preGray", "gray", "rollback", "paused", "fenceAfterSeconds")
ReadDataSource = Callable[[str, Any, str], "DataSource | None"]


def read_cutover(sec: Section, ctx: Context, read_source: ReadDataSource) -> CutoverSpec | None:
    """Read the native ``cutover:`` section (problems go to ``ctx.problems``).

    Args:
        read_source: Reads one ``dataSources`` entry ``(name, spec, path)`` — the legacy data source.
    """
    raw = {f: sec.get(f) for f in _FIELDS}
    sec.finish()  # unknown keys are problems naming the field
    buckets = 100 if raw["buckets"] is None else raw["buckets"]
    fence = 5.0 if raw["fenceAfterSeconds"] is None else raw["fenceAfterSeconds"]
    bad = False
    for field_name, why, value in _check_values(raw["name"], buckets, fence):
        ctx.problems.add(sec.field_path(field_name), why, value)
        bad = True
    table = raw["table"]
    if not isinstance(table, str) or not table.strip():
        ctx.problems.add(sec.field_path("table"), f"must name the logic table cut over, not {table!r}", table)
        bad = True
    legacy, legacy_table = _read_legacy(sec, ctx, read_source)
    if bad or legacy is None:
        return None
    try:
        sets = {state: parse_buckets(raw[f], buckets, sec.field_path(f)) for f, state in STATE_FIELDS}
        paused = parse_buckets(raw["paused"], buckets, sec.field_path("paused"))
        states = _states(sets, buckets)
    except CutoverConfigError as exc:
        path = str(exc.context.get("field"))
        ctx.problems.add(path, exc.message.removeprefix(f"{path}: "), exc.context.get("value"))
        return None
    return CutoverSpec(
        str(raw["name"]), str(table), legacy, legacy.name, legacy_table, int(buckets), states, paused, float(fence)
    )


def _read_legacy(sec: Section, ctx: Context, read_source: ReadDataSource) -> tuple[DataSource | None, str | None]:
    path = sec.field_path("legacy")
    spec = sec.get("legacy")
    if not isinstance(spec, Mapping):
        ctx.problems.add(path, f"must be the legacy data source (a mapping with name and url), not {spec!r}", spec)
        return None, None
    own = {str(k).lower(): k for k in spec if str(k).lower() in ("name", "table")}
    name, table = spec.get(own.get("name", "name")), spec.get(own.get("table", "table"))
    rest = {k: v for k, v in spec.items() if k not in own.values()}
    why = name_problem(name, "data source name") if isinstance(name, str) else f"must be a name, not {name!r}"
    if why is not None:
        ctx.problems.add(f"{path}.name", why, name)
        return None, None
    if table is not None and not isinstance(table, str):
        ctx.problems.add(f"{path}.table", f"must be a table name, not {table!r}", table)
        return None, None
    return read_source(str(name), rest, path), table


def attach_cutover(config: ShardingConfig, spec: CutoverSpec, ctx: Context, parse: ParseConfig) -> ShardingConfig:
    """``config`` with its cut-over routing (problems go to ``ctx.problems``; ``config`` unchanged then)."""
    try:
        routing = cutover_routing(
            config, name=spec.name, table=spec.table, legacy=spec.legacy, legacy_table=spec.legacy_table,
            buckets=spec.buckets, states=spec.states, paused=spec.paused, fence_after_s=spec.fence_after_s,
            parse=parse,
        )  # fmt: skip
    except DdmError as exc:
        path = str(exc.context.get("field") or "cutover")
        ctx.problems.add(path, exc.message.removeprefix(f"{path}: "), exc.context.get("value"))
        return config
    return dataclasses.replace(config, cutover=routing)
