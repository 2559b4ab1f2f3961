"""A circuit breaker per endpoint around opening connections (pybreaker).

Closed → open after ``breaker_failures`` consecutive connection failures →
half-open after ``breaker_reset_ms`` (the next connect is the probe) → closed
again on a success. While open, a connect fails at once with
:class:`~ddm_core.errors.DataSourceUnavailableError` naming the endpoint,
instead of every thread waiting for its own connect timeout. The balancer
leaves replicas whose breaker is open out of reads, so their probe is the
monitor's check, not a caller's read. Opening is logged at ERROR with the
connect error that tripped it (docs/readwrite.md#circuit-breakers).
"""

from __future__ import annotations

import logging
import threading
import importlib
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from ddm_core.errors import DataSourceUnavailableError, DdmError
from ddm_core.metadata.model import DataSource, Endpoint

__all__ = ["EndpointBreaker", "EndpointBreakers"]

log = logging.getLogger("ddm_core.readwrite")

T = TypeVar("T")

if TYPE_CHECKING:
    import pybreaker


def _pybreaker() -> Any:
    """pybreaker, imported with the first breaker: it imports redis when installed (~70 ms), not ours to pay at import."""
    return importlib.import_module("pybreaker")


class _Logger:
    """A pybreaker listener (its four hooks, duck-typed): remembers the last failure, logs opening and closing."""

    def __init__(self, owner: EndpointBreaker) -> None:
        self.owner = owner
        self.last: BaseException | None = None

    def before_call(self, cb: pybreaker.CircuitBreaker, func: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        """Nothing to note before a connect."""

    def success(self, cb: pybreaker.CircuitBreaker) -> None:
        """Nothing to note: the breaker resets its own count."""

    def failure(self, cb: pybreaker.CircuitBreaker, exc: BaseException) -> None:
        self.last = exc

    def state_change(self, cb: pybreaker.CircuitBreaker, old_state: Any, new_state: Any) -> None:
        o = self.owner
        name = getattr(new_state, "name", str(new_state))
        if name == _pybreaker().STATE_OPEN:
            level = self.last.log_level if isinstance(self.last, DdmError) else logging.ERROR
            log.log(level, "circuit breaker of endpoint %r (data source %r) opened after %d consecutive "
                    "connection failures; connects fail fast for %g s", o.endpoint, o.data_source,
                    cb.fail_max, cb.reset_timeout, exc_info=self.last)  # fmt: skip
        elif name == _pybreaker().STATE_CLOSED:
            log.info("circuit breaker of endpoint %r (data source %r) closed again", o.endpoint, o.data_source)


class EndpointBreaker:
    """The breaker of one endpoint; :meth:`call` wraps a connect."""

    def __init__(self, data_source: str, endpoint: str, failures: int, reset_s: float) -> None:
        self.data_source = data_source
        self.endpoint = endpoint
        self._listener = _Logger(self)
        self._lib = lib = _pybreaker()
        self.breaker = lib.CircuitBreaker(
            fail_max=failures, reset_timeout=reset_s, throw_new_error_on_trip=False,
            listeners=[self._listener], name=endpoint,
        )  # fmt: skip

    @property
    def state(self) -> str:
        """``"closed"``, ``"open"`` or ``"half-open"``."""
        return str(self.breaker.current_state)

    @property
    def is_open(self) -> bool:
        return bool(self.breaker.current_state == self._lib.STATE_OPEN)

    @property
    def failures(self) -> int:
        return int(self.breaker.fail_counter)

    def call(self, connect: Callable[..., T], *args: Any) -> T:
        """``connect(*args)`` through the breaker.

        Raises:
            DataSourceUnavailableError: the breaker is open (the error that
                opened it is chained).
        """
        try:
            result: T = self.breaker.call(connect, *args)
            return result
        except self._lib.CircuitBreakerError as exc:
            raise DataSourceUnavailableError(
                f"endpoint {self.endpoint!r} of data source {self.data_source!r} is unavailable: its circuit "
                f"breaker is open after {self.breaker.fail_max} consecutive connection failures "
                f"(next probe after {self.breaker.reset_timeout:g} s)",
                data_source=self.data_source,
                endpoint=self.endpoint,
                breaker=self.state,
            ) from (self._listener.last or exc)


class EndpointBreakers:
    """One :class:`EndpointBreaker` per endpoint, kept across configuration reloads of the same endpoint."""

    def __init__(self) -> None:
        self._breakers: dict[tuple[str, str, str], EndpointBreaker] = {}
        self._lock = threading.Lock()

    def of(self, ds: DataSource, endpoint: Endpoint) -> EndpointBreaker:
        key = (ds.name, endpoint.name, endpoint.url)
        found = self._breakers.get(key)
        if found is None:
            with self._lock:
                found = self._breakers.get(key)
                if found is None:
                    rw = ds.read_write
                    found = self._breakers[key] = EndpointBreaker(
                        ds.name, endpoint.name, rw.breaker_failures, rw.breaker_reset_ms / 1000.0
                    )
        return found
