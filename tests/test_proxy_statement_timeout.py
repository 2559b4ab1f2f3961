"""``proxy.statementTimeoutMs``: the deadline of a client statement, its ``0`` (none), and a reload of it.

A statement sleeping past the deadline gets 3024 on both paths (a worker's first run of a text, then
the event loop's); the same statement completes once a reload lifts the deadline, and is cut off
again when a reload sets one.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterator

import pymysql
import pytest

from ddm_core import load_config
from test_proxy_support import ROW_USER_ID, SMALL, InProcessProxy, connect, one_row_proxy, proxy_config

DEADLINE_MS = 800
SLEEPY = f"SELECT SLEEP(1.5) AS slept, amount FROM {SMALL} WHERE user_id = %s"  # past DEADLINE_MS


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[InProcessProxy, list[str]]]:
    with one_row_proxy(statementTimeoutMs=DEADLINE_MS) as served:
        yield served


def _take(served: tuple[InProcessProxy, list[str]], statement_timeout_ms: int) -> None:
    """Reload the proxy with the same configuration but ``statementTimeoutMs``, on its event loop."""
    proxy, databases = served
    config = load_config(proxy_config(databases, statementTimeoutMs=statement_timeout_ms))

    async def take() -> bool:
        return proxy.server.take(config)

    assert proxy.call(take()), "the reload was refused"
    assert proxy.server.settings.statement_timeout_ms == statement_timeout_ms


def _run(proxy: InProcessProxy, times: int = 2) -> list[Any]:
    """The outcomes of ``times`` runs of the sleeping read: its rows, or the error code."""
    outcomes: list[Any] = []
    with connect(proxy.port, autocommit=True) as conn, conn.cursor() as cur:
        for _ in range(times):  # the first run of a text on a worker, the next on the event loop
            try:
                cur.execute(SLEEPY, (ROW_USER_ID,))
                outcomes.append(cur.fetchall())
            except pymysql.MySQLError as exc:
                outcomes.append(exc.args[0])
    return outcomes


def test_the_configured_deadline_cuts_a_statement_off_with_3024(served: tuple[InProcessProxy, list[str]]) -> None:
    proxy, _ = served
    assert proxy.server.executor.timeout == DEADLINE_MS / 1000
    assert _run(proxy) == [3024, 3024]


def test_a_reload_lifts_the_deadline_and_sets_it_again(served: tuple[InProcessProxy, list[str]]) -> None:
    proxy, _ = served
    try:
        _take(served, 0)
        assert proxy.server.executor.timeout is None
        assert _run(proxy) == [((0, 10),), ((0, 10),)]
        _take(served, DEADLINE_MS)
        assert _run(proxy) == [3024, 3024]
    finally:
        _take(served, DEADLINE_MS)


def test_the_field_is_read_written_and_bounded() -> None:
    from ddm_core.errors import DdmError
    from ddm_core.metadata.dump import native_copy

    config = load_config(proxy_config(["a", "b"], statementTimeoutMs=0))
    assert config.proxy.statement_timeout_ms == 0
    assert dataclasses.replace(config.proxy, statement_timeout_ms=3_000) == load_config(
        proxy_config(["a", "b"], statementTimeoutMs=3_000)).proxy
    assert load_config(native_copy(config)).proxy.statement_timeout_ms == 0
    with pytest.raises(DdmError, match="statementTimeoutMs"):
        load_config(proxy_config(["a", "b"], statementTimeoutMs=-1))
