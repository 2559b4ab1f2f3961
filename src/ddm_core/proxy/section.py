"""Which ``proxy:`` sections a proxy takes, at start and on a reload (docs/proxy.md#reloading).

The configuration loader already refuses a malformed section (a bad hash, a
number out of range): the :class:`~ddm_core.metadata.ConfigHolder` then keeps
the whole previous version. What only the proxy can judge is here: a section
with nobody to log in, or rate limits on a table the configuration does not
define. And some fields are read once, at start — the worker threads, the batch
size, TLS — so a reload that changes them keeps the values in force and says
they take effect at the next start.
"""

from __future__ import annotations

import dataclasses

from ddm_core.metadata.model import ProxySettings, ShardingConfig

__all__ = ["section_problems", "RESTART_ONLY", "restart_only_changes", "in_force", "statement_deadline"]

#: Fields read at start only: ProxySettings attribute -> configuration name.
RESTART_ONLY = {"workers": "workers", "batch_rows": "batchRows", "tls": "tls", "back_log": "backLog"}


def section_problems(settings: ProxySettings, config: ShardingConfig) -> list[str]:
    """Why ``config``'s proxy section cannot serve (empty: it can)."""
    problems = []
    if not settings.users:
        problems.append("the configuration has no proxy.users: nobody could log in to the proxy "
                        "(add `proxy: {users: [{name: ..., passwordHash: '*...'}]}`, docs/proxy.md)")  # fmt: skip
    unknown = [t for t in settings.table_rate_limits if config.kind_of(t) is None]
    if unknown:
        problems.append(f"proxy.tableRateLimits names {', '.join(map(repr, unknown))}, which the "
                        "configuration does not define as a logic table")  # fmt: skip
    return problems


def restart_only_changes(old: ProxySettings, new: ProxySettings) -> list[str]:
    """The configuration names of the start-only fields ``new`` changes."""
    return [name for attr, name in RESTART_ONLY.items() if getattr(old, attr) != getattr(new, attr)]


def in_force(old: ProxySettings, new: ProxySettings) -> ProxySettings:
    """``new``, with the start-only fields as ``old`` has them (what a running proxy follows)."""
    return dataclasses.replace(new, **{attr: getattr(old, attr) for attr in RESTART_ONLY})


def statement_deadline(settings: ProxySettings) -> float | None:
    """The executor's per-statement deadline in seconds that ``proxy.statementTimeoutMs`` asks for (``None``: none)."""
    return settings.statement_timeout_ms / 1000 or None
