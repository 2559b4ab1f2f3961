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
formula the router and the sync engine share (:func:`bucket_lookup`).
"""

from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

import numpy as np

from ddm_core.algorithms.slot_based import GeneAlgorithm, SlotsAlgorithm, parse_slot_spec, slot_layout_spec
from ddm_core.errors import CutoverConfigError, DdmError
from ddm_core.metadata.migration import native_copy, sources_with
from ddm_core.metadata.model import DataNode, DataSource, ShardedTable, ShardingConfig, thaw
from ddm_core.metadata.nodes import name_problem
from ddm_core.metadata.slot_moves import sharder_bits
from ddm_core.slots import SlotMap

if TYPE_CHECKING:
    from ddm_core.metadata.build import Context
    from ddm_core.metadata.fields import Section

__all__ = [
    "BucketState",
    "CutoverConfigError",  # defined in ddm_core.errors, re-exported: the block's error
    "CutoverRouting",
    "CutoverSpec",
    "DUAL_STATES",
    "L_AUTHORITATIVE",
    "bucket_lookup",
    "bucket_slots",
    "cutover_block",
    "cutover_document",
    "cutover_routing",
    "format_buckets",
    "parse_buckets",
    "slot_count_of",
]


class BucketState(str, Enum):
    """Where a bucket's reads and writes go (docs/cutover.md#routing)."""

    NORMAL = "normal"  # legacy only
    PRE_GRAY = "pre_gray"  # legacy serves, writes copied to the shards
    GRAY = "gray"  # the shards serve; writes there only
    ROLLBACK = "rollback"  # back on legacy, writes still copied to the shards


#: States in which the legacy table holds the authoritative rows (writes go there).
L_AUTHORITATIVE = frozenset({BucketState.NORMAL, BucketState.PRE_GRAY, BucketState.ROLLBACK})
#: States whose writes are also sent to the shards (the plan's ``dual`` units).
DUAL_STATES = frozenset({BucketState.PRE_GRAY, BucketState.ROLLBACK})

_STATE_FIELDS = (("preGray", BucketState.PRE_GRAY), ("gray", BucketState.GRAY), ("rollback", BucketState.ROLLBACK))
_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
_MAX_BUCKETS = 1 << 16  # the most slots a SLOTS / GENE table has


def _refuse(field_name: str, why: str, value: Any = None) -> CutoverConfigError:
    path = f"cutover.{field_name}"
    return CutoverConfigError(f"{path}: {why}", field=path, value=value)


# -- bucket math ---------------------------------------------------------------------------------


def _check_counts(slot_count: int, buckets: int) -> None:
    if not 1 <= buckets <= slot_count:
        raise _refuse("buckets", f"must be from 1 to the table's slot count {slot_count}, not {buckets!r}", buckets)


