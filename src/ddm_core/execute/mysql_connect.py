"""The one way ddm-core opens a MySQL / MariaDB connection (executor, ``ddm ddl --execute``, ``ddm demo``).

Every caller gets the same defaults:

* ``charset="utf8mb4"`` — also what PyMySQL encodes parameters with;
* ``autocommit=True`` — transactions are explicit ``BEGIN`` s (docs/operations.md#transactions);
* each result shape's column descriptions decoded once per connection
  (:mod:`~ddm_core.execute.pymysql_results`);
* ``memoryview`` and ``bytearray`` parameters bound as ``bytes`` (:func:`~ddm_core.execute.params.teach_pymysql`);
* TLS off unless the endpoint asks for it (``useSSL=true`` or ``sslMode=PREFERRED`` /
  ``REQUIRED`` in the URL): a TLS handshake costs ~20 ms per connect, a plain one ~1 ms
  (docs/notes.md#pymysql-connect-cost);
* timeouts always set: ``connect_timeout`` bounds the TCP connect **and the handshake**
  (PyMySQL reads the greeting with its read timeout, which is unset by default, so a
  server that accepts the TCP connection but does not answer — a stopped process —
  blocked a connect until it resumed); afterwards reads and writes wait at most
  ``socket_timeout`` (URL ``socketTimeout`` in ms, default :data:`DEFAULT_SOCKET_TIMEOUT`).

Statement deadlines are shorter than the socket timeout and enforced by the
executor's watchdog (:meth:`~ddm_core.execute.drivers.MySQLDriver.cancel`); the
socket timeout is the bound for everything the watchdog does not cover
(``BEGIN`` / ``COMMIT``, statements without a deadline) — see
docs/operations.md#statement-timeouts-and-partial-results.
"""

from __future__ import annotations

import importlib
import io
import socket
import struct
import sys
from typing import Any, Mapping

from ddm_core.errors import ConfigError, ExecutionError
from ddm_core.execute.params import teach_pymysql

__all__ = [
    "open_mysql",
    "pymysql_module",
    "socket_timeout_of",
    "connect_timeout_of",
    "tls_arguments",
    "DEFAULT_SOCKET_TIMEOUT",
    "CHARSET",
]

#: Seconds a read or write may wait for the server once connected (URL ``socketTimeout``, ms).
DEFAULT_SOCKET_TIMEOUT = 60.0

#: The connection character set; PyMySQL encodes parameters with it too.
CHARSET = "utf8mb4"

_SSL_ON = {"true", "1", "yes"}
_SSL_MODES = {"DISABLED": None, "PREFERRED": False, "REQUIRED": True}


def pymysql_module() -> Any:
    """The PyMySQL module (a dependency of ddm-core; untyped, so used as ``Any``).

    Raises:
        ExecutionError: it is not importable (a broken install).
    """
    try:
        return importlib.import_module("pymysql")
    except ImportError as exc:
        raise ExecutionError(
            "mysql / mariadb data sources need PyMySQL, a dependency of ddm-core that is not importable "
            f"here ({exc}); reinstall ddm-core or pip install PyMySQL",
            dialect="mysql",
        ) from exc


def _option(options: Mapping[str, str], name: str) -> str | None:
    """A URL option by its Connector/J name, matched without regard to case."""
    wanted = name.lower()
    for key, value in options.items():
        if key.lower() == wanted:
            return value
    return None


def _millis(options: Mapping[str, str], name: str, where: str) -> float | None:
    raw = _option(options, name)
    if raw is None:
        return None
    try:
        ms = float(raw)
    except ValueError:
        raise ConfigError(f"{where}: URL option {name}={raw!r} is not a number of milliseconds", option=name) from None
    if ms <= 0:
        raise ConfigError(
            f"{where}: URL option {name}={raw!r} must be > 0 ms (ddm-core never waits on a server without a bound)",
            option=name,
        )
    return ms / 1000.0


def socket_timeout_of(options: Mapping[str, str], where: str = "data source") -> float:
    """Seconds reads and writes may wait: URL ``socketTimeout`` (ms), else :data:`DEFAULT_SOCKET_TIMEOUT`."""
    seconds = _millis(options, "socketTimeout", where)
    return DEFAULT_SOCKET_TIMEOUT if seconds is None else seconds


def connect_timeout_of(options: Mapping[str, str], default: float, where: str = "data source") -> float:
    """Seconds a connect (TCP + handshake) may take: URL ``connectTimeout`` (ms) if shorter than ``default``."""
    seconds = _millis(options, "connectTimeout", where)
    return default if seconds is None else min(seconds, default)


def tls_arguments(options: Mapping[str, str], where: str) -> dict[str, Any]:
    """PyMySQL's TLS arguments for the URL's ``sslMode`` / ``useSSL`` (off by default)."""
    mode = _option(options, "sslMode")
    if mode is not None:
        key = mode.upper()
        if key not in _SSL_MODES:
            raise ConfigError(
                f"{where}: URL option sslMode={mode!r} is not one of {', '.join(_SSL_MODES)} "
                "(certificate checks: not supported yet)",
                option="sslMode",
            )
        required = _SSL_MODES[key]
    else:
        use = _option(options, "useSSL")
        required = False if use is not None and use.lower() in _SSL_ON else None
    if required is None:
        return {"ssl_disabled": True}
    if required:
        # Encrypted, certificate not checked (what sslMode=REQUIRED means for Connector/J).
        return {"ssl": {"check_hostname": False, "verify_mode": "none"}}
    return {"ssl_disabled": False}  # PyMySQL negotiates TLS when the server offers it


