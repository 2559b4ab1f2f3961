"""Slot-map layouts, shared by both ``SlotMap`` twins (nothing here is hot).

A slot map is an ``int32`` array of ``2**slot_bits`` node indices. This module
validates such arrays, builds the even layout, plans a resize that moves the
fewest slots, and holds :class:`SlotMapOps`, the non-hot half of ``SlotMap``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
from numpy.typing import NDArray

from ddm_core.errors import ShardValueError
from ddm_core._fast.hashing_py import MAX_SLOT_BITS, check_slot_bits

__all__ = ["validate", "check_slots", "even_layout", "rebalance", "SlotMapOps"]

_M = TypeVar("_M", bound="SlotMapOps")


def _check_n_nodes(n_nodes: Any, n_slots: int) -> int:
    if type(n_nodes) is not int or not 1 <= n_nodes <= n_slots:
        raise ShardValueError(
            f"n_nodes must be an int from 1 to the slot count {n_slots}, not {n_nodes!r}",
            value=n_nodes,
        )
    return n_nodes


def _frozen_int32(arr: np.ndarray) -> NDArray[np.int32]:
    """An int32 copy whose memory is an immutable ``bytes``.

    Clearing ``flags.writeable`` alone is not enough: an array that owns its
    memory can be made writeable again, and a map changed in place would make
    the twins disagree (the pure twin routes from a list copy).
    """
    table = np.frombuffer(np.ascontiguousarray(arr, dtype=np.int32).tobytes(), dtype=np.int32)
    assert not table.flags.writeable
    return table


def validate(nodes: Any, n_nodes: int | None) -> tuple[NDArray[np.int32], int, int]:
    """Check a slot→node array; return it read-only as int32, its slot bits and node count.

    Raises:
        ShardValueError: not a 1-D integer array, length not a power of two in
            ``2..2**16``, a node index negative or ``>= n_nodes``.
    """
    try:
        arr = np.asarray(nodes)
    except (TypeError, ValueError) as exc:  # ragged nesting and the like
        raise ShardValueError(f"a slot map needs a 1-D array of node indices: {exc}", value=nodes) from None
    n_slots = arr.shape[0] if arr.ndim == 1 else 0
    slot_bits = n_slots.bit_length() - 1
    if arr.ndim != 1 or not 1 <= slot_bits <= MAX_SLOT_BITS or n_slots != 1 << slot_bits:
        raise ShardValueError(
            f"a slot map needs a 1-D array of 2**k node indices (k = 1..{MAX_SLOT_BITS}), "
            f"got shape {arr.shape}",
            value=arr.shape,
        )
    if arr.dtype.kind not in "iu":  # a float or bool node index would be silently cast
        raise ShardValueError(
            f"slot map node indices must be integers, got dtype {arr.dtype}", value=str(arr.dtype)
        )
    if n_nodes is None:
        # Infer from the largest index; a negative one is reported below.
        n_nodes = max(int(arr.max()), 0) + 1
    _check_n_nodes(n_nodes, n_slots)
    bad = np.flatnonzero((arr < 0) | (arr >= n_nodes))
    if bad.size:
        slot = int(bad[0])
        raise ShardValueError(
            f"slot {slot} maps to node {int(arr[slot])}, outside 0..{n_nodes - 1} "
            f"({bad.size} slot(s) out of range)",
            value=int(arr[slot]),
            slot=slot,
        )
    return _frozen_int32(arr), slot_bits, n_nodes


def check_slots(slots: Any, n_slots: int) -> NDArray[np.intp]:
    """``slots`` as an ``intp`` array of the same shape, every one in ``0..n_slots-1``.

    Raises:
        ShardValueError: a non-integer dtype (a float slot would be truncated)
            or a slot out of range; the message names the first bad slot.
    """
    arr = np.asarray(slots)
    if arr.size == 0:
        return np.zeros(arr.shape, dtype=np.intp)
    if arr.dtype.kind not in "iu":
        raise ShardValueError(f"slots must be integers, got dtype {arr.dtype}", value=str(arr.dtype))
    bad = np.flatnonzero((arr < 0) | (arr >= n_slots))
    if bad.size:
        slot = int(arr.reshape(-1)[bad[0]])
        raise ShardValueError(
            f"slot {slot} is outside 0..{n_slots - 1} ({bad.size} slot(s) out of range)", value=slot
        )
    return arr.astype(np.intp)


def even_layout(n_nodes: int, slot_bits: int = 10) -> NDArray[np.int32]:
    """Contiguous, balanced ranges: node ``i`` owns slots ``[i*S/n, (i+1)*S/n)``."""
    n_slots = 1 << check_slot_bits(slot_bits)
    _check_n_nodes(n_nodes, n_slots)
    return (np.arange(n_slots, dtype=np.int64) * n_nodes // n_slots).astype(np.int32)


def _shares(have: np.ndarray, n_slots: int, n_nodes: int) -> np.ndarray:
    """Target slot count per node: ``S // n``, plus one for ``S % n`` of them.

    The extra slots go to the nodes that hold the most already (ties: lowest
    index), so a node already at ``S // n + 1`` keeps its slot: resizing a
    balanced map to its own node count then moves nothing.
    """
    share = np.full(n_nodes, n_slots // n_nodes, dtype=np.int64)
    extra = n_slots % n_nodes
    if extra:
        richest = np.argsort(-have[:n_nodes], kind="stable")[:extra]
        share[richest] += 1
    return share


def rebalance(nodes: np.ndarray, n_nodes: int) -> tuple[NDArray[np.int32], NDArray[np.int32]]:
    """Resize to ``n_nodes`` moving as few slots as possible.

    Every node ends with ``S // n`` or ``S // n + 1`` slots. A node over its
    share keeps its lowest slots and gives up the rest; only nodes under their
    share receive, so no slot moves between two nodes that both stay (4→8:
    each old node hands exactly half its slots to one new node).

    Returns:
        The new slot→node array and the sorted slots that changed node.
    """
    n_slots = nodes.shape[0]
    _check_n_nodes(n_nodes, n_slots)
    n_old = int(nodes.max()) + 1
    have = np.bincount(nodes, minlength=max(n_old, n_nodes))
    share = _shares(have, n_slots, n_nodes)
    new = nodes.astype(np.int32, copy=True)
    donated: list[np.ndarray] = []
    for node in range(have.shape[0]):
        keep = int(share[node]) if node < n_nodes else 0
        if have[node] > keep:
            donated.append(np.flatnonzero(nodes == node)[keep:])
    pool = np.concatenate(donated) if donated else np.empty(0, dtype=np.int64)
    at = 0
    for node in range(n_nodes):
        need = int(share[node]) - int(min(have[node], share[node]))
        new[pool[at : at + need]] = node
        at += need
    moved = np.sort(pool[:at]).astype(np.int32)
    return new, moved


class SlotMapOps:
    """The non-hot half of ``SlotMap``: constructors and resizes (return new maps)."""

    __slots__ = ()

    if TYPE_CHECKING:
        # Read-only properties of the hot core (SlotTable) of each twin.
        @property
        def nodes(self) -> NDArray[np.int32]: ...
        @property
        def slot_bits(self) -> int: ...
        @property
        def n_nodes(self) -> int: ...

    @classmethod
    def even(cls: type[_M], n_nodes: int, slot_bits: int = 10) -> _M:
        """``n_nodes`` nodes owning contiguous, balanced slot ranges."""
        return cls(even_layout(n_nodes, slot_bits), n_nodes)  # type: ignore[call-arg]

    def moved_to(self: _M, n_nodes: int) -> tuple[_M, NDArray[np.int32]]:
        """The map resized to ``n_nodes`` and the slots that change node."""
        new, moved = rebalance(self.nodes, n_nodes)
        return type(self)(new, n_nodes), moved  # type: ignore[call-arg]

    def split(self: _M) -> _M:
        """Double the slot count: slot ``s`` becomes ``2s`` and ``2s+1`` on the same node."""
        if self.slot_bits >= MAX_SLOT_BITS:
            raise ShardValueError(
                f"cannot split a map of 2**{self.slot_bits} slots: at most 2**{MAX_SLOT_BITS}",
                value=self.slot_bits,
            )
        return type(self)(np.repeat(self.nodes, 2), self.n_nodes)  # type: ignore[call-arg]

    def slots_of_node(self, node: int) -> NDArray[np.int32]:
        """The slots a node owns, ascending.

        Raises:
            ShardValueError: ``node`` is not a node of this map.
        """
        if type(node) is bool or not isinstance(node, (int, np.integer)) or not 0 <= node < self.n_nodes:
            raise ShardValueError(
                f"node {node!r} is not a node of this map (0..{self.n_nodes - 1})", value=node
            )
        return np.flatnonzero(self.nodes == node).astype(np.int32)

    def counts(self) -> NDArray[np.intp]:
        """Slots per node, indexed by node."""
        return np.bincount(self.nodes, minlength=self.n_nodes)

    @property
    def n_slots(self) -> int:
        return 1 << self.slot_bits

    def __len__(self) -> int:
        return 1 << self.slot_bits

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SlotMapOps):
            return NotImplemented
        return self.n_nodes == other.n_nodes and bool(np.array_equal(self.nodes, other.nodes))

    def __hash__(self) -> int:
        return hash((self.n_nodes, self.nodes.tobytes()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(slots={len(self)}, nodes={self.n_nodes}, counts={self.counts().tolist()})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.nodes, self.n_nodes))
