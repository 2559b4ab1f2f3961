"""The circuit breaker's schedule on an injected clock: probe soon, back off by doubling, close at once.

A probe the host refuses outright (a server restarting) starts the steps over instead of doubling them.

No server here: the guarded "connect" is a function that fails or succeeds as the test says, and
the clock moves only when the test moves it, so every step of the schedule is exact. The same
breaker guarding a real ``mariadbd`` that is SIGKILLed and restarted is in
tests/test_execute_unavailable.py.
"""

from __future__ import annotations

import random
import threading
from typing import Callable

import pytest

from ddm_core.errors import DataSourceUnavailableError
from ddm_core.readwrite.breaker import JITTER, EndpointBreaker, refused
from test_readwrite import FakeClock

FIRST, LONGEST, FAILURES = 0.25, 10.0, 3


class DriverError(Exception):
    """What a driver raises for a failed connect (PyMySQL: ``OperationalError``), the socket's error chained."""


def refused_by_the_host(attempt: int) -> BaseException:
    """Nothing listens on the port (a server restarting): the driver's error during handling of the socket's."""
    try:
        raise ConnectionRefusedError(111, "Connection refused")
    except ConnectionRefusedError:
        try:
            raise DriverError(f"(2003) Can't connect: refused (attempt {attempt})")
        except DriverError as exc:
            return exc


def timed_out(attempt: int) -> BaseException:
    """The host does not answer: the connect waited for its whole timeout."""
    exc = DriverError(f"(2003) Can't connect: timed out (attempt {attempt})")
    exc.__cause__ = TimeoutError("timed out")
    return exc


def server_error(attempt: int) -> BaseException:
    return DriverError(f"(1040) Too many connections (attempt {attempt})")


class Server:
    """A connect that fails with ``failure(attempt)`` while it is set; counts the attempts that reached it."""

    def __init__(self) -> None:
        self.failure: Callable[[int], BaseException] | None = None
        self.attempts = 0

    def connect(self) -> str:
        self.attempts += 1
        if self.failure is not None:
            raise self.failure(self.attempts)
        return "connection"


def _breaker(clock: FakeClock, jitter: float = 0.0) -> EndpointBreaker:
    """``jitter``: what the breaker's random source returns (0: every wait is its whole step)."""
    return EndpointBreaker("ds_0", "primary", FAILURES, FIRST, LONGEST, clock=clock, random=lambda: jitter)


def _open(breaker: EndpointBreaker, server: Server, failure: Callable[[int], BaseException] = timed_out) -> None:
    server.failure = failure
    for _ in range(FAILURES):
        with pytest.raises(DriverError):
            breaker.call(server.connect)
    assert breaker.state == "open"


def _failed_probes(breaker: EndpointBreaker, server: Server, clock: FakeClock, count: int) -> list[float]:
    """The waits before ``count`` probes, each refused without connecting until it is due, then failing."""
    waits = []
    for _ in range(count):
        due = breaker.probe_at
        assert due is not None
        waits.append(round(due - clock.now, 6))
        clock.now = due - 0.001
        _refused_without_connecting(breaker, server)
        clock.now = due
        with pytest.raises(DriverError, match=f"attempt {server.attempts + 1}"):  # the probe reached the server
            breaker.call(server.connect)
        assert breaker.state == "open"
    return waits


def _refused_without_connecting(breaker: EndpointBreaker, server: Server) -> DataSourceUnavailableError:
    before = server.attempts
    with pytest.raises(DataSourceUnavailableError) as info:
        breaker.call(server.connect)
    assert server.attempts == before  # the server never saw it
    return info.value


def test_the_first_probe_comes_after_the_first_step_not_after_the_longest_wait() -> None:
    clock, server = FakeClock(), Server()
    breaker = _breaker(clock)
    _open(breaker, server, refused_by_the_host)
    assert breaker.probe_at == clock.now + FIRST
    clock.now += FIRST - 0.001
    err = _refused_without_connecting(breaker, server)
    assert "circuit breaker is open after 3 consecutive connection failures" in str(err)
    assert err.data_source == "ds_0" and err.endpoint == "primary" and "'primary'" in str(err)
    assert isinstance(err.__cause__, DriverError) and "attempt 3" in str(err.__cause__)  # the error that opened it
    server.failure = None
    clock.now += 0.001  # the first step is over: the next connect is the probe, and it closes the breaker
    assert breaker.call(server.connect) == "connection"
    assert breaker.state == "closed" and server.attempts == FAILURES + 1


@pytest.mark.parametrize("failure", [timed_out, server_error])
def test_each_slow_or_server_failed_probe_doubles_the_wait_up_to_the_longest(
    failure: Callable[[int], BaseException],
) -> None:
    clock, server = FakeClock(), Server()
    breaker = _breaker(clock)
    _open(breaker, server, failure)
    assert _failed_probes(breaker, server, clock, 9) == [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0, 10.0]
    err = _refused_without_connecting(breaker, server)
    assert "next probe in 10.00 s" in str(err) and "attempt 12" in str(err.__cause__)  # the last probe's error


