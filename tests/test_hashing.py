"""Slot hashing: canonical bytes → xxh3_64 → high ``slot_bits`` bits.

Every expectation is computed independently here (``struct`` + the ``xxhash``
package), never read back from the code under test: the encoding is a wire
contract, two processes that disagree on it put the same key on two shards.
"""

from __future__ import annotations

import datetime
import struct
from decimal import Decimal
from typing import Any

import numpy as np
import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from ddm_core._fast import Implementation
from ddm_core.errors import DdmError, ShardValueError
from param_ids import stable_repr

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
UINT64_MAX = (1 << 64) - 1

# -- the independent oracle ----------------------------------------------------


def oracle_bytes(value: Any) -> bytes:
    """The canonical bytes, written from the spec (not from hashing_py)."""
    if isinstance(value, (bool, np.bool_, np.integer)):
        value = int(value)
    if isinstance(value, int):
        if INT64_MIN <= value <= INT64_MAX:
            return struct.pack("<q", value)
        return struct.pack("<Q", value)  # [2**63, 2**64): unsigned
    if isinstance(value, str):
        return value.encode("utf-8")
    return bytes(value)


def oracle_hash(value: Any) -> int:
    return xxhash.xxh3_64_intdigest(oracle_bytes(value))


def oracle_slot(value: Any, bits: int = 10) -> int:
    return oracle_hash(value) >> (64 - bits)


# -- strategies -----------------------------------------------------------------

EDGE_INTS = [0, 1, -1, INT64_MAX, INT64_MIN, INT64_MAX + 1, UINT64_MAX, 2**32, -(2**32), 2**31 - 1, -(2**31)]

ints = st.one_of(st.sampled_from(EDGE_INTS), st.integers(INT64_MIN, UINT64_MAX))
numpy_ints = st.one_of(
    st.integers(INT64_MIN, INT64_MAX).map(np.int64),
    st.integers(0, UINT64_MAX).map(np.uint64),
    st.integers(-(2**31), 2**31 - 1).map(np.int32),
    st.integers(0, 2**16 - 1).map(np.uint16),
    st.integers(-128, 127).map(np.int8),
)
keys = st.one_of(
    ints,
    st.text(),  # hypothesis leaves out lone surrogates by default
    st.binary(),
    st.binary().map(bytearray),
    st.booleans(),
    numpy_ints,
)
lone_surrogate_text = st.tuples(st.text(), st.characters(categories=["Cs"]), st.text()).map("".join)
bad_values = st.one_of(
    st.none(),
    st.floats(),
    st.integers(min_value=UINT64_MAX + 1),
    st.integers(max_value=INT64_MIN - 1),
    st.decimals(allow_nan=False),
    lone_surrogate_text,
    st.dates(),
    st.complex_numbers(),
    st.lists(st.integers(), max_size=2),
)
slot_bits = st.integers(1, 16)

FAST = settings(max_examples=150, deadline=None)

# -- known vectors -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "hash64", "slot10"),
    [
        (0, 0xC77B3ABB6F87ACD9, 797),
        (-1, 0x5111C7E47D784413, 324),
        (1, 0x2FBC593564DB792E, 190),
        (INT64_MAX, 0xA233CF376558DF46, 648),
        ("abc", 0x78AF5F94892F3950, 482),
        ("é", 0xF7940A006CF10CB3, 990),
        ("", 0x2D06800538D394C2, 180),  # XXH3_64 of empty input, from the xxHash spec
        (b"abc", 0x78AF5F94892F3950, 482),
    ],
)
def test_known_vectors(impl: Implementation, value: Any, hash64: int, slot10: int) -> None:
    # Pinned numbers: a change here re-routes every stored row.
    assert impl.hashing.hash64(value) == hash64 == oracle_hash(value)
    assert impl.hashing.slot_of(value) == slot10 == hash64 >> 54
    assert impl.hashing.slot_of(value, slot_bits=10) == slot10


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00" * 8),
        (-1, b"\xff" * 8),
        (1, b"\x01" + b"\x00" * 7),
        (INT64_MIN, b"\x00" * 7 + b"\x80"),
        (INT64_MAX + 1, b"\x00" * 7 + b"\x80"),  # uint64 with the top bit set: same bits
        (UINT64_MAX, b"\xff" * 8),
        (True, b"\x01" + b"\x00" * 7),
        (np.int32(-2), b"\xfe" + b"\xff" * 7),  # sign-extended to 64 bits
        (np.uint64(UINT64_MAX), b"\xff" * 8),
        (np.True_, b"\x01" + b"\x00" * 7),
        ("a€", "a€".encode()),
        (b"\x00\xff", b"\x00\xff"),
        (bytearray(b"xy"), b"xy"),
        (memoryview(b"xy"), b"xy"),
    ],
)
def test_canonical_bytes(impl: Implementation, value: Any, encoded: bytes) -> None:
    assert impl.hashing.canonical_bytes(value) == encoded
    assert impl.hashing.hash64(value) == xxhash.xxh3_64_intdigest(encoded)


