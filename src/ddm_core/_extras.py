"""Optional dependencies: which extra brings which module, and the one refusal when it is missing.

``pip install ddm-core`` is enough for the library, ``ddm demo`` and every command's ``--help``;
a feature built on an optional package checks for it with :func:`require_extra` before it starts,
so a user without the extra reads which one to install instead of a ``ModuleNotFoundError``.
"""

from __future__ import annotations

import importlib

from ddm_core.errors import MissingExtraError

__all__ = ["EXTRA_MODULES", "require_extra"]

#: The extras of pyproject.toml that a feature needs, and the modules each one brings. ``fast``
#: (sqlglotc) and ``mysql`` (kept for old install lines) are not here: nothing needs them.
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "proxy": ("mysql_mimic",),  # uvloop too, but the proxy runs on asyncio's loop without it
    "metrics": ("prometheus_client",),
    "migrate": ("pymysqlreplication",),
    "postgresql": ("psycopg",),
    "redis": ("redis",),
    "etcd": ("requests",),  # the etcd client (metadata/sources/etcd_client.py) speaks etcd's JSON gateway
    "aio": ("asyncmy", "aiosqlite", "greenlet"),  # ddm_core.aio: asyncio drivers (psycopg's own for postgresql), merged streams
    "sqlalchemy": ("sqlalchemy",),  # the ddm+pymysql / ddm+asyncmy dialects (ddm+asyncmy also needs aio)
}


def require_extra(extra: str, *, needed_by: str) -> None:
    """Import ``extra``'s modules, or refuse on behalf of ``needed_by`` naming the extra to install.

    Args:
        extra: A key of :data:`EXTRA_MODULES`.
        needed_by: What is refused, as the user called it (``ddm proxy``, ``the Redis sink 'redis://...'``).

    Raises:
        MissingExtraError: one of the modules (or a module it needs) is not installed.
    """
    for module in EXTRA_MODULES[extra]:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            raise MissingExtraError(extra, needed_by, exc.name or module) from exc
