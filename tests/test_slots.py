"""The slot→node map: lookups, routing, resizes that move the fewest slots.

Expectations are computed here from first principles (``xxhash`` for slots,
``numpy`` for counts, a counting bound for the fewest moves), never read back
from ``slot_layout``.
"""

from __future__ import annotations

import copy
import pickle
from typing import Any

import numpy as np
import pytest
import xxhash
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ddm_core._fast import Implementation
from ddm_core.errors import ShardValueError

FAST = settings(max_examples=100, deadline=None)

INT64_MIN = -(1 << 63)
UINT64_MAX = (1 << 64) - 1


def oracle_slot(value: Any, bits: int) -> int:
    """Independent slot computation for int/str/bytes keys."""
    if isinstance(value, (int, np.integer)):
        v = int(value)
        data = v.to_bytes(8, "little", signed=v < 1 << 63)
    elif isinstance(value, str):
        data = value.encode()
    else:
        data = bytes(value)
    return xxhash.xxh3_64_intdigest(data) >> (64 - bits)


keys = st.one_of(st.integers(INT64_MIN, UINT64_MAX), st.text(max_size=30), st.binary(max_size=30))


@st.composite
def node_arrays(draw: st.DrawFn, max_bits: int = 8, max_nodes: int = 12) -> list[int]:
    """Arbitrary (possibly unbalanced) slot→node lists of length 2**k."""
    bits = draw(st.integers(1, max_bits))
    n = draw(st.integers(1, min(max_nodes, 1 << bits)))  # a map has at most one node per slot
    return draw(st.lists(st.integers(0, n - 1), min_size=1 << bits, max_size=1 << bits))


def fewest_moves(counts: np.ndarray, n_new: int) -> int:
    """The least number of slots any balanced resize must move.

    Balanced: every node ends with S//n or S//n + 1 slots, S % n of them with the
    extra. A surviving node keeps at most its target; a removed node keeps nothing.
    Handing the extras to the nodes that already hold more than S//n keeps the most.
    """
    total = int(counts.sum())
    base, extra = divmod(total, n_new)
    have = np.zeros(n_new, dtype=np.int64)
    k = min(len(counts), n_new)
    have[:k] = counts[:k]
    kept = int(np.minimum(have, base).sum()) + min(extra, int((have > base).sum()))
    return total - kept


# -- construction and validation ------------------------------------------------------


def test_construct(impl: Implementation) -> None:
    m = impl.slots.SlotMap([0, 1, 1, 0])
    assert m.nodes.tolist() == [0, 1, 1, 0]
    assert m.nodes.dtype == np.int32
    assert (m.slot_bits, m.n_nodes, m.n_slots, len(m)) == (2, 2, 4, 4)
    # n_nodes may exceed the nodes in use (a node that owns nothing yet).
    wide = impl.slots.SlotMap(np.zeros(8, dtype=np.uint8), n_nodes=3)
    assert wide.n_nodes == 3 and wide.counts().tolist() == [8, 0, 0]


def test_input_is_copied(impl: Implementation) -> None:
    src = np.array([0, 1, 0, 1])
    m = impl.slots.SlotMap(src)
    src[:] = 0
    assert m.nodes.tolist() == [0, 1, 0, 1]
    assert m.node_of(1) == 1


@pytest.mark.parametrize(
    ("nodes", "n_nodes", "named"),
    [
        ([0, 1, 0], None, "shape (3,)"),  # not a power of two
        ([0], None, "shape (1,)"),  # 2**0 slots
        ([], None, "shape (0,)"),
        ([[0, 1], [1, 0]], None, "shape (2, 2)"),
        (np.zeros(1 << 17, dtype=np.int32), None, "shape (131072,)"),
        ([0, -1], None, "node -1"),
        ([0, 1, 2, 5], 4, "slot 3 maps to node 5, outside 0..3"),
        ([0, 1, 1, 0], 1, "slot 1 maps to node 1, outside 0..0"),
        ([0.0, 1.5], None, "float64"),
        ([True, False], None, "bool"),
        (["a", "b"], None, "<U1"),
        ([[0], [0, 1]], None, "1-D array"),  # ragged
        ([0, 1], 0, "not 0"),
        ([0, 1], 3, "not 3"),  # more nodes than slots
        ([0, 1], 2.0, "not 2.0"),
    ],
    ids=lambda v: repr(v)[:30],
)
def test_bad_maps(impl: Implementation, nodes: Any, n_nodes: Any, named: str) -> None:
    with pytest.raises(ShardValueError) as info:
        impl.slots.SlotMap(nodes, n_nodes)
    assert named in str(info.value)