def test_int64_and_uint64_with_the_same_bits_route_alike(impl: Implementation) -> None:
    # A BIGINT and a BIGINT UNSIGNED column holding the same 64 bits must agree.
    slot_of = impl.hashing.slot_of
    assert slot_of(-1) == slot_of(UINT64_MAX)
    assert slot_of(INT64_MIN) == slot_of(INT64_MAX + 1)
    assert slot_of(np.int64(-5)) == slot_of(np.uint64(2**64 - 5))


def test_slot_is_the_high_bits(impl: Implementation) -> None:
    for value in [0, -1, 12345, "user:42", b"\x01\x02"]:
        h = oracle_hash(value)
        for bits in range(1, 17):
            slot = impl.hashing.slot_of(value, bits)
            assert slot == h >> (64 - bits)
            assert 0 <= slot < 1 << bits
            assert type(slot) is int


# -- rejected values ---------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        None,
        1.0,
        float("nan"),
        np.float64(2.0),
        np.float32(2.0),
        Decimal("1"),
        UINT64_MAX + 1,
        INT64_MIN - 1,
        10**30,
        "\ud800",
        "ok\udfffok",
        datetime.date(2020, 1, 1),
        object(),
        [1],
        (1,),
        1j,
    ],
    ids=stable_repr,
)
def test_rejected_values(impl: Implementation, value: Any) -> None:
    with pytest.raises(ShardValueError) as info:
        impl.hashing.slot_of(value)
    err = info.value
    assert isinstance(err, DdmError) and isinstance(err, ValueError)
    assert repr(value) in str(err)  # the message names the value
    assert err.value is value
    for func in (impl.hashing.hash64, impl.hashing.canonical_bytes):
        with pytest.raises(ShardValueError):
            func(value)


@pytest.mark.parametrize("bits", [0, 17, -1, 64, True, 10.0, "10", None, np.int64(10)], ids=repr)
def test_slot_bits_out_of_range(impl: Implementation, bits: Any) -> None:
    with pytest.raises(ShardValueError, match="slot_bits") as info:
        impl.hashing.slot_of(1, bits)
    assert repr(bits) in str(info.value)
    with pytest.raises(ShardValueError, match="slot_bits"):
        impl.hashing.slots_of([1, 2], bits)
    with pytest.raises(ShardValueError, match="slot_bits"):
        impl.hashing.slots_of(np.arange(3), bits)


# -- differential: compiled == pure == oracle ----------------------------------------


@FAST
@given(key=keys, bits=slot_bits)
def test_compiled_equals_pure(both: tuple[Implementation, Implementation], key: Any, bits: int) -> None:
    c, py = both
    expected = oracle_slot(key, bits)
    assert c.hashing.slot_of(key, bits) == py.hashing.slot_of(key, bits) == expected
    assert c.hashing.hash64(key) == py.hashing.hash64(key) == oracle_hash(key)
    assert c.hashing.canonical_bytes(key) == py.hashing.canonical_bytes(key) == oracle_bytes(key)


@FAST
@given(value=bad_values, bits=slot_bits)
def test_same_error_on_both(both: tuple[Implementation, Implementation], value: Any, bits: int) -> None:
    errors = []
    for impl in both:
        with pytest.raises(ShardValueError) as info:
            impl.hashing.slot_of(value, bits)
        errors.append(info.value)
    assert type(errors[0]) is type(errors[1])
    assert str(errors[0]) == str(errors[1])


@FAST
@given(key=keys, bits=st.integers(1, 15))
def test_split_property(impl: Implementation, key: Any, bits: int) -> None:
    # Doubling the slot count splits slot s into 2s and 2s+1: no key jumps elsewhere.
    assert impl.hashing.slot_of(key, bits + 1) >> 1 == impl.hashing.slot_of(key, bits)


@FAST
@given(values=st.lists(st.integers(INT64_MIN, UINT64_MAX), max_size=40), bits=st.integers(1, 15))
def test_split_property_batch(impl: Implementation, values: list[int], bits: int) -> None:
    arr = np.array(values, dtype=object)  # not a numpy int dtype: exercises the generic path
    fine = impl.hashing.slots_of(arr, bits + 1)
    assert np.array_equal(fine >> 1, impl.hashing.slots_of(values, bits))


# -- slots_of ------------------------------------------------------------------------


def _per_element(impl: Implementation, values: Any, bits: int) -> list[int]:
    return [impl.hashing.slot_of(v, bits) for v in values]


def _check_batch(impl: Implementation, values: Any, bits: int, expected: list[int]) -> None:
    out = impl.hashing.slots_of(values, bits)
    assert isinstance(out, np.ndarray) and out.dtype == np.int32 and out.ndim == 1
    assert out.tolist() == expected


