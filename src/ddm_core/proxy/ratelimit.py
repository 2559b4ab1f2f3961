"""Rate limits of the proxy: a token bucket per user and per logic table (docs/proxy.md#rate-limits).

Each bucket holds at most one second's worth of statements (``burst`` =
``rate``) and refills continuously. A statement takes one token from its
user's bucket and from the bucket of every limited logic table it names; when
any of them is empty nothing is taken and the statement is refused with
:class:`~ddm_core.errors.RateLimitedError` before it reaches a data source.
The clock is injectable, so tests step time instead of sleeping.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Iterable, Mapping

from ddm_core.errors import RateLimitedError

__all__ = ["TokenBucket", "RateLimiter"]

Clock = Callable[[], float]


class TokenBucket:
    """``rate`` tokens a second, at most ``burst`` saved up (not thread-safe: :class:`RateLimiter` locks)."""

    __slots__ = ("rate", "burst", "_tokens", "_last", "_clock")

    def __init__(self, rate: float, clock: Clock, burst: float | None = None) -> None:
        self.rate = rate
        self.burst = rate if burst is None else burst
        self._tokens = self.burst
        self._clock = clock
        self._last = clock()

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
        self._last = now

    def available(self) -> bool:
        self._refill()
        return self._tokens >= 1.0

    def take(self) -> None:
        self._tokens -= 1.0


class RateLimiter:
    """The buckets of one proxy.

    Args:
        users: User name → statements per second (users not listed, or at 0, are not limited).
        tables: Logic table → statements per second (matched case-insensitively).
        clock: Monotonic seconds.
        previous: The limiter this one replaces (a reload): a bucket whose rate did not change
            is kept with its tokens (and the lock is shared, as sessions may still hold the old
            limiter for a statement), so a reload neither refills nor empties it.
    """

    def __init__(self, users: Mapping[str, int], tables: Mapping[str, int], clock: Clock = time.monotonic,
                 previous: RateLimiter | None = None) -> None:  # fmt: skip
        old_users: dict[str, TokenBucket] = previous._users if previous is not None else {}
        old_tables = {key: b for key, (_, b) in previous._tables.items()} if previous is not None else {}

        def bucket(old: TokenBucket | None, rate: int) -> TokenBucket:
            return old if old is not None and old.rate == rate else TokenBucket(rate, clock)

        self._users: dict[str, TokenBucket] = {
            name: bucket(old_users.get(name), rate) for name, rate in users.items() if rate > 0
        }
        self._tables: dict[str, tuple[str, TokenBucket]] = {
            name.lower(): (name, bucket(old_tables.get(name.lower()), rate)) for name, rate in tables.items()
        }
        self._lock: threading.Lock = previous._lock if previous is not None else threading.Lock()

    @property
    def active(self) -> bool:
        """Any limit configured at all (else :meth:`admit` is never needed)."""
        return bool(self._users or self._tables)

    def admit(self, user: str | None, tables: Iterable[str]) -> None:
        """Take one token for ``user`` and each of ``tables``, or refuse without taking any.

        Raises:
            RateLimitedError: naming the user or table whose bucket is empty and its limit.
        """
        user_bucket = self._users.get(user) if user is not None else None
        table_buckets = [self._tables[t.lower()] for t in dict.fromkeys(tables) if t.lower() in self._tables]
        if user_bucket is None and not table_buckets:
            return
        with self._lock:
            if user_bucket is not None and not user_bucket.available():
                raise RateLimitedError(
                    f"user {user!r} is over its limit of {user_bucket.rate:g} statements per second "
                    "(proxy.users[].rateLimit); retry later",
                    user=user, table=None, limit=user_bucket.rate,
                )  # fmt: skip
            for name, bucket in table_buckets:
                if not bucket.available():
                    raise RateLimitedError(
                        f"logic table {name!r} is over its limit of {bucket.rate:g} statements per second "
                        "(proxy.tableRateLimits); retry later",
                        user=user, table=name, limit=bucket.rate,
                    )  # fmt: skip
            if user_bucket is not None:
                user_bucket.take()
            for _, bucket in table_buckets:
                bucket.take()
