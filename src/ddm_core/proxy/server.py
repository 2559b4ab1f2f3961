"""The proxy server: listen, authenticate, hand each connection a session; shut down cleanly.

:class:`ProxyServer` owns one :class:`~ddm_core.execute.Executor` (the pools
every session shares) and the worker threads. Shutdown (SIGTERM, SIGINT or
:meth:`ProxyServer.shutdown`) goes through explicit phases:

======== =====================================================================
phase    what happens
======== =====================================================================
SERVING  accepting connections, running statements
DRAINING the listening socket is closed; running commands may finish, up to
         ``proxy.shutdownGraceMs``
CLOSING  every client connection is ended (an open transaction is rolled back)
CLOSED   the executor is closed: every backend connection is returned and
         closed
======== =====================================================================
"""

from __future__ import annotations

import asyncio
import enum
import logging
import os
import signal
from typing import Any

from mysql_mimic import MysqlServer
from mysql_mimic.constants import DEFAULT_SERVER_CAPABILITIES
from mysql_mimic.control import LocalControl, TooManyConnections
from mysql_mimic.errors import ErrorCode
from mysql_mimic.packets import make_error
from mysql_mimic.stream import ConnectionClosed, MysqlStream
from mysql_mimic.types import Capabilities

from ddm_core.errors import ProxyError
from ddm_core.execute import Executor
from ddm_core.metadata.model import ProxySettings, ShardingConfig
from ddm_core.metadata.reload import ConfigHolder, ConfigVersion
from ddm_core.proxy.admission import Admission, Refusal
from ddm_core.proxy.auth import ProxyUsers
from ddm_core.proxy.connection import ProxyConnection
from ddm_core.proxy.idle import IdleSweeper
from ddm_core.proxy.runtime import ProxyRuntime
from ddm_core.proxy.section import in_force, restart_only_changes, section_problems, statement_deadline
from ddm_core.proxy.session import ProxySession
from ddm_core.proxy.stream import BoundedReader
from ddm_core.proxy.tls import tls_context
from ddm_core.proxy.variables import proxy_variables

__all__ = ["ProxyServer", "Phase", "DEFAULT_PORT"]

log = logging.getLogger("ddm_core.proxy")

#: mimic's capabilities less query attributes: MariaDB, behind the proxy, has none, and the proxy would drop
#: them; a client that may send them (mysql-connector, libmysqlclient 8) would also leave the hot path for every
#: statement (docs/proxy.md#the-hot-path).
SERVER_CAPABILITIES = DEFAULT_SERVER_CAPABILITIES & ~Capabilities.CLIENT_QUERY_ATTRIBUTES

DEFAULT_PORT = 3307


class Phase(enum.Enum):
    """Where the server is in its life (see the module docstring)."""

    NEW = "new"
    SERVING = "serving"
    DRAINING = "draining"
    CLOSING = "closing"
    CLOSED = "closed"


