"""Database URLs and credentials: JDBC and native URLs → one normalized form.

Accepted URLs (``jdbc:`` prefix optional, SQLAlchemy ``+driver`` suffix ignored):

* ``mysql://host[:3306]/db?opt=v``, ``mariadb://...`` (JDBC ``jdbc:mysql://``,
  ``jdbc:mariadb://``)
* ``postgresql://host[:5432]/db`` (also ``postgres://``)
* ``sqlite:///relative/file.db``, ``sqlite:////abs/file.db``, ``sqlite:file.db``,
  ``sqlite::memory:``

Credentials never have to be written in plain text: any string field of a data
source may be ``${ENV:NAME}``, and ``passwordEnv: NAME`` names the variable
directly. A password is kept as a :class:`Secret` that reads its variable when
:meth:`Secret.reveal` is called (so rotating the variable needs no reload); the
loader checks at load time that the variable exists.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Mapping
from urllib.parse import SplitResult, parse_qsl, quote, unquote, urlencode, urlsplit

from ddm_core import dialects
from ddm_core.errors import ConfigError
from ddm_core.metadata.int_range import IntRange

__all__ = ["Secret", "ParsedUrl", "parse_url", "format_url", "ENV_REF", "substitute_env", "DIALECTS", "PORTS"]

#: ``${ENV:NAME}`` (``env`` in any case) — an environment-variable reference.
ENV_REF = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}", re.IGNORECASE)

#: The ports a URL may name (``url.port`` in :data:`ddm_core.metadata.limits.RANGES`).
PORTS = IntRange(1, 65_535, None, note="a TCP port; the backend's default when the URL gives none")

#: Backend names a URL can give (its scheme → :func:`ddm_core.dialects.find_dialect`).
DIALECTS = dialects.KINDS


@dataclass(frozen=True, slots=True)
class Secret:
    """A credential: either an environment variable name or a literal value.

    ``repr`` never shows a literal. :meth:`reveal` resolves an environment
    variable each time it is called.
    """

    env: str | None = None
    literal: str | None = field(default=None, repr=False)

    def reveal(self) -> str:
        """The credential's value.

        Raises:
            ConfigError: the environment variable is not set (names it).
        """
        if self.env is None:
            return self.literal or ""
        value = os.environ.get(self.env)
        if value is None:
            raise ConfigError(
                f"environment variable {self.env} (a data source credential) is not set",
                variable=self.env,
            )
        return value

    def __repr__(self) -> str:
        return f"Secret(env={self.env!r})" if self.env is not None else "Secret('***')"


def substitute_env(text: str) -> tuple[str, list[str]]:
    """``text`` with every ``${ENV:NAME}`` replaced; also the names that are not set."""
    missing: list[str] = []

    def repl(match: re.Match[str]) -> str:
        value = os.environ.get(match.group(1))
        if value is None:
            missing.append(match.group(1))
            return match.group(0)
        return value

    return ENV_REF.sub(repl, text), missing


@dataclass(frozen=True, slots=True)
class ParsedUrl:
    """A database URL split into parts (credentials removed)."""

    dialect: str
    host: str | None
    port: int | None
    database: str | None
    options: Mapping[str, str]
    username: str | None = None
    password: str | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        """The normalized URL without credentials (``mysql://h:3306/db?useSSL=false``)."""
        return format_url(self.dialect, self.host, self.port, self.database, self.options)


def format_url(
    dialect: str, host: str | None, port: int | None, database: str | None, options: Mapping[str, str]
) -> str:
    """A URL without credentials that :func:`parse_url` reads back to the same parts.

    An IPv6 host is bracketed; the database and the options are percent-encoded
    where they hold URL delimiters.
    """
    if dialect == "sqlite":
        base = "sqlite://:memory:" if database == ":memory:" else f"sqlite:///{quote(database or '')}"
    else:
        shown = f"[{host}]" if host and ":" in host else host
        base = f"{dialect}://{shown}:{port}/{quote(database or '', safe='')}"
    if options:
        base += "?" + urlencode(list(options.items()))
    return base


def parse_url(text: str, *, base_dir: Path | None = None) -> ParsedUrl:
    """Parse a database URL (see the module docstring for the accepted forms).

    Args:
        text: The URL, ``${ENV:...}`` references already substituted.
        base_dir: Directory relative SQLite paths are resolved against (the
            configuration file's directory); ``None`` keeps them as written.

    Raises:
        ConfigError: unknown scheme, several hosts, a bad port or no database.
    """
    raw = text.strip()
    if raw.lower().startswith("jdbc:"):
        raw = raw[5:]
    scheme, sep, rest = raw.partition(":")
    backend = dialects.find_dialect(scheme) if sep else None
    if backend is None:
        raise ConfigError(
            f"unsupported database URL {text!r}: the scheme must be one of "
            f"{', '.join(DIALECTS[:-1])} or {DIALECTS[-1]} (optionally with a jdbc: prefix)",
            value=text,
        )
    dialect = backend.name
    if dialect == "sqlite":
        return _parse_sqlite(text, rest, base_dir)
    try:
        parts = urlsplit(f"{dialect}:{rest}")
    except ValueError as exc:  # an unclosed [IPv6 address, characters NFKC turns into separators
        raise ConfigError(f"database URL {text!r} is malformed: {exc}", value=text) from exc
    if not rest.startswith("//") or not parts.netloc or not parts.hostname:
        raise ConfigError(
            f"database URL {text!r} has no host (expected {dialect}://host:port/db)", value=text
        )
    if "," in parts.netloc:
        raise ConfigError(
            f"database URL {text!r} lists several hosts; configure replicas as separate "
            "endpoints instead (replicas: / READWRITE_SPLITTING)",
            value=text,
        )
    port = _port(parts, text, backend.default_port)
    database = unquote(parts.path.lstrip("/")) or None
    options = MappingProxyType(dict(parse_qsl(parts.query, keep_blank_values=True)))
    return ParsedUrl(
        dialect=dialect,
        host=parts.hostname,
        port=port,
        database=database,
        options=options,
        username=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password is not None else None,
    )


def _port(parts: SplitResult, text: str, default: int | None) -> int | None:
    try:
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"database URL {text!r} has an invalid port: {exc}", value=text) from exc
    if port is None:
        return default
    why = PORTS.problem(port)
    if why is not None:
        raise ConfigError(f"database URL {text!r} has an invalid port: it {why}", value=text)
    return port


def _parse_sqlite(text: str, rest: str, base_dir: Path | None) -> ParsedUrl:
    path, _, query = rest.partition("?")
    if path in (":memory:", "//:memory:", "///:memory:"):
        database = ":memory:"
    else:
        if path.startswith("///"):
            path = path[3:]  # sqlite:///rel.db → rel.db ; sqlite:////abs.db → /abs.db
        elif path.startswith("//"):
            raise ConfigError(
                f"SQLite URL {text!r} is ambiguous; write sqlite:///relative.db or sqlite:////absolute.db",
                value=text,
            )
        if not path:
            raise ConfigError(f"SQLite URL {text!r} names no database file", value=text)
        file = Path(unquote(path))
        if base_dir is not None and not file.is_absolute():
            file = base_dir / file
        database = str(file)
    options = MappingProxyType(dict(parse_qsl(query, keep_blank_values=True)))
    return ParsedUrl("sqlite", None, None, database, options)