@pytest.mark.parametrize(("n", "bits"), [(1, 10), (3, 10), (4, 10), (5, 10), (7, 4), (6, 10), (1024, 10), (2, 1), (9, 16)])
def test_even(impl: Implementation, n: int, bits: int) -> None:
    m = impl.slots.SlotMap.even(n, bits)
    s = 1 << bits
    assert isinstance(m, impl.slots.SlotMap)
    assert (m.n_nodes, m.slot_bits, m.n_slots) == (n, bits, s)
    counts = m.counts()
    assert counts.tolist() == np.bincount(m.nodes, minlength=n).tolist()
    assert counts.sum() == s and counts.max() - counts.min() <= 1
    assert np.all(np.abs(counts - s / n) < 1)
    # Contiguous ranges, in node order: each node owns one run of slots.
    assert np.all(np.diff(m.nodes) >= 0) and m.nodes[0] == 0 and m.nodes[-1] == n - 1
    assert impl.slots.SlotMap.even(n) == impl.slots.SlotMap.even(n, 10)


@pytest.mark.parametrize(("n", "bits"), [(0, 10), (-1, 10), (5, 2), (4, 0), (4, 17), (4.0, 10), (2, True)])
def test_even_rejects(impl: Implementation, n: Any, bits: Any) -> None:
    with pytest.raises(ShardValueError):
        impl.slots.SlotMap.even(n, bits)


# -- lookups ---------------------------------------------------------------------------


def test_node_of_and_nodes_of(impl: Implementation) -> None:
    rng = np.random.default_rng(7)
    nodes = rng.integers(0, 5, size=256)
    m = impl.slots.SlotMap(nodes, 5)
    for slot in range(256):
        got = m.node_of(slot)
        assert got == nodes[slot] and type(got) is int
    assert m.node_of(np.int64(3)) == nodes[3]
    slots = rng.integers(0, 256, size=1000)
    out = m.nodes_of(slots)
    assert out.dtype == np.int32 and out.tolist() == nodes[slots].tolist()
    assert m.nodes_of(slots.astype(np.uint16)).tolist() == nodes[slots].tolist()
    assert m.nodes_of(list(slots[:5])).tolist() == nodes[slots[:5]].tolist()
    grid = slots[:12].reshape(3, 4)
    assert m.nodes_of(grid).shape == (3, 4)
    assert m.nodes_of(grid).tolist() == nodes[grid].tolist()
    assert m.nodes_of([]).shape == (0,)
    assert m.nodes_of(np.array([], dtype=np.int64)).dtype == np.int32


@pytest.mark.parametrize("slot", [-1, 256, 1 << 70, -(1 << 70)])
def test_node_of_out_of_range(impl: Implementation, slot: int) -> None:
    m = impl.slots.SlotMap.even(3, 8)
    with pytest.raises(ShardValueError, match=f"slot {slot} is outside 0..255"):
        m.node_of(slot)


@pytest.mark.parametrize(
    ("slots", "named"),
    [
        ([0, 5, 256, 300], "slot 256 is outside 0..255"),  # names the first bad slot
        ([-3], "slot -3 is outside 0..255"),
        (np.array([1 << 40]), f"slot {1 << 40} is outside"),
        (np.array([2**64 - 1], dtype=np.uint64), f"slot {2**64 - 1} is outside"),
        ([1.5], "float64"),  # a float slot is not silently truncated
    ],
)
def test_nodes_of_rejects(impl: Implementation, slots: Any, named: str) -> None:
    m = impl.slots.SlotMap.even(3, 8)
    with pytest.raises(ShardValueError) as info:
        m.nodes_of(slots)
    assert named in str(info.value)