def bucket_lookup(slot_count: int, buckets: int) -> np.ndarray:
    """Slot → bucket (``slot * buckets // slot_count``), an int32 array of ``slot_count`` entries."""
    _check_counts(slot_count, buckets)
    return (np.arange(slot_count, dtype=np.int64) * buckets // slot_count).astype(np.int32)


def bucket_slots(slot_count: int, buckets: int, bucket: int) -> range:
    """The slots of ``bucket``: those with ``slot * buckets // slot_count == bucket`` (at least one)."""
    _check_counts(slot_count, buckets)
    if not 0 <= bucket < buckets:
        raise ValueError(f"bucket {bucket} is outside 0..{buckets - 1}")
    return range(-(-bucket * slot_count // buckets), -(-(bucket + 1) * slot_count // buckets))


def parse_buckets(value: Any, buckets: int, field: str) -> frozenset[int]:
    """``"0-9,12,20-29"``, an int, or a list of those → bucket numbers; ``None`` / ``""`` → none.

    Raises:
        CutoverConfigError: malformed or outside ``0..buckets-1``, naming ``field``.
    """
    if value is None or (isinstance(value, str) and not value.strip()) or value == []:
        return frozenset()
    try:
        pairs = parse_slot_spec(value, buckets)
    except ValueError as exc:  # the slot-range syntax, reused: its words say "slot"
        why = str(exc).replace("slot", "bucket")
        raise CutoverConfigError(f"{field}: {why}", field=field, value=value) from None
    return frozenset(b for lo, hi in pairs for b in range(lo, hi + 1))


def format_buckets(buckets: Iterable[int]) -> str:
    """Bucket numbers as compact runs: ``"0-9,12,20-29"`` (``""`` for none)."""
    runs: list[str] = []
    values = sorted({int(b) for b in buckets})
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        runs.append(str(values[i]) if i == j else f"{values[i]}-{values[j]}")
        i = j + 1
    return ",".join(runs)


def slot_count_of(table: ShardedTable) -> int:
    """The slot count of a table sharded by SLOTS or GENE.

    Raises:
        CutoverConfigError: another database algorithm (naming ``cutover.table``).
    """
    sharder = table.database_strategy.sharder
    if not isinstance(sharder, (SlotsAlgorithm, GeneAlgorithm)):
        kind = table.database_strategy.algorithm.type if table.database_strategy.algorithm else "none"
        raise _refuse(
            "table", f"table {table.name!r} shards databases by {kind}; a cut-over needs SLOTS (or GENE): "
            "its buckets are groups of slots", table.name,
        )  # fmt: skip
    return 1 << sharder_bits(sharder)


# -- the routing ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class CutoverRouting:
    """A configuration version's cut-over block, with what the router derives from it.

    Attributes:
        name: The cut-over's name.
        table: The logic table, as configured.
        legacy: The legacy data source (read like a ``dataSources`` entry).
        legacy_name: Its name in plans, metrics and errors.
        legacy_table: The legacy physical table.
        buckets: How many buckets the table's slots are grouped into.
        states: The state of each bucket.
        paused: Buckets whose writes are refused while a transition drains (reads follow the state).
        fence_after_s: Writes to the table are refused when the config source was
            not confirmed for this long (fail closed).
        slot_count: The table's slot count (derived).
        states_config: ``table`` placed on one node per state (``cut_<state>[_paused]``), never
            connected: routing a statement there names the states it touches (derived).
        legacy_config: ``table`` as one node ``legacy_name.legacy_table`` (derived).
        node_states: Data source of ``states_config`` → (state, paused) (derived).
    """

    name: str
    table: str
    legacy: DataSource
    legacy_name: str
    legacy_table: str
    buckets: int
    states: tuple[BucketState, ...] = field(repr=False)
    paused: frozenset[int]
    fence_after_s: float
    slot_count: int = field(compare=False)
    states_config: ShardingConfig = field(compare=False, repr=False)
    legacy_config: ShardingConfig = field(compare=False, repr=False)
    node_states: Mapping[str, tuple[BucketState, bool]] = field(compare=False, repr=False)

    def state_of(self, bucket: int) -> BucketState:
        return self.states[bucket]

    def buckets_in(self, state: BucketState) -> frozenset[int]:
        return frozenset(b for b, s in enumerate(self.states) if s is state)

    def data_sources_with(self, base: ShardingConfig) -> Mapping[str, DataSource]:
        """``base``'s data sources plus the legacy one (built once per version)."""
        return sources_with(self, base, {self.legacy_name: self.legacy})


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
    for field_name, state in _STATE_FIELDS:
        for b in sorted(sets.get(state, ())):
            if b in named:
                raise _refuse(field_name, f"bucket {b} is also in cutover.{named[b]}", b)
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
) -> CutoverRouting:
    """The routing of a cut-over of ``table`` from ``legacy`` onto ``base`` (what the loader attaches).

    Raises:
        CutoverConfigError: a value is out of range, the table cannot be cut over, or the
            legacy data source's name is one of ``base``'s (each naming ``cutover.<field>``).
    """
    problems = _check_values(name, buckets, fence_after_s)
    if problems:
        raise _refuse(*problems[0])
    if base.migration is not None:
        raise CutoverConfigError(
            f"cutover: this version also carries migration {base.migration.name!r}; a cut-over and a "
            "migration cannot run in one version", field="cutover",
        )  # fmt: skip
    t = base.table(table)
    if t is None:
        raise _refuse("table", f"{table!r} is not a sharded table of the configuration", table)
    group = base.binding_group_of(t.name)
    if group is not None and len(group.tables) > 1:
        raise _refuse("table", f"{t.name!r} is bound to {', '.join(x for x in group.tables if x != t.name)}; "
                      "cut over bound tables together is not supported", table)  # fmt: skip
    slot_count = slot_count_of(t)
    if buckets > slot_count:
        too_many = f"must be from 1 to the slot count of {t.name!r} ({slot_count}), not {buckets}"
        raise _refuse("buckets", too_many, buckets)
    if legacy.name in base.data_sources:
        raise _refuse("legacy.name", f"{legacy.name!r} is a data source of the configuration; the legacy "
                      "database needs a name of its own", legacy.name)  # fmt: skip
    all_states = tuple(states) if states is not None else (BucketState.NORMAL,) * buckets
    if len(all_states) != buckets:
        raise _refuse("buckets", f"{buckets} buckets but {len(all_states)} states were given", buckets)
    paused_set = frozenset(int(b) for b in paused)
    outside = sorted(b for b in paused_set if not 0 <= b < buckets)
    if outside:
        raise _refuse("paused", f"bucket {outside[0]} is outside 0..{buckets - 1}", outside[0])
    states_config, node_states = _states_config(base, t, slot_count, all_states, paused_set, name)
    lt = legacy_table or t.name
    why = name_problem(lt, "table name")
    if why is not None:
        raise _refuse("legacy.table", why, lt)
    return CutoverRouting(
        name, t.name, legacy, legacy.name, lt, buckets, all_states, paused_set, float(fence_after_s),
        slot_count, states_config, _legacy_config(base, t, legacy, lt), node_states,
    )  # fmt: skip


def _node_name(state: BucketState, paused: bool) -> str:
    return f"cut_{state.value}" + ("_paused" if paused else "")


def _states_config(
    base: ShardingConfig, t: ShardedTable, slot_count: int, states: tuple[BucketState, ...],
    paused: frozenset[int], name: str,
) -> tuple[ShardingConfig, dict[str, tuple[BucketState, bool]]]:
    """``t`` with its database algorithm's slot map pointing each slot at its bucket's state node."""
    from ddm_core.metadata.load import parse_config

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
    config = parse_config(doc, origin=f"cutover {name!r} states", format="native", check_env=False)
    return config, node_states


def _legacy_config(base: ShardingConfig, t: ShardedTable, legacy: DataSource, legacy_table: str) -> ShardingConfig:
    """``t`` as the one legacy table, keeping its key generation (INSERTs reuse the shards' keys)."""
    table = ShardedTable(t.name, (DataNode(legacy.name, legacy_table),), key_generation=t.key_generation)
    generators = {} if t.key_generation is None else {t.key_generation.generator.name: t.key_generation.generator}
    return ShardingConfig(
        {legacy.name: legacy}, {t.name: table}, runtime=base.runtime, key_generators=generators, name=base.name,
    )  # fmt: skip


# -- documents -----------------------------------------------------------------------------------


def cutover_block(routing: CutoverRouting, legacy: Mapping[str, Any]) -> dict[str, Any]:
    """The native ``cutover:`` block of ``routing``; ``legacy`` is its data source as a ``dataSources`` entry."""
    return _block(
        routing.name, routing.table, {"name": routing.legacy_name, **legacy, "table": routing.legacy_table},
        routing.buckets, dict(enumerate(routing.states)), routing.paused, routing.fence_after_s,
    )  # fmt: skip


def _block(
    name: str, table: str, legacy: Mapping[str, Any], buckets: int, states: Mapping[int, BucketState],
    paused: Iterable[int], fence_after_s: float,
) -> dict[str, Any]:
    block: dict[str, Any] = {"name": name, "table": table, "legacy": copy.deepcopy(dict(legacy)), "buckets": buckets}
    for field_name, state in _STATE_FIELDS:
        block[field_name] = format_buckets(b for b, s in states.items() if BucketState(s) is state)
    block["paused"] = format_buckets(paused)
    block["fenceAfterSeconds"] = float(fence_after_s)
    return block


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
        raise _refuse(*problems[0])
    if not isinstance(legacy, Mapping) or not legacy.get("name"):
        raise _refuse("legacy", f"must be a data source mapping with a name, not {legacy!r}", legacy)
    for field_name, numbers in (("states", states.keys()), ("paused", paused)):
        outside = sorted(int(b) for b in numbers if not 0 <= int(b) < buckets)
        if outside:
            raise _refuse(field_name, f"bucket {outside[0]} is outside 0..{buckets - 1}", outside[0])
    doc = native_copy(base)
    doc.pop("migration", None)
    doc["cutover"] = _block(name, table, legacy, buckets, states, paused, fence_after_s)
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
        sets = {state: parse_buckets(raw[f], buckets, sec.field_path(f)) for f, state in _STATE_FIELDS}
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


def attach_cutover(config: ShardingConfig, spec: CutoverSpec, ctx: Context) -> ShardingConfig:
    """``config`` with its cut-over routing (problems go to ``ctx.problems``; ``config`` unchanged then)."""
    import dataclasses

    try:
        routing = cutover_routing(
            config, name=spec.name, table=spec.table, legacy=spec.legacy, legacy_table=spec.legacy_table,
            buckets=spec.buckets, states=spec.states, paused=spec.paused, fence_after_s=spec.fence_after_s,
        )  # fmt: skip
    except DdmError as exc:
        path = str(exc.context.get("field") or "cutover")
        ctx.problems.add(path, exc.message.removeprefix(f"{path}: "), exc.context.get("value"))
        return config
    return dataclasses.replace(config, cutover=routing)
