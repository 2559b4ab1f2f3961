"""A circuit breaker per endpoint around opening connections.

Closed → open after ``breaker_failures`` consecutive connection failures.
While open, a connect fails at once with
:class:`~ddm_core.errors.DataSourceUnavailableError` naming the endpoint,
instead of every thread waiting for its own connect timeout. The first connect
after a short wait (``breaker_probe_ms``) is the probe: the breaker is
half-open while it runs, every other caller is still refused at once, its
success closes the breaker and its failure opens it again for twice the wait,
up to ``breaker_reset_ms``. A probe the host refuses outright (nothing listens
on the port: the server is down or restarting, the host is up) cost one round
trip and tells that the server may be back any moment, so the next wait is
the first one again rather than a longer one; timeouts and errors from a
server double it. Each wait is jittered, so that processes sharing a server do
not probe it in step. Recovery thus follows the server: after a restart the
first statement gets through a fraction of a second after it listens again,
while a host that does not answer costs at most one probe per
``breaker_reset_ms``.

No lock is held while a connect runs: a connect that hangs until its timeout
holds up only its own caller. The balancer leaves replicas whose breaker is
not closed out of reads, so their probe is the monitor's check, not a
caller's read. Opening is logged at ERROR with the connect error that tripped
it (docs/readwrite.md#circuit-breakers).
"""

from __future__ import annotations

import logging
import random as _random
import threading
import time
from typing import Any, Callable, TypeVar

from ddm_core.errors import DataSourceUnavailableError, DdmError
from ddm_core.metadata.model import DataSource, Endpoint

__all__ = ["Backoff", "EndpointBreaker", "EndpointBreakers", "JITTER", "refused"]

log = logging.getLogger("ddm_core.readwrite")

T = TypeVar("T")

CLOSED, OPEN, HALF_OPEN = "closed", "open", "half-open"

#: A wait is drawn from ``[step * (1 - JITTER), step]``: never longer than its step, so the
#: configured maximum really is the longest wait, and the first probe comes within the first step.
JITTER = 0.5


class Backoff:
    """The waits before the probes of one opening: ``first``, doubling after each failed probe, at most ``longest``.

    Args:
        first: The first step in seconds (capped at ``longest``).
        longest: The largest step in seconds.
        random: Uniform numbers in ``[0, 1)`` for the jitter (tests inject their own).
    """

    def __init__(self, first: float, longest: float, random: Callable[[], float]) -> None:
        self.first = min(first, longest)
        self.longest = longest
        self._random = random
        self.step = self.first

    def next_wait(self) -> float:
        """The jittered wait of the current step; the step doubles for the next one."""
        wait = self.step * (1.0 - JITTER * self._random())
        self.step = min(self.step * 2.0, self.longest)
        return wait

    def first_again(self) -> float:
        """The jittered first step: the steps start over."""
        self.step = self.first
        return self.next_wait()


def refused(exc: BaseException) -> bool:
    """``exc`` comes from a connect the host refused outright (TCP reset: nothing listens on the port).

    Drivers wrap the socket's error in their own (PyMySQL: ``OperationalError`` 2003), so the
    chain of causes is searched.
    """
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, ConnectionRefusedError):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


