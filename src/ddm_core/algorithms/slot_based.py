"""Pre-sharded slots: SLOTS (the default for ddm-core's own format) and GENE.

Hash the key into a fixed number of slots (1024 by default), then look the
slot's owner up in a slot → target table. Growing from 4 to 8 targets moves
exactly the slots that change owner (half of them), batch by batch, without
touching the hash — unlike MOD, which recomputes every row's shard — and the
table is explicit metadata that can be diffed, reviewed and pushed
(docs/architecture.md#slots-rather-than-modulo-or-a-hash-ring).

SLOTS
    ``slot = slot_of(key, slot-bits)`` (the high bits of xxh3_64, compiled),
    ``target = layout[slot]``. The layout is either even over the targets
    passed in (target ``i`` owns slots ``[i·S/n, (i+1)·S/n)``,
    :meth:`ddm_core.slots.SlotMap.even`) or explicit::

        slots: {ds_0: "0-255", ds_1: "256-511,768-1023", ds_2: "512-767"}

    An explicit layout must cover every slot exactly once; the ConfigError
    names the first gaps and overlaps. Route-time targets must include the
    owner a value hashes to (a RoutingError otherwise — never another one).

GENE
    The gene method (docs/architecture.md#gene-ids): an order id made by
    :class:`~ddm_core.ids.GeneIdGenerator` for a user carries that user's
    slot in its low ``gene-bits`` bits, so ``WHERE order_id = ?`` finds the
    user's shard without the user id. GENE routes an id by
    ``gene_of(id, gene-bits)`` through the same layout as SLOTS with
    ``slot-bits == gene-bits``: ``GENE.precise(t, {"order_id": oid}) ==
    SLOTS.precise(t, {"user_id": uid})``. Columns listed in ``key-columns``
    (e.g. ``user_id``) are hashed like SLOTS instead, so one table strategy
    serves both ``user_id = ?`` and ``order_id = ?``; when both arrive they
    must agree (a row whose order id carries another user's gene is refused).
    Hand-rolled gene ids that carry ``user_id % 32`` rather than a hashed
    slot route with INLINE ``t_order_${order_id % 32}`` instead.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ddm_core.errors import ConfigError, RoutingError, ShardValueError
from ddm_core.hashing import slot_of, slots_of
from ddm_core.slots import SlotMap
from ddm_core.algorithms._props import Props
from ddm_core.algorithms._targets import TargetSet, missing_targets_error, show_targets, target_set
from ddm_core.algorithms._values import KEY_TYPES, as_int, as_key, int_array, key_array, null_error, relabel
from ddm_core.algorithms.base import ShardingAlgorithm
from ddm_core.algorithms.registry import register

__all__ = ["SlotsAlgorithm", "GeneAlgorithm", "parse_slot_spec", "slot_layout_spec"]

_RANGE = re.compile(r"\s*([0-9]+)\s*(?:-\s*([0-9]+)\s*)?")


def parse_slot_spec(spec: Any, n_slots: int) -> list[tuple[int, int]]:
    """``"0-255,512-600"`` (or ``7``, or a list of those) → inclusive ``(lo, hi)`` pairs.

    Raises:
        ValueError: malformed, reversed, or outside ``0..n_slots-1``.
    """
    items: list[Any]
    if isinstance(spec, (list, tuple)):
        items = list(spec)
    else:
        items = [spec]
    out: list[tuple[int, int]] = []
    for item in items:
        if type(item) is int:
            parts: list[tuple[int, int]] = [(item, item)]
        elif isinstance(item, str):
            parts = []
            for chunk in item.split(","):
                m = _RANGE.fullmatch(chunk)
                if m is None:
                    raise ValueError(f"{chunk.strip()!r} is not a slot or a lo-hi slot range")
                lo = int(m.group(1))
                parts.append((lo, int(m.group(2)) if m.group(2) is not None else lo))
        else:
            raise ValueError(f"{item!r} is not a slot number or a 'lo-hi' range string")
        for lo, hi in parts:
            if lo > hi:
                raise ValueError(f"slot range {lo}-{hi} is reversed")
            if hi >= n_slots:
                raise ValueError(f"slot {hi} is outside 0..{n_slots - 1}")
            out.append((lo, hi))
    return out


def slot_layout_spec(slot_map: SlotMap, names: Sequence[str]) -> dict[str, str]:
    """The ``slots`` prop describing ``slot_map`` with node ``i`` named ``names[i]``.

    Growing a SLOTS/GENE table: ``new, moved = old_map.moved_to(8)`` (moves the
    fewest slots), then configure ``slots:
    slot_layout_spec(new, names)`` — the even layout over a longer target list
    would move far more than the slots ``moved_to`` chose.
    """
    if len(names) != slot_map.n_nodes:
        raise ConfigError(
            f"slot map has {slot_map.n_nodes} nodes but {len(names)} names were given", value=list(names)
        )
    nodes = np.asarray(slot_map.nodes)
    spec: dict[str, str] = {}
    for node, name in enumerate(names):
        owned = np.flatnonzero(nodes == node)
        if owned.size:
            spec[name] = _runs(owned, limit=1 << 20)
    return spec


def _runs(slots: np.ndarray, limit: int = 5) -> str:
    """``"3-7, 12"`` for sorted slot numbers (the first ``limit`` runs, then ``...``)."""
    values = slots.tolist()
    runs: list[str] = []
    start = prev = values[0]
    for s in values[1:] + [None]:
        if s is not None and s == prev + 1:
            prev = s
            continue
        if len(runs) == limit:
            runs.append("...")
            break
        runs.append(f"{start}-{prev}" if prev != start else str(start))
        if s is not None:
            start = prev = s
    return ", ".join(runs)


class _SlotLayout:
    """The slot → target layout shared by SLOTS and GENE."""

    PROPS = {"slots": "explicit layout {target: 'lo-hi,...'}; default: even over the targets"}

    def __init__(self, props: Props, slot_bits: int, bits_prop: str) -> None:
        self.slot_bits = slot_bits
        self.n_slots = 1 << slot_bits
        raw = props.raw("slots", None)
        self.explicit: SlotMap | None = None
        self.names: tuple[str, ...] = ()
        self._cache: dict[TargetSet, tuple[SlotMap, list[int] | None, np.ndarray | None]] = {}
        if raw is None:
            return
        if not isinstance(raw, Mapping) or not raw:
            props.fail("slots", raw, "must map target names to slot ranges like '0-255,512-600'")
        owner = np.full(self.n_slots, -1, dtype=np.int64)
        overlaps: list[str] = []
        names = []
        for node, (target, spec) in enumerate(raw.items()):
            if not isinstance(target, str) or not target:
                props.fail("slots", raw, f"target names must be non-empty strings, got {target!r}")
            names.append(target)
            try:
                ranges = parse_slot_spec(spec, self.n_slots)
            except ValueError as exc:
                props.fail("slots", spec, f"target {target!r}: {exc} ({bits_prop} = {slot_bits})")
            for lo, hi in ranges:
                taken = owner[lo : hi + 1]
                clash = np.flatnonzero(taken >= 0)
                if clash.size:
                    other = names[int(taken[clash[0]])]
                    overlaps.append(
                        f"{target!r} and {other!r} both claim slot(s) {_runs(clash + lo)}"
                    )
                taken[taken < 0] = node
        gaps = np.flatnonzero(owner < 0)
        problems = overlaps[:3]
        if gaps.size:
            problems.append(f"slot(s) {_runs(gaps)} have no target ({gaps.size} of {self.n_slots} uncovered)")
        if problems:
            props.fail("slots", raw, "; ".join(problems))
        self.names = tuple(names)
        self.explicit = SlotMap(owner.astype(np.int32), len(names))

    def resolve(self, ts: TargetSet, label: str, name: str) -> tuple[SlotMap, list[int] | None, np.ndarray | None]:
        """(slot map, node → target index list or None for identity, the same as an array)."""
        found = self._cache.get(ts)
        if found is not None:
            return found
        if self.explicit is None:
            if not 1 <= len(ts) <= self.n_slots:
                raise ConfigError(
                    f"sharding algorithm {label}: {len(ts)} targets cannot share {self.n_slots} slots "
                    "evenly (need 1..slots targets)",
                    algorithm=name,
                )
            found = (SlotMap.even(len(ts), self.slot_bits), None, None)
        else:
            trans = [ts.position.get(n, -1) for n in self.names]
            found = (self.explicit, trans, np.array(trans, dtype=np.intp))
        if len(self._cache) > 256:
            self._cache.clear()
        self._cache[ts] = found
        return found

    def slot_lut(self, ts: TargetSet, label: str, name: str) -> list[int]:
        """``lut[slot]`` = index of the target owning ``slot`` (``-1``: its owner is not in ``ts``)."""
        smap, trans, _ = self.resolve(ts, label, name)
        nodes: list[int] = np.asarray(smap.nodes).tolist()
        return nodes if trans is None else [trans[n] for n in nodes]

    def check(self, ts: TargetSet, label: str, name: str) -> None:
        if self.explicit is not None:
            missing = [n for n in self.names if n not in ts.position]
            if missing:
                raise missing_targets_error(label, name, "the slot layout names", missing, ts)
        else:
            self.resolve(ts, label, name)

    def target_of_node(
        self, ts: TargetSet, trans: list[int] | None, node: int, value: Any, label: str, name: str
    ) -> str:
        if trans is None:
            return ts.names[node]
        i = trans[node]
        if i < 0:
            raise RoutingError(
                f"{label}: value {value!r} lives on {self.names[node]!r}, which is not among "
                f"the available targets {show_targets(ts.names)}",
                algorithm=name,
                value=value,
                target=self.names[node],
            )
        return ts.names[i]

    def indices(
        self, ts: TargetSet, trans: np.ndarray | None, nodes: np.ndarray, values: np.ndarray, label: str, name: str
    ) -> np.ndarray:
        if trans is None:
            return nodes.astype(np.intp)
        idx: np.ndarray = trans[nodes]
        if idx.size and idx.min() < 0:
            row = int(np.flatnonzero(idx < 0)[0])
            value = values[row]
            raise RoutingError(
                f"{label}: row {row}: value {value!r} lives on {self.names[int(nodes[row])]!r}, "
                f"which is not among the available targets {show_targets(ts.names)}",
                algorithm=name,
                value=value,
                row=row,
            )
        return idx

    def describe(self) -> str:
        return f"explicit over {len(self.names)} targets" if self.explicit is not None else "even"


def _relabel(exc: ShardValueError, label: str, name: str, column: str) -> ShardValueError:
    return relabel(exc, label, name, column, value=exc.context.get("value"))


def _key_slot(value: Any, key_type: str, slot_bits: int, label: str, name: str, column: str) -> int:
    """The hash slot of a key value (SLOTS, and GENE's key columns)."""
    key = as_key(value, key_type, label, name, column)
    try:
        return int(slot_of(key, slot_bits))
    except ShardValueError as exc:
        raise _relabel(exc, label, name, column) from None


@register
class SlotsAlgorithm(ShardingAlgorithm):
    """``SLOTS``: xxh3 slot of the key → owner in a slot layout."""

    type_name = "SLOTS"
    PROPS = {
        "slot-bits": "log2 of the slot count, 1..16 (default 10: 1024 slots)",
        "key-type": "auto (default) | int | str: what the column holds",
        **_SlotLayout.PROPS,
    }

    def _configure(self, props: Props) -> None:
        self.slot_bits = props.integer("slot-bits", 10, min=1, max=16)
        self.key_type = props.text("key-type", "auto", choices=KEY_TYPES)
        self.layout = _SlotLayout(props, self.slot_bits, "slot-bits")

    def slot(self, value: Any, column: str = "?") -> int:
        """The slot of a key value."""
        return _key_slot(value, self.key_type, self.slot_bits, self.label, self.name, column)

    def precise(self, targets: Sequence[str], values: Mapping[str, Any]) -> list[str]:
        column, value = self._single(values)
        if value is None:
            raise null_error(self.label, self.name, column)
        key = value if self.key_type == "auto" else as_key(value, self.key_type, self.label, self.name, column)
        ts = target_set(targets)
        smap, trans, _ = self.layout.resolve(ts, self.label, self.name)
        try:
            node = smap.route(key)
        except ShardValueError as exc:
            raise _relabel(exc, self.label, self.name, column) from None
        if trans is None:
            return [ts.names[node]]
        return [self.layout.target_of_node(ts, trans, node, value, self.label, self.name)]

    def target_of_slot(self, targets: Sequence[str], slot: int) -> list[str]:
        """The target owning ``slot`` (the router's gene-id path: an id's gene is a slot)."""
        ts = target_set(targets)
        smap, trans, _ = self.layout.resolve(ts, self.label, self.name)
        return [self.layout.target_of_node(ts, trans, smap.node_of(slot), slot, self.label, self.name)]

    def scalar(self, targets: Sequence[str], column: str) -> Callable[[Any], int]:
        ts = target_set(targets)
        smap, trans, _ = self.layout.resolve(ts, self.label, self.name)
        route = smap.route  # compiled hash + lookup
        key_type = self.key_type
        if key_type == "auto" and trans is None:
            return route  # node i is target i
        if key_type == "auto" and trans is not None and min(trans) >= 0:
            lut = trans
            return lambda value: lut[route(value)]
        label, name, slow = self.label, self.name, super().scalar(targets, column)

        def index(value: Any) -> int:
            node = route(value if key_type == "auto" else as_key(value, key_type, label, name, column))
            i = node if trans is None else trans[node]
            return i if i >= 0 else slow(value)  # an owner that is not a target: precise names it

        return index

    def slot_scalar(self, targets: Sequence[str]) -> Callable[[int], int]:
        """``slot → index into targets`` (the router's gene-id path; raises like :meth:`target_of_slot`)."""
        ts = target_set(targets)
        lut = self.layout.slot_lut(ts, self.label, self.name)

        def index(slot: int) -> int:
            i = lut[slot]
            return i if i >= 0 else ts.position[self.target_of_slot(ts, slot)[0]]

        return index

    def batch(self, targets: Sequence[str], columns: Mapping[str, np.ndarray]) -> np.ndarray:
        column, arr = self._single_array(columns)
        keys = key_array(arr, self.key_type, self.label, self.name, column)
        ts = target_set(targets)
        smap, _, trans = self.layout.resolve(ts, self.label, self.name)
        try:
            nodes = smap.route_many(keys if keys.dtype.kind in "iu" else keys.tolist())
        except ShardValueError as exc:
            raise _relabel(exc, self.label, self.name, column) from None
        return self.layout.indices(ts, trans, nodes, arr, self.label, self.name)

    def check_targets(self, targets: Sequence[str]) -> None:
        self.layout.check(target_set(targets), self.label, self.name)

    def describe(self) -> str:
        kt = f", key-type={self.key_type}" if self.key_type != "auto" else ""
        return f"SLOTS(slots={1 << self.slot_bits}, {self.layout.describe()}{kt})"


_U64_END = 1 << 64


@register
class GeneAlgorithm(ShardingAlgorithm):
    """``GENE``: route an id by the slot carried in its low ``gene-bits`` bits."""

    type_name = "GENE"
    PROPS = {
        "gene-bits": "bits of the id holding the key's slot, 1..16 (default 10); equals SLOTS slot-bits",
        "key-columns": "columns holding the original key (hashed like SLOTS), e.g. user_id",
        "key-type": "auto (default) | int | str: what the key columns hold",
        **_SlotLayout.PROPS,
    }

    def _configure(self, props: Props) -> None:
        self.gene_bits = props.integer("gene-bits", 10, min=1, max=16)
        self.mask = (1 << self.gene_bits) - 1
        keys = props.columns("key-columns") if props.has("key-columns") else ()
        self.key_columns = tuple(c.lower() for c in keys)
        self.key_type = props.text("key-type", "auto", choices=KEY_TYPES)
        self.layout = _SlotLayout(props, self.gene_bits, "gene-bits")

    def _id(self, value: Any, column: str) -> int:
        n = value if type(value) is int else as_int(value, self.label, self.name, column)
        if not 0 <= n < _U64_END:
            raise ShardValueError(
                f"{self.label}: id {value!r} of {column!r} is negative or wider than 64 bits; "
                "gene ids are positive",
                algorithm=self.name,
                column=column,
                value=value,
            )
        return n

    def slot(self, column: str, value: Any) -> int:
        """The slot a column's value points at: its gene, or a key column's hash slot."""
        if column.lower() in self.key_columns:
            return _key_slot(value, self.key_type, self.gene_bits, self.label, self.name, column)
        return self._id(value, column) & self.mask

    def precise(self, targets: Sequence[str], values: Mapping[str, Any]) -> list[str]:
        if not values:
            self._single(values)  # raises ShardKeyNotFoundError
        slot = -1
        first = ""
        for column, value in values.items():
            s = self.slot(column, value)
            if slot < 0:
                slot, first = s, column
            elif s != slot:
                raise RoutingError(
                    f"{self.label}: {first!r} points at slot {slot} but {column!r} at slot {s}; "
                    f"the values {dict(values)} cannot belong to one row",
                    algorithm=self.name,
                    values=dict(values),
                )
        ts = target_set(targets)
        smap, trans, _ = self.layout.resolve(ts, self.label, self.name)
        node = smap.node_of(slot)
        return [self.layout.target_of_node(ts, trans, node, values, self.label, self.name)]

    def scalar(self, targets: Sequence[str], column: str) -> Callable[[Any], int]:
        ts = target_set(targets)
        lut = self.layout.slot_lut(ts, self.label, self.name)
        slow = super().scalar(targets, column)
        if column.lower() in self.key_columns:
            key_type, bits, label, name = self.key_type, self.gene_bits, self.label, self.name

            def by_key(value: Any) -> int:
                i = lut[_key_slot(value, key_type, bits, label, name, column)]
                return i if i >= 0 else slow(value)

            return by_key
        mask = self.mask

        def by_gene(value: Any) -> int:
            if type(value) is int and 0 <= value < _U64_END:
                i = lut[value & mask]
                if i >= 0:
                    return i
            return slow(value)

        return by_gene

    def batch(self, targets: Sequence[str], columns: Mapping[str, np.ndarray]) -> np.ndarray:
        if not columns:
            self._single(columns)
        slots: np.ndarray | None = None
        first = ""
        for column, arr in columns.items():
            a = np.asarray(arr)
            if column.lower() in self.key_columns:
                keys = key_array(a, self.key_type, self.label, self.name, column)
                try:
                    s = slots_of(keys if keys.dtype.kind in "iu" else keys.tolist(), self.gene_bits)
                except ShardValueError as exc:
                    raise _relabel(exc, self.label, self.name, column) from None
            else:
                ids = int_array(a, self.label, self.name, column)
                if ids.dtype == object:
                    s = np.array([self._id(v, column) & self.mask for v in ids.tolist()], dtype=np.int64)
                else:
                    if ids.dtype.kind == "i" and ids.size and ids.min() < 0:
                        row = int(np.flatnonzero(ids < 0)[0])
                        self._id(int(ids[row]), column)  # raises, naming the value
                    s = (ids & self.mask).astype(np.int64)
            if slots is None:
                slots, first = s.astype(np.int64), column
            else:
                bad = np.flatnonzero(slots != s)
                if bad.size:
                    row = int(bad[0])
                    raise RoutingError(
                        f"{self.label}: row {row}: {first!r} points at slot {int(slots[row])} but "
                        f"{column!r} at slot {int(s[row])}; they cannot belong to one row",
                        algorithm=self.name,
                        row=row,
                    )
        assert slots is not None
        ts = target_set(targets)
        smap, _, trans = self.layout.resolve(ts, self.label, self.name)
        nodes = smap.nodes_of(slots)
        first_values = np.asarray(columns[first])
        return self.layout.indices(ts, trans, nodes, first_values, self.label, self.name)

    def check_targets(self, targets: Sequence[str]) -> None:
        self.layout.check(target_set(targets), self.label, self.name)

    def describe(self) -> str:
        keys = f", key-columns={','.join(self.key_columns)}" if self.key_columns else ""
        return f"GENE(gene-bits={self.gene_bits}, {self.layout.describe()}{keys})"