def test_slots_of_node_and_counts(impl: Implementation) -> None:
    m = impl.slots.SlotMap([2, 0, 2, 2, 0, 0, 0, 2], n_nodes=4)
    assert m.slots_of_node(0).tolist() == [1, 4, 5, 6]
    assert m.slots_of_node(2).tolist() == [0, 2, 3, 7]
    assert m.slots_of_node(1).tolist() == [] and m.slots_of_node(3).tolist() == []
    assert m.slots_of_node(0).dtype == np.int32
    assert m.counts().tolist() == [4, 0, 4, 0]
    for bad in (-1, 4, 2.0, True):
        with pytest.raises(ShardValueError, match="not a node of this map"):
            m.slots_of_node(bad)  # type: ignore[arg-type]


@FAST
@given(nodes=node_arrays())
def test_slots_of_node_partition(impl: Implementation, nodes: list[int]) -> None:
    m = impl.slots.SlotMap(nodes)
    owned = [m.slots_of_node(n) for n in range(m.n_nodes)]
    assert sorted(np.concatenate(owned).tolist()) == list(range(len(nodes)))
    for node, slots in enumerate(owned):
        assert np.all(np.diff(slots) > 0) and len(slots) == m.counts()[node]
        assert all(nodes[s] == node for s in slots)


# -- routing -----------------------------------------------------------------------------


@FAST
@given(nodes=node_arrays(max_bits=10), key=keys)
def test_route_is_node_of_slot(impl: Implementation, nodes: list[int], key: Any) -> None:
    m = impl.slots.SlotMap(nodes)
    slot = oracle_slot(key, m.slot_bits)
    assert impl.hashing.slot_of(key, m.slot_bits) == slot
    assert m.route(key) == m.node_of(slot) == nodes[slot]


@FAST
@given(nodes=node_arrays(max_bits=10), values=st.lists(keys, max_size=30))
def test_route_many_matches_route(both: tuple[Implementation, Implementation], nodes: list[int], values: list[Any]) -> None:
    c, py = both
    expected = [nodes[oracle_slot(v, len(nodes).bit_length() - 1)] for v in values]
    for impl in both:
        m = impl.slots.SlotMap(nodes)
        out = m.route_many(values)
        assert out.dtype == np.int32 and out.tolist() == expected
        assert [m.route(v) for v in values] == expected
    assert c.slots.SlotMap(nodes).route_many(values).tolist() == py.slots.SlotMap(nodes).route_many(values).tolist()


@FAST
@given(data=st.data(), dtype=st.sampled_from([np.int64, np.uint64, np.int32]), nodes=node_arrays(max_bits=10))
def test_route_many_arrays(
    both: tuple[Implementation, Implementation], data: st.DataObject, dtype: Any, nodes: list[int]
) -> None:
    info = np.iinfo(dtype)
    values = data.draw(st.lists(st.integers(int(info.min), int(info.max)), max_size=60))
    arr = np.array(values, dtype=dtype)
    bits = len(nodes).bit_length() - 1
    expected = [nodes[oracle_slot(v, bits)] for v in values]
    for impl in both:
        m = impl.slots.SlotMap(nodes)
        assert m.route_many(arr).tolist() == expected
        assert m.route_many(arr[::-1]).tolist() == expected[::-1]  # a negative-stride view
        assert [m.route(v) for v in arr] == expected


@pytest.mark.parametrize(
    ("value", "named"),
    [(None, "None"), (1.5, "1.5"), (1 << 64, str(1 << 64)), ("\ud800", repr("\ud800"))],
)
def test_route_rejects(impl: Implementation, value: Any, named: str) -> None:
    m = impl.slots.SlotMap.even(4)
    with pytest.raises(ShardValueError) as info:
        m.route(value)
    assert named in str(info.value)
    with pytest.raises(ShardValueError):
        m.route_many([1, value])


def test_route_many_survives_a_key_that_mutates_the_batch(impl: Implementation) -> None:
    batch: list[Any] = []

    class Shrinker:
        def __index__(self) -> int:
            batch.clear()  # user code run while the batch is hashed
            return 1

    batch.extend([Shrinker(), 2, 3])
    m = impl.slots.SlotMap.even(4)
    assert m.route_many(batch).tolist() == [m.route(1), m.route(2), m.route(3)]


