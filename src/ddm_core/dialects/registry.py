"""Which :class:`~ddm_core.dialects.base.Dialect` answers for a backend name, URL or driver error."""

from __future__ import annotations

from typing import Callable

from ddm_core.dialects.base import Dialect
from ddm_core.dialects.mysql import MariaDB, MySQL
from ddm_core.dialects.postgresql import PostgreSQL
from ddm_core.dialects.sqlite import SQLite
from ddm_core.errors import ConfigError

__all__ = ["DIALECTS", "KINDS", "dialect_for", "find_dialect", "dialect_of_error", "ddl_kinds", "titles"]

#: One instance per backend, in the order messages list them. A new backend is one
#: module defining its Dialect subclass, plus its instance here.
DIALECTS: tuple[Dialect, ...] = (MySQL(), MariaDB(), PostgreSQL(), SQLite())
#: The backend names configurations use (``Endpoint.dialect``).
KINDS: tuple[str, ...] = tuple(d.name for d in DIALECTS)

_BY_NAME: dict[str, Dialect] = {}
for _d in DIALECTS:
    for _key in (_d.name, *_d.schemes):
        _BY_NAME.setdefault(_key, _d)
# Several dialects may share a driver (MySQL and MariaDB: PyMySQL); its errors read alike.
_BY_ERROR_MODULE: dict[str, Dialect] = {}
for _d in DIALECTS:
    for _key in _d.error_modules:
        _BY_ERROR_MODULE.setdefault(_key, _d)
del _d, _key


def _backend_name(kind_or_url: str) -> str:
    """``"mysql"`` for ``mysql``, ``MySQL``, ``mysql://h/db``, ``jdbc:mysql://...``, ``mysql+pymysql://...``."""
    text = kind_or_url.strip().lower()
    if text.startswith("jdbc:"):
        text = text[5:]
    return text.partition(":")[0].split("+", 1)[0]


def find_dialect(kind_or_url: str) -> Dialect | None:
    """The dialect for a backend name (``Endpoint.dialect``) or URL scheme, or ``None``."""
    return _BY_NAME.get(_backend_name(kind_or_url))


def dialect_for(kind_or_url: str) -> Dialect:
    """The dialect for a backend name (``"mysql"``, ``"postgres"``...) or a database URL.

    Raises:
        ConfigError: no backend of that name; the message names it and the known ones.
    """
    found = find_dialect(kind_or_url)
    if found is None:
        raise ConfigError(
            f"unknown database backend {_backend_name(kind_or_url) or kind_or_url!r} (from {kind_or_url!r}); "
            f"ddm-core knows {', '.join(KINDS)}",
            value=kind_or_url,
        )
    return found


def dialect_of_error(exc: BaseException) -> Dialect | None:
    """The dialect whose driver raised ``exc`` (by the exception's module), or ``None``."""
    return _BY_ERROR_MODULE.get(type(exc).__module__.split(".", 1)[0])


def ddl_kinds() -> tuple[str, ...]:
    """Names the DDL generator can be told to write in: one per SQL dialect written.

    MariaDB writes MySQL's DDL, so it is listed as ``"mysql"``.
    """
    seen: dict[str, str] = {}
    for d in DIALECTS:
        if d.writes_ddl:
            seen.setdefault(d.sqlglot_name, d.name)
    return tuple(seen.values())


def titles(has: Callable[[Dialect], bool], last: str = "or") -> str:
    """The backends with a feature as messages name them: ``titles(lambda d: d.supports_xa)`` is ``"MySQL or MariaDB"``.

    A new backend that has the feature joins every message naming the ones that do.
    """
    names = [d.title for d in DIALECTS if has(d)]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} {last} {names[-1]}"