#: The URL option that makes an UPDATE's row count the rows it matched (Connector/J's ``useAffectedRows=false``).
MATCHED_ROWS = {"useAffectedRows": "false"}
_FOUND_ROWS = 2  # CLIENT_FOUND_ROWS, the same bit in PyMySQL's and asyncmy's constants


def client_flags(options: Mapping[str, str], where: str) -> int:
    """Capability flags the URL options ask for: ``useAffectedRows=false`` → ``CLIENT_FOUND_ROWS``.

    By default (``true``, PyMySQL's behaviour) an UPDATE counts the rows it changed; with ``false``
    (Connector/J's default, and what SQLAlchemy's MySQL dialects ask for) the rows it matched, as
    SQLite and PostgreSQL count them.

    Raises:
        ConfigError: the option is neither ``true`` nor ``false``.
    """
    value = _option(options, "useAffectedRows")
    if value is None or value.lower() == "true":
        return 0
    if value.lower() == "false":
        return _FOUND_ROWS
    raise ConfigError(f"{where}: URL option useAffectedRows={value!r} is neither true nor false", option="useAffectedRows")


def open_mysql(
    *,
    host: str,
    port: int,
    user: str,
    password: str,
    database: str | None,
    connect_timeout: float,
    socket_timeout: float = DEFAULT_SOCKET_TIMEOUT,
    options: Mapping[str, str] | None = None,
    where: str = "data source",
) -> Any:
    """A new PyMySQL connection with ddm-core's defaults (see the module docstring).

    Args:
        connect_timeout: Seconds for the TCP connect and the handshake together
            (each read or write of the handshake waits at most this long).
        socket_timeout: Seconds any later read or write may wait for the server.
        options: The endpoint's URL options (``useSSL``, ``sslMode``, ``useAffectedRows``).
        where: What the connection is for, in error messages (``data source 'ds_0'``).

    Returns:
        An open ``pymysql.connections.Connection`` in autocommit mode.

    Raises:
        ConfigError: an URL option has a value ddm-core cannot use.
        pymysql.err.MySQLError: the server refused or did not answer (mapped by callers).
    """
    from ddm_core.execute.pymysql_results import connection_class

    bound = max(0.05, float(connect_timeout))
    raw = connection_class(pymysql_module())(
        host=host,
        port=port,
        user=user,
        password=password,
        database=database or None,
        autocommit=True,
        charset=CHARSET,
        connect_timeout=bound,
        read_timeout=bound,  # the handshake is read with these: a silent server fails the connect in time
        write_timeout=bound,
        client_flag=client_flags(options or {}, where),
        **tls_arguments(options or {}, where),
    )
    # From now on the socket timeout applies: enforced by the kernel where it can be
    # (see _bound_by_the_kernel), else by PyMySQL, which reads these attributes before
    # every socket operation; it has no public setter (tests/test_mysql_connect.py
    # checks they still exist, so a PyMySQL upgrade that renames them fails loudly).
    if not _bound_by_the_kernel(raw, socket_timeout):
        raw._read_timeout = socket_timeout
        raw._write_timeout = socket_timeout
    teach_pymysql(raw)  # memoryview / bytearray params bound as bytes
    return raw


class _KernelTimedIO(socket.SocketIO):
    """A blocking socket's reader for which "no data before ``SO_RCVTIMEO``" is a timeout, not "try again"."""

    def readinto(self, b: Any) -> int | None:
        n = super().readinto(b)
        if n is None:  # EAGAIN from a blocking socket: the kernel's receive timeout passed
            raise TimeoutError("no answer from the server within the socket timeout")
        return n


def _bound_by_the_kernel(raw: Any, seconds: float) -> bool:
    """Bound reads and writes with ``SO_RCVTIMEO`` / ``SO_SNDTIMEO`` on a blocking socket (Linux, no TLS).

    A Python socket timeout makes every receive and send a ``poll()`` first and
    then the call, each releasing and retaking the GIL; with 8 threads on 2
    cores every retake waits for the GIL. The kernel's own timeouts keep the
    socket blocking: one call, one GIL hand-off, the same bound
    (docs/notes.md, "Socket timeouts in the kernel"). PyMySQL turns the timeout
    into its usual "Lost connection to MySQL server during query" and closes
    the connection, as with a Python timeout.
    """
    sock = getattr(raw, "_sock", None)
    if not sys.platform.startswith("linux") or getattr(raw, "_secure", False) or not isinstance(sock, socket.socket):
        return False
    whole = int(seconds)
    timeval = struct.pack("ll", whole, int((seconds - whole) * 1_000_000))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval)
    raw._read_timeout = raw._write_timeout = None
    sock.settimeout(None)
    raw._current_timeout = None
    old = raw._rfile
    sock._io_refs += 1  # type: ignore[attr-defined]  # what socket.makefile() does for the reader it returns
    raw._rfile = io.BufferedReader(_KernelTimedIO(sock, "rb"))
    old.close()
    return True