@pytest.mark.parametrize("values", ["abc", b"abc", np.zeros((2, 2), dtype=np.int64)], ids=["str", "bytes", "2-d"])
def test_route_many_rejects_non_batches(impl: Implementation, values: Any) -> None:
    with pytest.raises(ShardValueError, match="batch"):
        impl.slots.SlotMap.even(4).route_many(values)


# -- resizing ---------------------------------------------------------------------------


def _check_resize(impl: Implementation, old: Any, n_new: int) -> tuple[Any, np.ndarray]:
    """Shared invariants of moved_to: balance, minimality, an honest moved list."""
    new, moved = old.moved_to(n_new)
    s = old.n_slots
    assert isinstance(new, impl.slots.SlotMap)
    assert (new.n_nodes, new.slot_bits) == (n_new, old.slot_bits)
    counts = new.counts()
    assert len(counts) == n_new and counts.sum() == s
    assert np.all(np.abs(counts - s / n_new) < 1)  # every node within 1 of S/n
    changed = np.flatnonzero(old.nodes != new.nodes)
    assert moved.dtype == np.int32 and moved.tolist() == changed.tolist()  # sorted, exact
    assert len(moved) == fewest_moves(old.counts(), n_new)  # nothing moves that need not
    # No node both gives and receives (so no slot hops between two staying nodes needlessly).
    givers = set(old.nodes[moved].tolist())
    takers = set(new.nodes[moved].tolist())
    assert not givers & takers
    return new, moved


def test_grow_4_to_8(impl: Implementation) -> None:
    old = impl.slots.SlotMap.even(4)
    new, moved = _check_resize(impl, old, 8)
    assert len(moved) == 512  # exactly half
    assert np.all(old.nodes[moved] < 4) and np.all(new.nodes[moved] >= 4)  # old → new only
    kept = np.setdiff1d(np.arange(1024), moved)
    assert np.all(new.nodes[kept] == old.nodes[kept])
    # Each old node hands exactly half its slots to exactly one new node.
    for node in range(4):
        mine = moved[old.nodes[moved] == node]
        assert len(mine) == 128 and len(set(new.nodes[mine].tolist())) == 1


@pytest.mark.parametrize(("n_old", "n_new", "n_moved"), [(3, 5, 409), (8, 4, 512), (1, 2, 512), (5, 3, 409), (2, 1, 512), (4, 1024, 1020)])
def test_resizes(impl: Implementation, n_old: int, n_new: int, n_moved: int) -> None:
    old = impl.slots.SlotMap.even(n_old)
    new, moved = _check_resize(impl, old, n_new)
    assert len(moved) == n_moved  # hand-computed: the slots the added/removed nodes account for
    if n_new > n_old:
        assert np.all(old.nodes[moved] < n_old) and np.all(new.nodes[moved] >= n_old)
    else:
        assert np.all(old.nodes[moved] >= n_new) and np.all(new.nodes[moved] < n_new)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 6, 7, 10, 100, 1000])
def test_resize_to_same_size_moves_nothing(impl: Implementation, n: int) -> None:
    m = impl.slots.SlotMap.even(n)
    new, moved = m.moved_to(n)
    assert moved.tolist() == [] and new == m


def test_resize_chain_stays_balanced(impl: Implementation) -> None:
    m = impl.slots.SlotMap.even(4)
    for n in (8, 6, 12, 3, 7, 1, 2):
        m, _ = _check_resize(impl, m, n)


@FAST
@given(nodes=node_arrays(), n_new=st.integers(1, 20))
def test_resize_any_map(both: tuple[Implementation, Implementation], nodes: list[int], n_new: int) -> None:
    assume(n_new <= len(nodes))
    c, py = both
    results = [_check_resize(impl, impl.slots.SlotMap(nodes), n_new) for impl in both]
    (c_map, c_moved), (py_map, py_moved) = results
    assert c_map == py_map and c_moved.tolist() == py_moved.tolist()


@pytest.mark.parametrize("n_new", [0, 1025, -1, 2.0])
def test_moved_to_rejects(impl: Implementation, n_new: Any) -> None:
    with pytest.raises(ShardValueError, match="n_nodes"):
        impl.slots.SlotMap.even(4).moved_to(n_new)


