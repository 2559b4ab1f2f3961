"""Who may connect, how many at once, and how fast a host may fail (docs/proxy.md#security-model).

MySQL's own rules, kept per proxy process:

* ``proxy.maxConnections`` client connections at once: one more is refused
  with error 1040 before its handshake;
* ``proxy.maxUserConnections`` connections of one user: one more is refused
  after its login with error 1203;
* ``proxy.maxConnectErrors`` failed handshakes in a row from one host
  (malformed, timed out, dropped before the login ended) block the host for
  ``proxy.hostBlockMs`` (error 1129); a login from it resets its count;
* after ``proxy.failedLoginsBeforeDelay`` wrong passwords in a row from one
  host, its next logins are answered late: one second, doubling up to
  ``proxy.failedLoginDelayMaxMs`` (as MySQL's connection_control plugin); a
  good login resets it. The wait holds the attempt's connection, not a thread.

Hosts are remembered in bounded tables (the least recently failed forgotten
first), so a flood of addresses cannot grow the proxy's memory.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Callable, NamedTuple

from ddm_core.metadata.model import ProxySettings

__all__ = ["Admission", "Refusal", "TOO_MANY_CONNECTIONS", "TOO_MANY_USER_CONNECTIONS", "HOST_BLOCKED", "HOSTS_KEPT"]

TOO_MANY_CONNECTIONS = 1040  # ER_CON_COUNT_ERROR
TOO_MANY_USER_CONNECTIONS = 1203  # ER_TOO_MANY_USER_CONNECTIONS
HOST_BLOCKED = 1129  # ER_HOST_IS_BLOCKED
#: Hosts each table remembers at most.
HOSTS_KEPT = 10_000
_FIRST_DELAY = 1.0


class Refusal(NamedTuple):
    """Why a connection is refused: the MySQL error code and message it gets."""

    code: int
    message: str


class _Counts:
    """Per-host counts in a bounded table (the least recently touched entry goes first)."""

    def __init__(self) -> None:
        self._counts: OrderedDict[str, int] = OrderedDict()

    def bump(self, host: str) -> int:
        count = self._counts.pop(host, 0) + 1
        self._counts[host] = count
        if len(self._counts) > HOSTS_KEPT:
            self._counts.popitem(last=False)
        return count

    def get(self, host: str) -> int:
        return self._counts.get(host, 0)

    def clear(self, host: str) -> None:
        self._counts.pop(host, None)


class Admission:
    """The connection limits of one proxy process, over the proxy section in force.

    Args:
        settings: The proxy section (:meth:`configure` takes a reloaded one).
        clock: Monotonic seconds (tests pass their own).
    """

    def __init__(self, settings: ProxySettings, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.settings = settings
        self.connections = 0
        self._users: dict[str, int] = {}
        self._errors = _Counts()  # host -> failed handshakes in a row
        self._failed_logins = _Counts()  # host -> wrong passwords in a row
        self._blocked: OrderedDict[str, float] = OrderedDict()  # host -> blocked until (clock)

    def configure(self, settings: ProxySettings) -> None:
        """Take a reloaded proxy section: new limits apply to the next connections."""
        self.settings = settings

    @property
    def connect_timeout(self) -> float:
        """Seconds a client has from connecting to being logged in."""
        return self.settings.connect_timeout_ms / 1000

    def connect(self, host: str) -> Refusal | None:
        """A client of ``host`` connects: ``None`` and counted (:meth:`disconnect` later), or why not."""
        until = self._blocked.get(host)
        if until is not None:
            if self._clock() < until:
                return Refusal(HOST_BLOCKED, f"Host '{host}' is blocked because of many connection errors "
                                             "(proxy.maxConnectErrors); it is unblocked after proxy.hostBlockMs")  # fmt: skip
            del self._blocked[host]
            self._errors.clear(host)
        if self.connections >= self.settings.max_connections:
            return Refusal(TOO_MANY_CONNECTIONS, "Too many connections (proxy.maxConnections)")
        self.connections += 1
        return None

    def disconnect(self, user: str | None) -> None:
        """A counted connection ended (``user``: who it was logged in as, if anyone)."""
        self.connections -= 1
        if user is not None:
            self.disconnect_user(user)

    def handshake_failed(self, host: str) -> None:
        """A handshake from ``host`` failed (malformed, timed out, dropped): counted toward blocking it."""
        if self._errors.bump(host) >= self.settings.max_connect_errors:
            self._blocked[host] = self._clock() + self.settings.host_block_ms / 1000
            if len(self._blocked) > HOSTS_KEPT:
                self._blocked.popitem(last=False)

    def login_delay(self, host: str) -> float:
        """Seconds to wait before checking a login from ``host`` (0 unless it failed often in a row)."""
        allowed = self.settings.failed_logins_before_delay
        over = self._failed_logins.get(host) - allowed
        if allowed == 0 or over < 0:
            return 0.0
        return min(_FIRST_DELAY * 2.0 ** min(over, 32), self.settings.failed_login_delay_max_ms / 1000)

    def login_failed(self, host: str) -> None:
        """A wrong password or unknown user from ``host``."""
        self._failed_logins.bump(host)

    def logged_in(self, host: str, user: str, previous: str | None = None) -> Refusal | None:
        """``user`` logged in from ``host`` (``previous``: the user a COM_CHANGE_USER leaves): ``None``, or why not."""
        self._errors.clear(host)
        self._failed_logins.clear(host)
        if user == previous:
            return None
        limit = self.settings.max_user_connections
        if limit and self._users.get(user, 0) >= limit:
            return Refusal(TOO_MANY_USER_CONNECTIONS, f"User {user} already has more than 'max_user_connections' "
                                                      "active connections (proxy.maxUserConnections)")  # fmt: skip
        self._users[user] = self._users.get(user, 0) + 1
        if previous is not None:
            self.disconnect_user(previous)
        return None

    def disconnect_user(self, user: str) -> None:
        """One connection of ``user`` is no longer logged in as it."""
        left = self._users.get(user, 0) - 1
        if left > 0:
            self._users[user] = left
        else:
            self._users.pop(user, None)

    def user_connections(self, user: str) -> int:
        """Connections logged in as ``user`` now."""
        return self._users.get(user, 0)
