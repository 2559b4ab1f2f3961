"""Global ids: snowflake (41/10/12) and gene ids, on both twins.

Expected ids are computed here from the bit layout (``time << 22 | worker << 12 |
seq`` and the gene variant), never read back from ``id_layout``. Clock behaviour
is driven by :class:`ScriptedClock`, which returns scripted readings and then
advances 1 ms per call, so a generator that waits wrongly still terminates.
"""

from __future__ import annotations

import sys
import threading
import time
from decimal import Decimal
from fractions import Fraction
from typing import Any, Callable, Iterable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ddm_core.ids
from ddm_core._fast import SELECTED, Implementation
from ddm_core.errors import (
    ClockMovedBackwardsError,
    ClockReadError,
    DdmError,
    IdCountError,
    IdGenerationError,
    IdTypeError,
    ShardValueError,
    WorkerIdError,
    WorkerLeaseLostError,
)

FAST = settings(max_examples=100, deadline=None)

EPOCH = 1_577_836_800_000  # 2020-01-01T00:00:00Z, the documented default epoch
T0 = EPOCH + 123_456_789_000  # an arbitrary "now" for scripted clocks
TIME_END = 1 << 41


class ScriptedClock:
    """Returns ``script`` in order, then ``last + 1``, ``last + 2``, ... (thread-safe).

    ``reads`` records every value handed out, so a test can see how the
    generator read the clock (one read per id, or a wait that read until the
    clock caught up).
    """

    def __init__(self, script: Iterable[int], *, start: int | None = None) -> None:
        self.script = list(script)
        if not self.script and start is None:
            raise ValueError("an empty script needs a start")
        self._after = (self.script[-1] if self.script else start - 1) + 1  # type: ignore[operator]
        self.reads: list[int] = []
        self._lock = threading.Lock()

    def __call__(self) -> int:
        with self._lock:
            i = len(self.reads)
            if i < len(self.script):
                value = self.script[i]
            else:
                value = self._after
                self._after += 1
            self.reads.append(value)
            return value

    @property
    def calls(self) -> int:
        return len(self.reads)


def snowflake_id(t_ms: int, worker: int, seq: int, epoch: int = EPOCH) -> int:
    """The 41/10/12 snowflake id, from first principles."""
    return ((t_ms - epoch) << 22) | (worker << 12) | seq


def gene_id(t_ms: int, worker: int, seq: int, gene: int, *, worker_bits: int, gene_bits: int) -> int:
    seq_bits = 22 - worker_bits - gene_bits
    return ((t_ms - EPOCH) << 22) | (worker << (seq_bits + gene_bits)) | (seq << gene_bits) | gene


def strictly_increasing(values: Any) -> bool:
    arr = np.asarray(values, dtype=np.int64)
    return bool(np.all(np.diff(arr) > 0))


# -- snowflake: concurrency ----------------------------------------------------------------