class ProxyServer(MysqlServer):  # type: ignore[misc]  # mimic ships no types
    """A MySQL-protocol server over one sharding configuration.

    Args:
        config: The configuration (its ``proxy:`` section gives users and limits), or a
            :class:`~ddm_core.metadata.ConfigHolder`: the executor then follows its versions,
            and so does the proxy section (:meth:`take`, docs/proxy.md#reloading).
        host: Address to listen on.
        port: TCP port (0: any free one; :attr:`port` tells which).
        reuse_port: Listen with ``SO_REUSEPORT``, so several proxy processes share the
            port and the kernel spreads connections over them (``ddm proxy --processes``).
        executor_options: Passed to the :class:`~ddm_core.execute.Executor`.
    """

    def __init__(self, config: ShardingConfig | ConfigHolder, *, host: str = "127.0.0.1", port: int = DEFAULT_PORT,
                 reuse_port: bool = False, **executor_options: Any) -> None:  # fmt: skip
        holder = config if isinstance(config, ConfigHolder) else None
        loaded = config.config if isinstance(config, ConfigHolder) else config
        settings = loaded.proxy
        problems = section_problems(settings, loaded)
        if problems:
            raise ProxyError("; ".join(problems))
        self.settings = settings
        self.host = host
        self.requested_port = port
        self.phase = Phase.NEW
        # Registered as a proxy in the configuration center's instance registry (when it follows one).
        self.executor = Executor(config, **{"instance_role": "proxy", "timeout": statement_deadline(settings),
                                            **executor_options})
        self.runtime = ProxyRuntime(self.executor, proxy_variables(port), workers=settings.workers,
                                    batch_rows=settings.batch_rows)  # fmt: skip
        self.runtime.configure(settings)
        self.users = ProxyUsers(settings.users)
        self.admission = Admission(settings)
        super().__init__(
            session_factory=lambda: ProxySession(self.runtime),
            capabilities=SERVER_CAPABILITIES,
            identity_provider=self.users.for_connection(),  # unbound, no plugins: each connection gets its own
            # connection ids carry the process id, so those of sibling processes differ
            control=LocalControl(server_id=os.getpid() % 65536),
            ssl=tls_context(settings.tls) if settings.tls is not None else None,
        )
        # clientCert: required implies TLS: a plain client would otherwise skip the certificate
        tls = settings.tls
        self.tls_required = tls is not None and (tls.required or tls.client_cert == "required")
        self.reuse_port = reuse_port
        self._connections: set[ProxyConnection] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._stopped = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.borrowed_at_close: int | None = None  # set by shutdown(): 0 when every session gave its back
        self.idle = IdleSweeper(self.runtime)  # ends the sessions idle past their wait_timeout
        self._unsubscribe = holder.subscribe(self._on_version) if holder is not None else None

    # -- reloads -------------------------------------------------------------------------------

    def _on_version(self, new: ConfigVersion, old: ConfigVersion) -> None:
        # The holder's listener, on its watcher thread: the proxy section is taken on the event loop.
        loop = self._loop
        if loop is None:
            self.take(new.config, new.number)
        elif not loop.is_closed():
            loop.call_soon_threadsafe(self.take, new.config, new.number)

    def take(self, config: ShardingConfig, version: int | None = None) -> bool:
        """Make ``config``'s proxy section the one in force; ``False`` when refused (logged at WARNING).

        Users, their rate limits and ``unmask``, table rate limits, masks, the audit log,
        ``inlineStatements`` and ``statementTimeoutMs`` follow at once: new connections authenticate
        against the new users, sessions take the rest at their next statement. ``workers``, ``batchRows`` and ``tls``
        keep their start values (a WARNING names them). The sessions of a user no longer listed
        are ended once they are between commands. Call on the event loop once serving.
        """
        name = f"configuration version {version}" if version is not None else "the configuration"
        settings = config.proxy
        problems = section_problems(settings, config)
        if problems:
            log.warning("ddm proxy: %s: its proxy section is refused, the one in force stays: %s",
                        name, "; ".join(problems))  # fmt: skip
            return False
        try:
            self.runtime.configure(settings)
        except OSError as exc:
            log.warning("ddm proxy: %s: its proxy section is refused, the one in force stays: proxy.auditLog "
                        "%r cannot be opened: %s", name, settings.audit_log, exc.strerror or exc)  # fmt: skip
            return False
        later = restart_only_changes(self.settings, settings)
        if later:
            log.warning("ddm proxy: %s changes proxy.%s, which take effect at the next start",
                        name, ", proxy.".join(later))  # fmt: skip
        before = self.users.names
        self.users.replace(settings.users)
        if settings.statement_timeout_ms != self.settings.statement_timeout_ms:  # statements begun later
            self.executor.timeout = statement_deadline(settings)
        self.settings = in_force(self.settings, settings)
        self.admission.configure(self.settings)
        removed = before - self.users.names
        ended = [c for c in self._connections if c.session.username in removed]
        for connection in ended:
            self.runtime.revoke(connection.connection_id, connection.kill)
        added = ", ".join(sorted(self.users.names - before)) or "none"
        log.info("ddm proxy: the proxy section of %s is in force: %d user(s) (added: %s; removed: %s, "
                 "%d session(s) ended)", name, len(settings.users), added, ", ".join(sorted(removed)) or "none",
                 len(ended))  # fmt: skip
        return True

    @property
    def port(self) -> int:
        """The port listened on (the real one when 0 was asked)."""
        sockets = self.sockets()
        return int(sockets[0].getsockname()[1]) if sockets else self.requested_port

    # -- connections ---------------------------------------------------------------------------

    async def _client_connected_cb(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # mimic's own callback, with ProxyConnection, the admission's limits, and the connection
        # remembered for shutdown.
        if self.phase is not Phase.SERVING:
            writer.close()
            return
        peer = writer.get_extra_info("peername")
        host = str(peer[0]) if peer else "%"
        settings = self.settings
        stream = MysqlStream(BoundedReader(reader, settings.max_allowed_packet, settings.net_read_timeout_ms / 1000),
                             writer)  # fmt: skip
        refusal = self.admission.connect(host)
        if refusal is not None:
            await _refuse(stream, refusal)
            return
        identity = self.users.for_connection()  # the users in force now, bound to this connection
        connection = ProxyConnection(
            stream=stream,
            session=ProxySession(self.runtime),
            control=self.control,
            server_capabilities=self.capabilities,
            identity_provider=identity,
            ssl=self.ssl,
            runtime=self.runtime,
            admission=self.admission,
            host=host,
            tls_required=self.tls_required,
        )
        identity.bind(connection)
        try:
            connection.connection_id = await self.control.add(connection)
        except TooManyConnections:  # mimic's connection ids ran out (65 536 at once)
            self.admission.disconnect(None)
            await _refuse(stream, Refusal(ErrorCode.CON_COUNT_ERROR, "Too many connections"))
            return
        task = asyncio.current_task()
        self._connections.add(connection)
        if task is not None:
            self._tasks.add(task)
        try:
            await connection.start()
        except (ConnectionError, asyncio.IncompleteReadError, ConnectionClosed):
            pass  # the client went away; its session was closed by start()
        finally:
            self._connections.discard(connection)
            if task is not None:
                self._tasks.discard(task)
            self.admission.disconnect(connection.logged_in_as)
            writer.close()
            await self.control.remove(connection.connection_id)

    # -- life ----------------------------------------------------------------------------------

    async def start(self) -> None:
        """Open the pools and start listening."""
        self._loop = asyncio.get_running_loop()  # reloads are taken on it
        await self.start_server(host=self.host, port=self.requested_port, reuse_port=self.reuse_port or None,
                                backlog=back_log(self.settings))  # fmt: skip
        self.phase = Phase.SERVING
        self.idle.start()
        log.info("ddm proxy listening on %s:%s", self.host, self.port)

    async def serve_until_signalled(self) -> None:
        """Serve until SIGTERM / SIGINT (or :meth:`shutdown`), then shut down cleanly."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_stop)
        if self.phase is Phase.NEW:
            await self.start()
        await self._stopped.wait()
        await self.shutdown()

    def request_stop(self) -> None:
        """Ask :meth:`serve_until_signalled` to shut down (signal-handler safe)."""
        self._stopped.set()

    async def shutdown(self) -> None:
        """Stop accepting, let running commands finish (grace period), end every session, close the pools."""
        if self.phase in (Phase.CLOSING, Phase.CLOSED):
            return
        self.phase = Phase.DRAINING
        self.idle.stop()  # the drain ends every session its own way
        if self._unsubscribe is not None:
            self._unsubscribe()  # a version arriving now is not taken
        self.close()  # the listening socket: no new connections
        grace = self.settings.shutdown_grace_ms / 1000
        loop = asyncio.get_running_loop()
        idle = await loop.run_in_executor(None, self.runtime.wait_idle, grace)
        if not idle:
            log.warning("ddm proxy: %d statement(s) still running after %.1f s; ending them",
                        self.runtime.running, grace)  # fmt: skip
        self.phase = Phase.CLOSING
        for connection in list(self._connections):
            connection.kill()  # mimic cancels its task; the session's close() rolls back and returns connections
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=max(grace, 1.0))
        await self.wait_closed()
        self.runtime.backends.close()  # the event loop's own connections (proxy/backends.py)
        self.runtime.workers.shutdown(wait=True)
        self.borrowed_at_close = self.executor.borrowed()
        self.executor.close()
        if self.runtime.audit is not None:
            self.runtime.audit.close()
        self.phase = Phase.CLOSED
        log.info("ddm proxy stopped: %d backend connection(s) were still borrowed at close; pools closed; "
                 "%d statement(s) ran on the event loop, %d of them relayed (%d on the hot path on a transaction's pin, %d taken whole "
                 "by the gate's front); "
                 "%d multi-unit read(s) on the event loop, %d of them relayed, %d merged in order undecoded, %d folded undecoded "
                 "(%d taken from the gate, "
                 "%d answered from reader callbacks); "
                 "%d transaction opening(s) (%d with the "
                 "first statement right behind) and %d end(s) with pins on the event loop", self.borrowed_at_close,
                 self.runtime.inlined, self.runtime.relayed, self.runtime.hot_on_pins, self.runtime.fronted, self.runtime.many_inlined,
                 self.runtime.many_relayed, self.runtime.many_ordered, self.runtime.many_folded, self.runtime.hot_many, self.runtime.many_taken, self.runtime.opened_on_loop, self.runtime.opened_with_first,
                 self.runtime.ended_on_loop)  # fmt: skip


def back_log(settings: ProxySettings) -> int:
    """``proxy.backLog``, else MySQL's default: 80 + ``maxConnections`` / 5."""
    return settings.back_log if settings.back_log is not None else 80 + settings.max_connections // 5


async def _refuse(stream: MysqlStream, refusal: Refusal) -> None:
    """Answer a connection not taken with its error, in place of the handshake, and close it."""
    try:
        await stream.write(make_error(msg=refusal.message, code=refusal.code))
    except ConnectionError:
        pass
    stream.writer.close()