@pytest.mark.parametrize(
    "dtype", [np.int64, np.uint64, np.int32, np.uint32, np.int16, np.uint8, ">i8", "<u8"], ids=str
)
def test_slots_of_numpy_dtypes(impl: Implementation, dtype: Any) -> None:
    info = np.iinfo(np.dtype(dtype))
    values = sorted({int(info.min), int(info.max), 0, 1, int(info.max) // 3, int(info.min) // 3})
    arr = np.array(values, dtype=dtype)
    expected = [oracle_slot(v) for v in values]
    _check_batch(impl, arr, 10, expected)
    assert _per_element(impl, arr, 10) == expected  # numpy scalars hash like their int


def test_slots_of_non_contiguous_array(impl: Implementation) -> None:
    base = np.arange(-50, 50, dtype=np.int64)
    view = base[::3]
    _check_batch(impl, view, 12, [oracle_slot(int(v), 12) for v in view])


@pytest.mark.parametrize(
    "values",
    [
        [0, -1, UINT64_MAX, INT64_MIN, INT64_MAX + 1],
        ("a", "é", "中文", "😀", ""),
        [b"", b"\x00", b"abc"],
        [1, "1", b"1", True, bytearray(b"1"), np.int64(1)],
        np.array(["x", "yy", "é"]),  # numpy str_ dtype
        np.array([b"x", b"yy"]),  # numpy bytes_ dtype
        np.array([True, False]),
        np.array(["a", 2, b"c"], dtype=object),
    ],
    ids=["ints", "str", "bytes", "mixed", "np-str", "np-bytes", "np-bool", "np-object"],
)
def test_slots_of_sequences(impl: Implementation, values: Any) -> None:
    expected = [oracle_slot(v, 9) for v in values]
    _check_batch(impl, values, 9, expected)
    assert _per_element(impl, values, 9) == expected


def test_slots_of_iterables_and_empty(impl: Implementation) -> None:
    _check_batch(impl, (k for k in [5, "x"]), 10, [oracle_slot(5), oracle_slot("x")])
    _check_batch(impl, range(3), 10, [oracle_slot(i) for i in range(3)])
    _check_batch(impl, [], 10, [])
    _check_batch(impl, np.array([], dtype=np.int64), 10, [])
    _check_batch(impl, np.array([], dtype=np.uint64), 10, [])


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ([1, None, 3], "None"),
        ([1, 2.5], "2.5"),
        ([UINT64_MAX + 1], str(UINT64_MAX + 1)),
        (np.array([1.0, 2.0]), "1.0"),
        (["ok", "\ud800"], repr("\ud800")),
        (np.arange(4).reshape(2, 2), "(2, 2)"),
        (np.array(7), "shape ()"),  # a 0-d array is not a batch
        ("abc", "'abc'"),  # one key, not a batch of characters
        (b"abc", "b'abc'"),
    ],
    ids=["none", "float", "too-big", "float-array", "surrogate", "2-d", "0-d", "str", "bytes"],
)
def test_slots_of_rejects(impl: Implementation, values: Any, named: str) -> None:
    with pytest.raises(ShardValueError) as info:
        impl.hashing.slots_of(values)
    assert named in str(info.value)


def test_slots_of_survives_a_key_that_mutates_the_batch(impl: Implementation) -> None:
    # Encoding a key may run user code; the compiled loop reads items unchecked,
    # so the batch must be a snapshot (this crashed the interpreter before).
    batch: list[Any] = []

    class Shrinker:
        def __index__(self) -> int:
            batch.clear()
            return 1

    batch.extend([Shrinker(), 2, 3])
    _check_batch(impl, batch, 10, [oracle_slot(1), oracle_slot(2), oracle_slot(3)])


array_dtypes = st.sampled_from([np.int64, np.uint64, np.int32])


@FAST
@given(data=st.data(), dtype=array_dtypes, bits=slot_bits)
def test_slots_of_arrays_compiled_equals_pure(
    both: tuple[Implementation, Implementation], data: st.DataObject, dtype: Any, bits: int
) -> None:
    info = np.iinfo(dtype)
    values = data.draw(st.lists(st.integers(int(info.min), int(info.max)), max_size=50))
    arr = np.array(values, dtype=dtype)
    expected = [oracle_slot(v, bits) for v in values]
    for impl in both:
        _check_batch(impl, arr, bits, expected)
        _check_batch(impl, values, bits, expected)  # the same keys as a list of ints


@FAST
@given(values=st.lists(st.one_of(st.text(max_size=20), st.binary(max_size=20), ints), max_size=30), bits=slot_bits)
def test_slots_of_lists_compiled_equals_pure(
    both: tuple[Implementation, Implementation], values: list[Any], bits: int
) -> None:
    c, py = both
    expected = [oracle_slot(v, bits) for v in values]
    assert c.hashing.slots_of(values, bits).tolist() == py.hashing.slots_of(values, bits).tolist() == expected
    assert _per_element(c, values, bits) == expected


# -- the public module ----------------------------------------------------------------


def test_public_module_is_the_selected_implementation(impl: Implementation) -> None:
    import ddm_core
    from ddm_core import _fast, hashing

    assert hashing.slot_of is _fast.SELECTED.hashing.slot_of
    assert ddm_core.slot_of is hashing.slot_of and ddm_core.slots_of is hashing.slots_of
    # Whichever unit is selected, it agrees with this parametrization's unit.
    assert hashing.slot_of("k", 7) == impl.hashing.slot_of("k", 7)
    assert hashing.MAX_SLOT_BITS == impl.hashing.MAX_SLOT_BITS == 16