def test_snowflake_unique_and_increasing_across_8_threads(impl: Implementation) -> None:
    gen = impl.ids.Snowflake(17)
    n_threads, per_thread, single = 8, 200_000, 60_000
    batch = 1_000
    results: list[np.ndarray | None] = [None] * n_threads
    errors: list[BaseException] = []
    barrier = threading.Barrier(n_threads)

    def work(slot: int) -> None:
        try:
            next_id = gen.next_id
            barrier.wait()
            # Interleave single calls and batches so both paths contend for the lock.
            chunks: list[np.ndarray] = []
            done = 0
            while done < per_thread:
                singles = min(single // 10, per_thread - done)
                chunks.append(np.fromiter((next_id() for _ in range(singles)), dtype=np.int64, count=singles))
                done += singles
                for _ in range(4):
                    if done >= per_thread:
                        break
                    n = min(batch * 4, per_thread - done)
                    chunks.append(gen.next_ids(n))
                    done += n
            results[slot] = np.concatenate(chunks)
        except BaseException as exc:  # surfaced below, with the thread's traceback
            errors.append(exc)

    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)  # switch often: more interleaving inside next_id
    try:
        threads = [threading.Thread(target=work, args=(i,)) for i in range(n_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old_interval)
    assert not errors, errors
    per = [r for r in results if r is not None]
    assert len(per) == n_threads
    for ids in per:
        assert ids.dtype == np.int64 and ids.shape == (per_thread,)
        assert strictly_increasing(ids), "ids of one thread must increase"
    everything = np.concatenate(per)
    assert np.unique(everything).size == n_threads * per_thread, "duplicate ids across threads"
    assert int(everything.min()) > 0
    # Every id carries the worker, and no millisecond holds more than 4096 ids.
    assert set(((everything >> 12) & 1023).tolist()) == {17}
    _, per_ms = np.unique(everything >> 22, return_counts=True)
    assert int(per_ms.max()) <= 4096


def test_gene_ids_unique_and_increasing_across_threads(impl: Implementation) -> None:
    gen = impl.ids.GeneIdGenerator(9)
    n_threads, per_thread = 4, 3_000
    results: list[list[int]] = [[] for _ in range(n_threads)]
    barrier = threading.Barrier(n_threads)

    def work(slot: int) -> None:
        barrier.wait()
        out = results[slot]
        for i in range(per_thread):
            out.append(gen.next_id(i * n_threads + slot))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for slot, ids in enumerate(results):
        assert len(ids) == per_thread
        assert strictly_increasing(ids)
        assert [gen.gene_of(o) for o in ids] == [
            impl.hashing.slot_of(i * n_threads + slot, 10) for i in range(per_thread)
        ]
    flat = [o for ids in results for o in ids]
    assert len(set(flat)) == len(flat)


# -- snowflake: layout, sequence, clock --------------------------------------------------------


@FAST
@given(
    worker=st.integers(0, 1023),
    epoch=st.integers(0, 1 << 45),
    offsets=st.lists(st.integers(0, TIME_END - 1), min_size=1, max_size=8),
    repeats=st.lists(st.integers(1, 5), min_size=8, max_size=8),
)
def test_snowflake_bit_layout_and_decode(
    impl: Implementation, worker: int, epoch: int, offsets: list[int], repeats: list[int]
) -> None:
    # Non-decreasing times, some repeated: the sequence counts within one ms.
    times = [epoch + t for t, r in zip(sorted(offsets), repeats) for _ in range(r)]
    clock = ScriptedClock(times)
    gen = impl.ids.Snowflake(worker, epoch_ms=epoch, clock=clock)
    assert gen.worker_id == worker
    ids = [gen.next_id() for _ in times]
    assert clock.reads == times, "one clock read per id when time does not go back"
    seq = 0
    for i, (t, got) in enumerate(zip(times, ids)):
        seq = seq + 1 if i and times[i - 1] == t else 0
        assert got == snowflake_id(t, worker, seq, epoch)
        assert 0 < got < 1 << 63 or (got == 0 and t == epoch and worker == 0)
        parts = gen.decode(got)
        assert parts == (t, worker, seq, 0)
        assert (parts.timestamp_ms, parts.worker_id, parts.sequence, parts.gene) == (t, worker, seq, 0)
    assert len(set(ids)) == len(ids)
    assert strictly_increasing(ids)


def test_snowflake_layout_fields(impl: Implementation) -> None:
    gen = impl.ids.Snowflake(5)
    layout = gen.layout
    assert (layout.worker_bits, layout.sequence_bits, layout.gene_bits) == (10, 12, 0)
    assert layout.per_ms == 4096
    assert layout.epoch_ms == EPOCH == impl.ids.DEFAULT_EPOCH_MS
    assert layout.max_backward_ms == 5


def test_exhausted_millisecond_waits_for_the_next(impl: Implementation) -> None:
    clock = ScriptedClock([T0] * 5_000)  # stuck on T0 for 5000 reads
    gen = impl.ids.Snowflake(3, clock=clock)
    ids = [gen.next_id() for _ in range(4_097)]
    assert None not in ids
    for seq, got in enumerate(ids[:4_096]):
        assert got == snowflake_id(T0, 3, seq)
    # Id 4097: the sequence is used up, so the generator read the stuck clock until T0 + 1.
    assert gen.decode(ids[4_096]) == (T0 + 1, 3, 0, 0)
    assert ids[4_096] == snowflake_id(T0 + 1, 3, 0)
    assert clock.reads[4_096:-1] == [T0] * (5_000 - 4_096)
    assert clock.reads[-1] == T0 + 1
    assert len(set(ids)) == len(ids) and strictly_increasing(ids)

    # next_ids takes the same path and gives the same ids.
    batch = impl.ids.Snowflake(3, clock=ScriptedClock([T0] * 5_000)).next_ids(4_097)
    assert batch.dtype == np.int64
    assert batch.tolist() == ids


def test_exhausted_millisecond_with_next_ids_over_several_ms(impl: Implementation) -> None:
    # The clock stays on each ms for 5000 reads; 10 000 ids span 3 ms of 4096 ids.
    script = [T0] * 5_000 + [T0 + 1] * 5_000 + [T0 + 2] * 5_000
    ids = impl.ids.Snowflake(1, clock=ScriptedClock(script)).next_ids(10_000)
    assert strictly_increasing(ids)
    stamps = (ids >> 22) + EPOCH
    assert np.bincount((stamps - T0).astype(np.intp)).tolist() == [4096, 4096, 10_000 - 8192]


@pytest.mark.parametrize("kind", ["snowflake", "gene"])
@pytest.mark.parametrize("back", [1, 3, 5])
def test_clock_back_within_tolerance_waits(impl: Implementation, kind: str, back: int) -> None:
    # The clock steps back, stays there for a few reads, then creeps forward.
    script = [T0] + [T0 - back] * 3 + list(range(T0 - back + 1, T0))
    clock = ScriptedClock(script)
    if kind == "snowflake":
        gen: Any = impl.ids.Snowflake(7, clock=clock)
        draw: Callable[[], int] = gen.next_id
    else:
        gen = impl.ids.GeneIdGenerator(7, clock=clock)
        draw = lambda: gen.next_id(12345)  # noqa: E731
    first = draw()
    second = draw()  # waits until the clock is back at T0
    assert second > first
    assert gen.decode(first)[:3] == (T0, 7, 0)
    assert gen.decode(second)[:3] == (T0, 7, 1), "same ms as before the step back, next sequence"
    # It read the clock until it caught up, and no further.
    assert clock.reads == [T0] + [T0 - back] * 3 + list(range(T0 - back + 1, T0 + 1))
    third = draw()  # the clock now reads T0 + 1: a fresh ms
    assert gen.decode(third)[:3] == (T0 + 1, 7, 0)
    assert third > second


@pytest.mark.parametrize("kind", ["snowflake", "gene"])
@pytest.mark.parametrize(("max_back", "back"), [(5, 50), (5, 6), (0, 1), (100, 101)])
def test_clock_back_beyond_tolerance_raises(impl: Implementation, kind: str, max_back: int, back: int) -> None:
    clock = ScriptedClock([T0, T0 - back, T0 + 1])
    if kind == "snowflake":
        gen: Any = impl.ids.Snowflake(2, max_backward_ms=max_back, clock=clock)
        draw: Callable[[], int] = gen.next_id
    else:
        gen = impl.ids.GeneIdGenerator(2, max_backward_ms=max_back, clock=clock)
        draw = lambda: gen.next_id("user-1")  # noqa: E731
    first = draw()
    with pytest.raises(ClockMovedBackwardsError) as info:
        draw()
    err = info.value
    assert isinstance(err, IdGenerationError)
    assert err.backward_ms == back
    assert err.max_backward_ms == max_back
    assert f"{back} ms" in str(err)
    assert clock.calls == 2, "refused at once, without waiting"
    # The generator is not broken: once the clock is past its last ms, ids continue.
    later = draw()
    assert later > first
    assert gen.decode(later)[:3] == (T0 + 1, 2, 0)


def test_clock_back_by_50_ms_with_defaults(impl: Implementation) -> None:
    gen = impl.ids.Snowflake(1, clock=ScriptedClock([T0, T0 - 50]))
    gen.next_id()
    with pytest.raises(ClockMovedBackwardsError) as info:
        gen.next_id()
    assert info.value.backward_ms == 50
    assert info.value.max_backward_ms == 5


def test_real_clock(impl: Implementation) -> None:
    gen = impl.ids.Snowflake(9)
    before = time.time_ns() // 1_000_000
    one = gen.next_id()
    many = gen.next_ids(12_000)  # at most 4096 per ms: spans at least 3 ms of real waiting
    after = time.time_ns() // 1_000_000
    stamps = [gen.decode(int(i)).timestamp_ms for i in many]
    assert before <= gen.decode(one).timestamp_ms <= stamps[0]
    assert stamps[-1] <= after
    assert gen.decode(one).worker_id == 9
    assert strictly_increasing([one, *many.tolist()])
    _, counts = np.unique(np.asarray(stamps), return_counts=True)
    assert counts.size >= 3 and int(counts.max()) <= 4096
    # Gene ids on the real clock: 64 per ms with the defaults.
    gene = impl.ids.GeneIdGenerator(4)
    oids = gene.next_ids(list(range(300)))
    assert strictly_increasing(oids)
    assert len({gene.decode(int(o)).timestamp_ms for o in oids}) >= 5


# -- compiled == pure on the same clock script ---------------------------------------------------


@st.composite
def clock_scripts(draw: st.DrawFn) -> list[int]:
    """Readings that mostly advance, stall for runs, and sometimes step back."""
    t = T0
    script: list[int] = []
    for _ in range(draw(st.integers(1, 25))):
        t += draw(st.integers(-9, 3))
        script.extend([t] * draw(st.integers(1, 80)))
    return script


def _run(gen: Any, draws: list[Any], gene: bool) -> list[tuple[Any, ...]]:
    outcome: list[tuple[Any, ...]] = []
    for key in draws:
        try:
            outcome.append(("id", gen.next_id(key) if gene else gen.next_id()))
        except ClockMovedBackwardsError as exc:
            outcome.append(("back", exc.backward_ms, exc.max_backward_ms))
    return outcome


@settings(max_examples=60, deadline=None)
@given(
    script=clock_scripts(),
    worker=st.integers(0, 63),
    max_back=st.integers(0, 6),
    gene=st.booleans(),
    keys=st.lists(st.integers(-(1 << 63), (1 << 64) - 1) | st.text(max_size=5), min_size=1, max_size=20),
)
def test_compiled_equals_pure_for_the_same_clock_script(
    both: tuple[Implementation, Implementation],
    script: list[int],
    worker: int,
    max_back: int,
    gene: bool,
    keys: list[Any],
) -> None:
    outcomes = []
    reads = []
    draws = [keys[i % len(keys)] for i in range(len(script) + 5)]
    for impl in both:
        clock = ScriptedClock(script)
        if gene:
            gen: Any = impl.ids.GeneIdGenerator(worker, clock=clock, max_backward_ms=max_back)
        else:
            gen = impl.ids.Snowflake(worker, clock=clock, max_backward_ms=max_back)
        outcomes.append(_run(gen, draws, gene))
        reads.append(clock.reads)
    compiled, pure = outcomes
    assert compiled == pure
    assert reads[0] == reads[1], "both twins read the clock the same way"
    ids = [o[1] for o in compiled if o[0] == "id"]
    assert len(set(ids)) == len(ids) and strictly_increasing(ids)
    for o in compiled:
        if o[0] == "back":
            assert o[1] > max_back


# -- settings and ranges ---------------------------------------------------------------------


@pytest.mark.parametrize("worker_id", [1024, -1, 1.0, "1", None, True, 2**64])
def test_snowflake_worker_id_out_of_range(impl: Implementation, worker_id: Any) -> None:
    with pytest.raises(WorkerIdError) as info:
        impl.ids.Snowflake(worker_id)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("epoch", [-1, 1.5, "2020-01-01", None, (1 << 62) + 1])
def test_snowflake_bad_epoch(impl: Implementation, epoch: Any) -> None:
    with pytest.raises(WorkerIdError):
        impl.ids.Snowflake(1, epoch_ms=epoch)


@pytest.mark.parametrize("max_back", [-1, 2.5, None, 60_001])
def test_bad_max_backward_ms(impl: Implementation, max_back: Any) -> None:
    with pytest.raises(WorkerIdError):
        impl.ids.Snowflake(1, max_backward_ms=max_back)


def test_worker_id_extremes_are_valid(impl: Implementation) -> None:
    for worker in (0, 1023):
        gen = impl.ids.Snowflake(worker, clock=ScriptedClock([T0]))
        assert gen.decode(gen.next_id()).worker_id == worker


@pytest.mark.parametrize(
    ("gene_bits", "worker_bits", "worker_id"),
    [(0, 6, 0), (17, 4, 0), (1.0, 6, 0), (None, 6, 0), (10, 12, 0), (10, -1, 0), (10, 6, 64), (10, 6, -1), (4, 2, 4)],
)
def test_gene_bad_layout(impl: Implementation, gene_bits: Any, worker_bits: Any, worker_id: Any) -> None:
    with pytest.raises(WorkerIdError):
        impl.ids.GeneIdGenerator(worker_id, gene_bits, worker_bits=worker_bits)


def test_time_beyond_41_bits(impl: Implementation) -> None:
    epoch = 1_000_000
    last = impl.ids.Snowflake(5, epoch_ms=epoch, clock=ScriptedClock([epoch + TIME_END - 1]))
    top = last.next_id()
    assert top == ((TIME_END - 1) << 22) | (5 << 12)
    assert 0 < top < 1 << 63
    for now in (epoch + TIME_END, epoch + TIME_END + 12345, 1 << 63, 1 << 64, -1, epoch - 1):
        gen = impl.ids.Snowflake(5, epoch_ms=epoch, clock=ScriptedClock([now]))
        with pytest.raises(IdGenerationError) as info:
            gen.next_id()
        assert not isinstance(info.value, ClockMovedBackwardsError)
        assert info.value.now_ms == now
        assert str(now) in str(info.value)
    # Same for gene ids (their time field is 41 bits too).
    gene = impl.ids.GeneIdGenerator(1, epoch_ms=epoch, clock=ScriptedClock([epoch + TIME_END]))
    with pytest.raises(IdGenerationError):
        gene.next_id(1)


def test_epoch_after_the_clock_is_refused(impl: Implementation) -> None:
    gen = impl.ids.Snowflake(1, epoch_ms=T0 + 1, clock=ScriptedClock([T0]))
    with pytest.raises(IdGenerationError):
        gen.next_id()


@pytest.mark.parametrize("bad", [-1, 1 << 63, 1.5, "5", None])
def test_decode_rejects_non_ids(impl: Implementation, bad: Any) -> None:
    with pytest.raises(WorkerIdError):
        impl.ids.GeneIdGenerator(1).decode(bad)
    with pytest.raises(WorkerIdError):
        impl.ids.Snowflake(1).decode(bad)


def test_decode_accepts_numpy_ints(impl: Implementation) -> None:
    gen = impl.ids.Snowflake(4, clock=ScriptedClock([T0]))
    oid = gen.next_ids(1)[0]
    parts = gen.decode(oid)
    assert parts == (T0, 4, 0, 0)
    assert all(type(v) is int for v in parts)


@pytest.mark.parametrize("bits", [0, 17, 1.0, None])
def test_module_gene_of_bad_bits(impl: Implementation, bits: Any) -> None:
    with pytest.raises(WorkerIdError):
        impl.ids.gene_of(12345, bits)


def test_next_ids_count(impl: Implementation) -> None:
    gen = impl.ids.Snowflake(1, clock=ScriptedClock([T0] * 10))
    empty = gen.next_ids(0)
    assert empty.dtype == np.int64 and empty.shape == (0,)
    assert gen.next_ids(np.int64(3)).tolist() == [snowflake_id(T0, 1, s) for s in range(3)]
    with pytest.raises(IdCountError) as negative:
        gen.next_ids(-1)
    assert isinstance(negative.value, (DdmError, ValueError)) and "-1 ids" in str(negative.value)
    with pytest.raises(IdTypeError) as floating:
        gen.next_ids(2.0)
    assert isinstance(floating.value, (DdmError, TypeError)) and "float" in str(floating.value)
    assert gen.decode(gen.next_id()).sequence == 3, "failed calls consumed no sequence"


def _generator(impl: Implementation, kind: str, clock: Callable[[], Any]) -> tuple[Any, Callable[[], int]]:
    """A Snowflake or a GeneIdGenerator (worker 1) on ``clock``, and its draw."""
    if kind == "snowflake":
        snowflake = impl.ids.Snowflake(1, clock=clock)
        return snowflake, snowflake.next_id
    gene = impl.ids.GeneIdGenerator(1, clock=clock)
    return gene, lambda: gene.next_id(5)


def _both_generators(impl: Implementation, clock: Callable[[], Any]) -> list[tuple[Any, Callable[[], int]]]:
    return [_generator(impl, kind, clock) for kind in ("snowflake", "gene")]


@pytest.mark.parametrize(
    "reading",
    [None, "soon", float("nan"), float("inf"), object(), str(T0), b"1700000000000", True, complex(T0, 0)],
)
def test_clock_reading_that_is_no_number(impl: Implementation, reading: Any) -> None:
    for _, draw in _both_generators(impl, lambda: reading):
        with pytest.raises(IdTypeError) as info:
            draw()
        assert isinstance(info.value, DdmError) and isinstance(info.value, TypeError)
        assert "not a number of milliseconds" in str(info.value)


@FAST
@given(ms=st.integers(0, (1 << 62) - 1), spell=st.sampled_from([str, lambda n: f" {n}\n", lambda n: str(n).encode()]))
def test_clock_reading_that_spells_a_number_is_refused(impl: Implementation, ms: int, spell: Any) -> None:
    # docs/worker-leases.md: a clock must return a number; text that looks like one is not
    # silently parsed (a clock reading a file or a header returns text by mistake).
    reading = spell(ms)

    def header_clock() -> Any:
        return reading

    for _, draw in _both_generators(impl, header_clock):
        with pytest.raises(IdTypeError) as info:
            draw()
        assert "header_clock" in str(info.value) and repr(reading) in str(info.value)
        assert info.value.reading == reading


@pytest.mark.parametrize(
    "reading", [float(T0) + 0.75, np.int64(T0), np.float64(T0), Decimal(T0) + Decimal("0.5"), Fraction(2 * T0 + 1, 2)]
)
def test_clock_reading_that_is_a_number_is_truncated(impl: Implementation, reading: Any) -> None:
    for gen, draw in _both_generators(impl, lambda: reading):
        assert gen.decode(draw()).timestamp_ms == T0


@pytest.mark.parametrize("kind", ["snowflake", "gene"])
def test_clock_that_raises_is_wrapped_and_named(impl: Implementation, kind: str) -> None:
    failure = OSError("time server unreachable")
    script = ScriptedClock([T0] * 3)
    calls = []

    def remote_clock() -> int:
        calls.append(1)
        if len(calls) == 2:
            raise failure
        return script()

    gen, draw = _generator(impl, kind, remote_clock)
    first = draw()
    with pytest.raises(ClockReadError) as info:
        draw()
    err = info.value
    assert isinstance(err, IdGenerationError) and isinstance(err, DdmError)
    assert err.__cause__ is failure
    assert "remote_clock" in err.clock and "remote_clock" in str(err)
    assert "OSError: time server unreachable" in str(err)
    # The failed reading used no sequence number.
    assert gen.decode(draw())[:3] == (T0, 1, gen.decode(first).sequence + 1)


def test_clock_that_raises_a_ddm_error_passes_it_unchanged(impl: Implementation) -> None:
    # A leased worker id's clock refuses with WorkerLeaseLostError: it already says what happened.
    lost = WorkerLeaseLostError("the lease of worker id 1 in 'orders' was lost", namespace="orders")

    def lease_clock() -> int:
        raise lost

    for _, draw in _both_generators(impl, lease_clock):
        with pytest.raises(WorkerLeaseLostError) as info:
            draw()
        assert info.value is lost


# -- a jump back while already waiting ----------------------------------------------------------------


@pytest.mark.parametrize("kind", ["snowflake", "gene"])
def test_jump_back_during_rollover_wait_raises(impl: Implementation, kind: str) -> None:
    # The millisecond T0 is used up; while the generator waits for T0 + 1 the clock
    # jumps 50 ms back. It must refuse at that reading, not spin until T0 + 1.
    per_ms = 4096 if kind == "snowflake" else 64
    script = [T0] * (per_ms + 3) + [T0 - 50] + [T0] * 5 + [T0 + 1]
    clock = ScriptedClock(script)
    if kind == "snowflake":
        gen: Any = impl.ids.Snowflake(3, clock=clock)
        draw: Callable[[], int] = gen.next_id
    else:
        gen = impl.ids.GeneIdGenerator(3, clock=clock)
        draw = lambda: gen.next_id(77)  # noqa: E731
    ids = [draw() for _ in range(per_ms)]
    with pytest.raises(ClockMovedBackwardsError) as info:
        draw()
    assert info.value.backward_ms == 50 and info.value.max_backward_ms == 5
    assert clock.calls == per_ms + 4, "refused at the first reading behind the tolerance"
    # The refused call used no sequence number: with the clock back on T0 the
    # millisecond is still used up, so the next id waits for T0 + 1.
    after = draw()
    assert gen.decode(after)[:3] == (T0 + 1, 3, 0)
    assert clock.reads[-1] == T0 + 1
    assert len(set(ids + [after])) == per_ms + 1 and strictly_increasing(ids + [after])


@pytest.mark.parametrize("kind", ["snowflake", "gene"])
def test_jump_back_during_small_step_wait_raises(impl: Implementation, kind: str) -> None:
    # A step back of 3 ms is waited out; a further jump to 60 ms behind during that wait is not.
    clock = ScriptedClock([T0, T0 - 3, T0 - 3, T0 - 60, T0 + 1])
    if kind == "snowflake":
        gen: Any = impl.ids.Snowflake(4, clock=clock)
        draw: Callable[[], int] = gen.next_id
    else:
        gen = impl.ids.GeneIdGenerator(4, clock=clock)
        draw = lambda: gen.next_id("k")  # noqa: E731
    first = draw()
    with pytest.raises(ClockMovedBackwardsError) as info:
        draw()
    assert info.value.backward_ms == 60
    assert clock.calls == 4
    later = draw()
    assert gen.decode(later)[:3] == (T0 + 1, 4, 0) and later > first


def test_jump_back_during_wait_with_next_ids(impl: Implementation) -> None:
    # next_ids takes the same path: the batch stops with the error, and no id repeats afterwards.
    clock = ScriptedClock([T0] * 4097 + [T0 - 20] + [T0] * 3)
    gen = impl.ids.Snowflake(2, clock=clock)
    with pytest.raises(ClockMovedBackwardsError):
        gen.next_ids(5000)
    assert clock.calls == 4098
    ids = gen.next_ids(10).tolist()
    # T0 is still used up: the first id waits past the three T0 readings, then one ms per id.
    assert [gen.decode(i)[:3] for i in ids] == [(T0 + 1 + i, 2, 0) for i in range(10)]


# -- gene ids ----------------------------------------------------------------------------------


def test_gene_of_100k_random_users(impl: Implementation) -> None:
    rng = np.random.default_rng(20240501)
    users = rng.integers(-(1 << 63), (1 << 63) - 1, size=100_000, dtype=np.int64, endpoint=True)
    gen = impl.ids.GeneIdGenerator(11, clock=ScriptedClock([], start=T0))
    oids = gen.next_ids(users)
    assert oids.dtype == np.int64 and oids.shape == users.shape
    expected = impl.hashing.slots_of(users, 10)
    assert np.array_equal(oids & 1023, expected)
    assert np.unique(oids).size == oids.size
    assert strictly_increasing(oids)
    users_l, oids_l = users.tolist(), oids.tolist()
    slot_of, gene_of, module_gene_of = impl.hashing.slot_of, gen.gene_of, impl.ids.gene_of
    assert [gene_of(o) for o in oids_l] == [slot_of(u, 10) for u in users_l]
    assert [module_gene_of(o, 10) for o in oids_l] == expected.tolist()
    # One at a time gives the same genes.
    single = [gen.next_id(u) for u in users_l[:5_000]]
    assert [gene_of(o) for o in single] == expected[:5_000].tolist()
    assert {gen.decode(o).worker_id for o in single} == {11}


@FAST
@given(
    key=st.integers(-(1 << 63), (1 << 64) - 1) | st.text(max_size=20) | st.binary(max_size=20),
    gene_bits=st.integers(1, 16),
    data=st.data(),
)
def test_gene_property(impl: Implementation, key: Any, gene_bits: int, data: st.DataObject) -> None:
    worker_bits = data.draw(st.integers(0, 21 - gene_bits), label="worker_bits")
    worker = data.draw(st.integers(0, (1 << worker_bits) - 1), label="worker")
    gen = impl.ids.GeneIdGenerator(worker, gene_bits, worker_bits=worker_bits, clock=ScriptedClock([T0, T0]))
    assert gen.gene_bits == gene_bits
    slot = impl.hashing.slot_of(key, gene_bits)
    first, second = gen.next_id(key), gen.next_id(key)
    for seq, oid in enumerate((first, second)):
        assert oid == gene_id(T0, worker, seq, slot, worker_bits=worker_bits, gene_bits=gene_bits)
        assert gen.gene_of(oid) == slot == impl.ids.gene_of(oid, gene_bits)
        assert gen.decode(oid) == (T0, worker, seq, slot)
    assert gen.next_ids([key]).tolist()[0] & ((1 << gene_bits) - 1) == slot


def test_gene_ids_unique_across_workers(impl: Implementation) -> None:
    # The same clock script for both workers, stuck on each ms for a while.
    script = [t for t in range(T0, T0 + 30) for _ in range(100)]
    a = impl.ids.GeneIdGenerator(1, clock=ScriptedClock(script))
    b = impl.ids.GeneIdGenerator(2, clock=ScriptedClock(script))
    keys = list(range(500)) * 4
    ids_a: list[int] = []
    ids_b: list[int] = []
    for k in keys:
        ids_a.append(a.next_id(k))
        ids_b.append(b.next_id(k))
    assert len(set(ids_a)) == len(ids_a) and len(set(ids_b)) == len(ids_b)
    assert not set(ids_a) & set(ids_b), "two workers issued the same id"
    # Without the worker field they would have collided: same ms, sequence and gene.
    strip = [(p.timestamp_ms, p.sequence, p.gene) for p in map(a.decode, ids_a)]
    assert strip == [(p.timestamp_ms, p.sequence, p.gene) for p in map(b.decode, ids_b)]
    # Snowflakes too.
    clock2 = ScriptedClock([T0] * 100)
    s1, s2 = impl.ids.Snowflake(1, clock=clock2), impl.ids.Snowflake(2, clock=clock2)
    both_ids = [g.next_id() for _ in range(40) for g in (s1, s2)]
    assert len(set(both_ids)) == len(both_ids)


@pytest.mark.parametrize(("gene_bits", "worker_bits", "per_ms"), [(10, 6, 64), (10, 2, 1024), (16, 5, 2), (1, 20, 2), (8, 10, 16)])
def test_gene_capacity_per_ms(impl: Implementation, gene_bits: int, worker_bits: int, per_ms: int) -> None:
    clock = ScriptedClock([T0] * (per_ms + 20))
    worker = (1 << worker_bits) - 1
    gen = impl.ids.GeneIdGenerator(worker, gene_bits, worker_bits=worker_bits, clock=clock)
    assert gen.layout.sequence_bits == 22 - gene_bits - worker_bits
    assert gen.layout.per_ms == per_ms
    ids = [gen.next_id("same-user") for _ in range(per_ms + 1)]
    gene = impl.hashing.slot_of("same-user", gene_bits)
    for seq, oid in enumerate(ids[:per_ms]):
        assert gen.decode(oid) == (T0, worker, seq, gene)
    assert gen.decode(ids[per_ms]) == (T0 + 1, worker, 0, gene), "the next id waits for the next ms"
    assert strictly_increasing(ids)


def test_gene_defaults(impl: Implementation) -> None:
    gen = impl.ids.GeneIdGenerator(63)
    layout = gen.layout
    assert (layout.worker_bits, layout.sequence_bits, layout.gene_bits, gen.gene_bits) == (6, 6, 10, 10)
    assert layout.per_ms == 64
    assert layout.max_backward_ms == 5
    assert gen.worker_id == 63


@pytest.mark.parametrize("gene_bits", [2, 4, 10, 16])
def test_order_id_routes_to_its_users_node(impl: Implementation, gene_bits: int) -> None:
    smap = impl.slots.SlotMap.even(4, gene_bits)
    gen = impl.ids.GeneIdGenerator(3, gene_bits, worker_bits=min(6, 21 - gene_bits), clock=ScriptedClock([], start=T0))
    rng = np.random.default_rng(gene_bits)
    users: list[Any] = rng.integers(-(1 << 40), 1 << 40, size=2_000).tolist()
    users += [f"user-{i}" for i in range(500)] + [0, -1, 882341, (1 << 64) - 1]
    for uid in users:
        oid = gen.next_id(uid)
        assert smap.node_of(gen.gene_of(oid)) == smap.route(uid)
    int_users = np.asarray(users[:2_000], dtype=np.int64)
    oids = gen.next_ids(int_users)
    assert np.array_equal(smap.nodes_of(oids & ((1 << gene_bits) - 1)), smap.route_many(int_users))
    assert len(set(smap.route_many(int_users).tolist())) == 4, "the sample reaches every node"


@pytest.mark.parametrize("bad", [None, 1.5, float("nan"), Decimal("1"), object()])
def test_bad_shard_key_consumes_no_sequence(impl: Implementation, bad: Any) -> None:
    clock = ScriptedClock([T0] * 20)
    gen = impl.ids.GeneIdGenerator(1, clock=clock)
    first = gen.next_id(1)
    reads = clock.calls
    with pytest.raises(ShardValueError):
        gen.next_id(bad)
    with pytest.raises(ShardValueError):
        gen.next_ids([2, bad, 3])
    assert clock.calls == reads, "the clock was not even read"
    second = gen.next_id(2)
    assert gen.decode(first).sequence == 0
    assert gen.decode(second)[:3] == (T0, 1, 1), "no sequence number was used by the bad keys"


def test_public_facade_uses_the_selected_twin() -> None:
    assert ddm_core.ids.Snowflake is SELECTED.ids.Snowflake
    assert ddm_core.ids.GeneIdGenerator is SELECTED.ids.GeneIdGenerator
    assert ddm_core.ids.gene_of is SELECTED.ids.gene_of
    gen = ddm_core.ids.GeneIdGenerator(2, 8, clock=ScriptedClock([T0]))
    oid = gen.next_id("abc")
    assert ddm_core.ids.gene_of(oid, 8) == SELECTED.hashing.slot_of("abc", 8)
    assert isinstance(gen.decode(oid), ddm_core.ids.IdParts)