def test_split(impl: Implementation) -> None:
    m = impl.slots.SlotMap([0, 2, 1, 2], n_nodes=3)
    child = m.split()
    assert (child.slot_bits, child.n_slots, child.n_nodes) == (3, 8, 3)
    assert child.nodes.tolist() == [0, 0, 2, 2, 1, 1, 2, 2]
    assert m.nodes.tolist() == [0, 2, 1, 2]  # the original is untouched
    with pytest.raises(ShardValueError, match="2\\*\\*16"):
        impl.slots.SlotMap.even(3, 16).split()


@FAST
@given(nodes=node_arrays(max_bits=9), key=keys)
def test_split_keeps_every_key_on_its_node(impl: Implementation, nodes: list[int], key: Any) -> None:
    m = impl.slots.SlotMap(nodes)
    child = m.split()
    slot = impl.hashing.slot_of(key, m.slot_bits)
    assert impl.hashing.slot_of(key, child.slot_bits) >> 1 == slot  # lands in child 2s or 2s+1
    assert child.route(key) == m.route(key)


# -- value semantics ---------------------------------------------------------------------------


def test_equality_and_hash(impl: Implementation) -> None:
    a = impl.slots.SlotMap([0, 1, 1, 0])
    b = impl.slots.SlotMap(np.array([0, 1, 1, 0], dtype=np.int64))
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != impl.slots.SlotMap([0, 1, 0, 1])
    assert a != impl.slots.SlotMap([0, 1, 1, 0], n_nodes=3)  # same slots, another cluster size
    assert a != impl.slots.SlotMap([0, 1, 1, 0, 0, 1, 1, 0])
    assert a != [0, 1, 1, 0] and a != "map"


def test_equal_across_implementations(both: tuple[Implementation, Implementation]) -> None:
    c, py = both
    assert c.slots.SlotMap.even(5) == py.slots.SlotMap.even(5)
    assert hash(c.slots.SlotMap.even(5)) == hash(py.slots.SlotMap.even(5))


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_pickle(impl: Implementation, protocol: int) -> None:
    m = impl.slots.SlotMap.even(3, 6)
    back = pickle.loads(pickle.dumps(m, protocol))
    assert type(back) is type(m) and back == m and back.n_nodes == 3
    assert [back.route(k) for k in range(50)] == [m.route(k) for k in range(50)]
    assert not back.nodes.flags.writeable


def test_copy(impl: Implementation) -> None:
    m = impl.slots.SlotMap([0, 1, 2, 0], n_nodes=4)
    for dup in (copy.copy(m), copy.deepcopy(m)):
        assert dup == m and dup.n_nodes == 4


def test_immutable(impl: Implementation) -> None:
    m = impl.slots.SlotMap.even(4, 4)
    before = m.nodes.tolist()
    with pytest.raises(ValueError):
        m.nodes[0] = 3
    # Flipping the flag back must fail too, or the map could be edited in place.
    with pytest.raises(ValueError):
        m.nodes.flags.writeable = True
    with pytest.raises(AttributeError):
        m.nodes = np.zeros(16, dtype=np.int32)  # type: ignore[misc]
    with pytest.raises(AttributeError):
        m.n_nodes = 9  # type: ignore[misc]
    with pytest.raises(AttributeError):
        m.extra = 1  # type: ignore[attr-defined]
    m.moved_to(8)
    m.split()
    assert m.nodes.tolist() == before and m.n_nodes == 4 and m.route(1) == before[oracle_slot(1, 4)]


def test_repr(impl: Implementation) -> None:
    assert repr(impl.slots.SlotMap([0, 1, 1, 1])) == "SlotMap(slots=4, nodes=2, counts=[1, 3])"


def test_public_module(impl: Implementation) -> None:
    import ddm_core
    from ddm_core import _fast, slots

    assert slots.SlotMap is _fast.SELECTED.slots.SlotMap is ddm_core.SlotMap
    # The selected map and this parametrization's map route alike.
    assert slots.SlotMap.even(4).route("k") == impl.slots.SlotMap.even(4).route("k")