def test_a_probe_the_host_refuses_outright_starts_the_steps_over() -> None:
    """Nothing listening on the port is a server on its way back: keep probing at the first step."""
    clock, server = FakeClock(), Server()
    breaker = _breaker(clock)
    _open(breaker, server, refused_by_the_host)
    assert _failed_probes(breaker, server, clock, 5) == [0.25] * 5
    server.failure = timed_out  # the host stops answering: back off
    assert _failed_probes(breaker, server, clock, 4) == [0.25, 0.5, 1.0, 2.0]
    server.failure = refused_by_the_host  # it answers again, nothing listens yet
    assert _failed_probes(breaker, server, clock, 3) == [4.0, 0.25, 0.25]


def test_a_successful_probe_closes_at_once_and_the_next_opening_starts_from_the_first_step() -> None:
    clock, server = FakeClock(), Server()
    breaker = _breaker(clock)
    _open(breaker, server)
    _failed_probes(breaker, server, clock, 4)
    assert (breaker.probe_at or 0.0) - clock.now == 4.0
    clock.now = breaker.probe_at or 0.0
    server.failure = None
    breaker.call(server.connect)
    assert breaker.state == "closed" and breaker.failures == 0
    assert [breaker.call(server.connect) for _ in range(3)] == ["connection"] * 3  # no second probe, no wait
    server.failure = timed_out
    for _ in range(FAILURES - 1):  # counted from zero again
        with pytest.raises(DriverError):
            breaker.call(server.connect)
    assert breaker.state == "closed"
    with pytest.raises(DriverError):
        breaker.call(server.connect)
    assert breaker.state == "open" and breaker.probe_at == clock.now + FIRST


def test_while_the_probe_runs_every_other_caller_is_refused_at_once() -> None:
    """The probe's connect hangs (a server that accepts TCP but does not answer); nobody queues behind it."""
    clock, server = FakeClock(), Server()
    breaker = _breaker(clock)
    _open(breaker, server)
    clock.now += FIRST
    entered, release = threading.Event(), threading.Event()
    results: list[object] = []

    def hanging_connect() -> str:
        entered.set()
        release.wait()
        return "late connection"

    probe = threading.Thread(target=lambda: results.append(breaker.call(hanging_connect)))
    probe.start()
    try:
        entered.wait()
        assert breaker.state == "half-open" and breaker.is_open
        for _ in range(5):  # this thread would block here if anything waited for the probe
            err = _refused_without_connecting(breaker, server)
            assert "half-open" in str(err) and "probe is under way" in str(err) and err.breaker == "half-open"
    finally:
        release.set()
        probe.join()
    assert results == ["late connection"] and breaker.state == "closed"


def test_a_connect_begun_before_the_breaker_opened_does_not_reschedule_the_probe() -> None:
    clock, server = FakeClock(), Server()
    breaker = _breaker(clock)
    entered, release = threading.Event(), threading.Event()
    failures: list[BaseException] = []

    def slow_failure() -> str:
        entered.set()
        release.wait()
        raise timed_out(0)

    def call() -> None:
        try:
            breaker.call(slow_failure)
        except DriverError as exc:
            failures.append(exc)

    slow = threading.Thread(target=call)
    slow.start()
    entered.wait()
    _open(breaker, server)
    due = breaker.probe_at
    clock.now += 0.1
    release.set()
    slow.join()
    assert failures and breaker.state == "open" and breaker.probe_at == due


def test_jitter_keeps_every_wait_between_half_and_all_of_its_step() -> None:
    clock, server = FakeClock(), Server()
    rng = random.Random(20240601)
    breaker = EndpointBreaker("ds_0", "primary", FAILURES, FIRST, LONGEST, clock=clock, random=rng.random)
    _open(breaker, server)
    spread: dict[float, set[float]] = {}
    for i in range(200):
        step = min(FIRST * 2**i, LONGEST)
        due = breaker.probe_at or 0.0
        wait = due - clock.now
        assert step * (1 - JITTER) <= wait <= step
        spread.setdefault(step, set()).add(round(wait, 9))
        clock.now = due
        with pytest.raises(DriverError):
            breaker.call(server.connect)
    assert set(spread) == {0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 10.0}
    assert len(spread[10.0]) > 100  # drawn anew each time: processes sharing a server do not probe in step


def test_a_first_step_longer_than_the_longest_wait_is_cut_to_it() -> None:
    """An older configuration with only a short breakerResetMs (100 ms) keeps its 100 ms."""
    clock, server = FakeClock(), Server()
    breaker = EndpointBreaker("ds_0", "primary", FAILURES, FIRST, 0.1, clock=clock, random=lambda: 0.0)
    _open(breaker, server)
    assert breaker.probe_at == clock.now + 0.1


def test_a_refusal_is_found_through_the_drivers_wrapping() -> None:
    assert refused(refused_by_the_host(1)) and refused(ConnectionRefusedError())
    assert not refused(timed_out(1)) and not refused(server_error(1))
    looped = DriverError("a cause chain that loops")
    looped.__cause__ = DriverError("back")
    looped.__cause__.__cause__ = looped
    assert not refused(looped)