class EndpointBreaker:
    """The breaker of one endpoint; :meth:`call` wraps a connect.

    Args:
        data_source: The data source's name, for messages.
        endpoint: The endpoint's name, for messages.
        failures: Consecutive connection failures that open it.
        first_wait: Seconds from opening to the first probe (before jitter).
        longest_wait: The longest wait between two probes, in seconds.
        clock: Monotonic seconds (default ``time.monotonic``).
        random: Uniform numbers in ``[0, 1)`` for the jitter (default ``random.random``).
    """

    def __init__(
        self,
        data_source: str,
        endpoint: str,
        failures: int,
        first_wait: float,
        longest_wait: float,
        *,
        clock: Callable[[], float] | None = None,
        random: Callable[[], float] | None = None,
    ) -> None:
        self.data_source = data_source
        self.endpoint = endpoint
        self.fail_max = failures
        self.backoff = Backoff(first_wait, longest_wait, random or _random.random)
        self._clock = clock or time.monotonic
        self._lock = threading.Lock()
        self._state = CLOSED
        self._failures = 0
        self._opened_at = 0.0
        self._probe_at = 0.0  # while open: when the next connect becomes the probe
        self._probes = 0  # probes of the current opening
        self._last: BaseException | None = None  # the error that opened it, or that the last probe met

    @property
    def state(self) -> str:
        """``"closed"``, ``"open"`` or ``"half-open"`` (a probe under way)."""
        return self._state

    @property
    def is_open(self) -> bool:
        """Refusing connects now: open, or half-open (only the probe goes through)."""
        return self._state != CLOSED

    @property
    def failures(self) -> int:
        """Consecutive connection failures counted while closed."""
        return self._failures

    @property
    def probe_at(self) -> float | None:
        """While open, the clock reading from which the next connect is the probe; else ``None``."""
        return self._probe_at if self._state == OPEN else None

    def call(self, connect: Callable[..., T], *args: Any) -> T:
        """``connect(*args)`` through the breaker.

        Raises:
            DataSourceUnavailableError: the breaker is open and its probe is not
                due yet, or another caller's probe is under way (the error that
                opened it, or that the last probe met, is chained).
        """
        probe = self._admit()
        try:
            result = connect(*args)
        except BaseException as exc:
            self._failed(exc, probe)
            raise
        self._succeeded()
        return result

    def _admit(self) -> bool:
        """Whether this call is the probe; raises the refusal when it may not connect at all."""
        with self._lock:
            if self._state == CLOSED:
                return False
            now = self._clock()
            if self._state == OPEN and now >= self._probe_at:
                self._state = HALF_OPEN
                self._probes += 1
                return True
            after = f"after {self.fail_max} consecutive connection failures"
            if self._state == OPEN:
                why = f"is open {after} (next probe in {self._probe_at - now:.2f} s)"
            else:
                why = f"is half-open {after}: another caller's probe is under way"
            cause, state = self._last, self._state
        raise DataSourceUnavailableError(
            f"endpoint {self.endpoint!r} of data source {self.data_source!r} is unavailable: its circuit breaker {why}",
            data_source=self.data_source,
            endpoint=self.endpoint,
            breaker=state,
        ) from cause

    def _failed(self, exc: BaseException, probe: bool) -> None:
        with self._lock:
            now = self._clock()
            if probe and self._state == HALF_OPEN:
                self._last = exc
                self._state = OPEN
                wait = self.backoff.first_again() if refused(exc) else self.backoff.next_wait()
                self._probe_at = now + wait
                opened = False
            elif self._state == CLOSED:
                self._failures += 1
                if self._failures < self.fail_max:
                    return
                self._last = exc
                self._state = OPEN
                self._opened_at = now
                self._probes = 0
                wait = self.backoff.first_again()
                self._probe_at = now + wait
                opened = True
            else:  # a connect begun before the breaker opened: only the probe decides
                return
        if opened:
            level = exc.log_level if isinstance(exc, DdmError) else logging.ERROR
            log.log(level, "circuit breaker of endpoint %r (data source %r) opened after %d consecutive connection "
                    "failures; connects fail fast, the first probe in %.2f s (probes back off up to %g s)",
                    self.endpoint, self.data_source, self.fail_max, wait, self.backoff.longest,
                    exc_info=exc)  # fmt: skip
        else:  # every 0.25 s while a restart is refused: not for the default log
            log.debug("probe of endpoint %r (data source %r) failed (%s); the next in %.2f s",
                      self.endpoint, self.data_source, exc, wait)  # fmt: skip

    def _succeeded(self) -> None:
        with self._lock:
            self._failures = 0
            if self._state == CLOSED:
                return
            self._state = CLOSED
            self._last = None
            open_for, probes = self._clock() - self._opened_at, self._probes
        log.info("circuit breaker of endpoint %r (data source %r) closed again after %.2f s open (%d probes)",
                 self.endpoint, self.data_source, open_for, probes)  # fmt: skip


class EndpointBreakers:
    """One :class:`EndpointBreaker` per endpoint, kept across configuration reloads of the same endpoint.

    Args:
        clock: Monotonic seconds for every breaker (default ``time.monotonic``).
        random: Uniform numbers in ``[0, 1)`` for the jitter (default ``random.random``).
    """

    def __init__(self, clock: Callable[[], float] | None = None, random: Callable[[], float] | None = None) -> None:
        self._breakers: dict[tuple[str, str, str], EndpointBreaker] = {}
        self._lock = threading.Lock()
        self._clock = clock
        self._random = random

    def of(self, ds: DataSource, endpoint: Endpoint) -> EndpointBreaker:
        key = (ds.name, endpoint.name, endpoint.url)
        found = self._breakers.get(key)
        if found is None:
            with self._lock:
                found = self._breakers.get(key)
                if found is None:
                    rw = ds.read_write
                    found = self._breakers[key] = EndpointBreaker(
                        ds.name, endpoint.name, rw.breaker_failures, rw.breaker_probe_ms / 1000.0,
                        rw.breaker_reset_ms / 1000.0, clock=self._clock, random=self._random,
                    )  # fmt: skip
        return found
