"""A frozen data source (its mariadbd stopped with SIGSTOP) fails in time and stalls nobody else.

A stopped server still accepts TCP connections (the kernel completes them) but
never answers, so only timeouts on the client side end a wait. ``ds_0`` lives on
a private ``mariadbd`` this module starts and freezes; ``ds_1`` on the shared
MariaDB at 127.0.0.1:3306. Every wait is run in a thread and given a generous
bound derived from the configured timeouts: a wait that ignores its timeout
would block until the server is resumed, far past any of them.
"""

from __future__ import annotations

import signal
import threading
import time
import uuid
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import pytest

from ddm_core import load_config
from ddm_core.errors import DataSourceUnavailableError, PoolTimeoutError, QueryTimeoutError
from ddm_core.execute import Executor
from ddm_core.execute.drivers import driver_for
from ddm_core.execute.mysql_cancel import KILL_TIMEOUT
from ddm_core.execute.pools import PING_AFTER
from processes import freeze
from test_execute_support import ORDER_DDL, PrivateMariaDB, assert_no_leaks, mysql_raw, sharding_config

STATEMENT_TIMEOUT = 1.0  # Executor(timeout=)
ACQUIRE_TIMEOUT = 1.0  # pool acquireTimeoutMs: also bounds connects and pings
SOCKET_TIMEOUT = 1.5  # URL socketTimeout: bounds COMMIT and other waits outside a deadline
BOUND = 3.0  # a wait that honours its timeout ends well before BOUND times it

FAILURES = (QueryTimeoutError, DataSourceUnavailableError, PoolTimeoutError)


class Frozen:
    """The private server and the two databases of the test configuration."""

    def __init__(self, server: PrivateMariaDB, frozen_db: str, healthy_db: str) -> None:
        self.server = server
        self.frozen_db = frozen_db
        self.healthy_db = healthy_db
        self.stopped = False

    @contextmanager
    def frozen(self) -> Iterator[None]:
        """SIGSTOP the private server (the process this module started), SIGCONT it afterwards."""
        assert self.server.proc is not None
        self.stopped = True
        freeze(self.server.proc.pid)
        try:
            yield
        finally:
            self.resume()

    def resume(self) -> None:
        if self.stopped and self.server.proc is not None:
            self.server.proc.send_signal(signal.SIGCONT)
            self.stopped = False


@pytest.fixture(scope="module")
def frozen_sources(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Frozen]:
    server = PrivateMariaDB(tmp_path_factory.mktemp("frozen-mariadbd"))
    server.start()
    tag = uuid.uuid4().hex[:8]
    frozen_db, healthy_db = f"ddm_frozen_{tag}", f"ddm_healthy_{tag}"
    for raw, db in ((server.raw(), frozen_db), (mysql_raw(), healthy_db)):
        with raw.cursor() as cur:
            cur.execute(f"CREATE DATABASE {db}")
        raw.close()
    state = Frozen(server, frozen_db, healthy_db)
    try:
        yield state
    finally:
        state.resume()
        server.kill()  # by the PID of the process started above
        raw = mysql_raw()
        with raw.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {healthy_db}")
        raw.close()


@pytest.fixture(scope="module")
def config(frozen_sources: Frozen) -> Any:
    port = frozen_sources.server.port
    urls = {
        "ds_0": {"url": f"mysql://127.0.0.1:{port}/{frozen_sources.frozen_db}?socketTimeout={int(SOCKET_TIMEOUT * 1000)}",
                 "username": "root", "password": ""},
        "ds_1": {"url": f"mysql://127.0.0.1:3306/{frozen_sources.healthy_db}", "username": "root", "password": ""},
    }
    pool = {"maxSize": 4, "minIdle": 1, "acquireTimeoutMs": int(ACQUIRE_TIMEOUT * 1000)}
    cfg = load_config(sharding_config(urls, tables=1, pool=pool))
    with Executor(cfg) as ex:
        ex.execute(ORDER_DDL).close()
    return cfg


@pytest.fixture()
def ex(config: Any) -> Iterator[Executor]:
    executor = Executor(config, timeout=STATEMENT_TIMEOUT)
    yield executor
    try:
        assert_no_leaks(executor, wait=5.0)
    finally:
        executor.close()


def user_on(ex: Executor, data_source: str) -> int:
    return next(u for u in range(1, 10_000)
                if ex.router.route("SELECT 1 FROM t_order WHERE user_id = %s", (u,)).units[0].data_source == data_source)


def bounded(call: Callable[[], Any], bound: float) -> tuple[float, BaseException | None]:
    """Run ``call`` in a thread; fail the test if it is still waiting after ``bound`` seconds."""
    outcome: list[BaseException | None] = [None]

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # reported to the test below
            outcome[0] = exc

    start = time.monotonic()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(bound)
    elapsed = time.monotonic() - start
    if thread.is_alive():
        pytest.fail(f"still waiting after {elapsed:.1f} s: the configured timeouts were not honoured")
    return elapsed, outcome[0]


def point_select(ex: Executor, user: int, **kw: Any) -> Callable[[], Any]:
    def call() -> Any:
        with ex.execute("SELECT user_id FROM t_order WHERE user_id = %s", (user,), **kw) as r:
            return r.fetchall()
    return call


def test_a_statement_in_flight_fails_at_its_deadline(ex: Executor, frozen_sources: Frozen) -> None:
    user = user_on(ex, "ds_0")
    point_select(ex, user)()  # a connection used just now: the next borrow does not ping it
    killer = driver_for("mysql")._killer  # type: ignore[attr-defined]
    with frozen_sources.frozen():
        elapsed, error = bounded(point_select(ex, user), BOUND * STATEMENT_TIMEOUT)
        assert isinstance(error, FAILURES), error
        # The KILL QUERY meant for the stopped server waits in its own thread, bounded too.
        end = time.monotonic() + BOUND * KILL_TIMEOUT
        while killer.in_flight() and time.monotonic() < end:
            time.sleep(0.05)
        assert killer.in_flight() == 0


@pytest.mark.parametrize("pipeline", [True, False], ids=["pipelined", "fanned-out"])
def test_a_multi_unit_read_gives_up_on_the_frozen_unit_in_time(
    config: Any, frozen_sources: Frozen, pipeline: bool
) -> None:
    ex = Executor(config, timeout=STATEMENT_TIMEOUT, pipeline=pipeline, cancel_grace=0.5)
    try:
        healthy = next(u for u in range(5_000, 10_000)  # a user of its own: other tests count theirs
                       if ex.router.route("SELECT 1 FROM t_order WHERE user_id = %s", (u,)).units[0].data_source == "ds_1")
        ex.execute("INSERT INTO t_order (order_id, user_id) VALUES (%s, %s)", (uuid.uuid4().int % 10**12, healthy)).close()
        scan = "SELECT user_id FROM t_order"  # one unit on each data source
        assert ex.router.route(scan).units and len(ex.router.route(scan).units) == 2
        expected = ex.execute(scan).fetchall()  # both connections used just now: no ping on the next borrow
        with frozen_sources.frozen():
            elapsed, error = bounded(lambda: ex.execute(scan).fetchall(), BOUND * (STATEMENT_TIMEOUT + 0.5))
            assert isinstance(error, QueryTimeoutError) and "ds_0" in str(error), error
            ex.execute("SELECT 1 FROM t_order WHERE user_id = %s", (healthy,)).close()  # ds_1 still answers
        # Reads accepting a partial result get the healthy unit's rows, flagged incomplete.
        ex.execute(scan).close()
        with frozen_sources.frozen():
            with ex.execute(scan, allow_partial=True) as partial:
                rows = partial.fetchall()
                assert partial.complete is False
        assert set(rows) == {r for r in expected if r[0] == healthy} and rows
        assert_no_leaks(ex, wait=5.0)
    finally:
        ex.execute("DELETE FROM t_order WHERE user_id = %s", (healthy,)).close()
        ex.close()


def test_an_idle_connection_is_pinged_within_the_acquire_timeout(ex: Executor, frozen_sources: Frozen) -> None:
    user = user_on(ex, "ds_0")
    point_select(ex, user)()
    time.sleep(PING_AFTER + 0.2)  # idle long enough to be pinged on the next borrow
    with frozen_sources.frozen():
        elapsed, error = bounded(point_select(ex, user), BOUND * (ACQUIRE_TIMEOUT + STATEMENT_TIMEOUT))
    assert isinstance(error, FAILURES), error


def test_a_new_connection_fails_within_the_acquire_timeout(ex: Executor, frozen_sources: Frozen) -> None:
    user = user_on(ex, "ds_0")  # the pool is empty: the first borrow connects (and warms up)
    with frozen_sources.frozen():
        elapsed, error = bounded(point_select(ex, user), BOUND * 2 * ACQUIRE_TIMEOUT)
    assert isinstance(error, (DataSourceUnavailableError, PoolTimeoutError)), error
    assert "ds_0" in str(error)


def test_commit_fails_within_the_socket_timeout(ex: Executor, frozen_sources: Frozen) -> None:
    user = user_on(ex, "ds_0")
    tx = ex.transaction()
    tx.execute("INSERT INTO t_order (order_id, user_id) VALUES (%s, %s)", (uuid.uuid4().int % 10**12, user)).close()
    with frozen_sources.frozen():
        elapsed, error = bounded(tx.commit, BOUND * SOCKET_TIMEOUT)
    assert isinstance(error, FAILURES), error
    tx.rollback()


def test_a_healthy_data_source_is_not_delayed(ex: Executor, frozen_sources: Frozen) -> None:
    frozen_user, healthy_user = user_on(ex, "ds_0"), user_on(ex, "ds_1")
    ex.execute("INSERT INTO t_order (order_id, user_id, slow) VALUES (%s, %s, 5)",
               (uuid.uuid4().int % 10**12, healthy_user)).close()
    point_select(ex, frozen_user)()
    stop = threading.Event()
    frozen_errors: list[BaseException] = []

    def keep_hitting_the_frozen_source() -> None:
        while not stop.is_set():
            try:
                point_select(ex, frozen_user)()
            except FAILURES as exc:
                frozen_errors.append(exc)

    with frozen_sources.frozen():
        hammer = threading.Thread(target=keep_hitting_the_frozen_source, daemon=True)
        hammer.start()
        try:
            time.sleep(STATEMENT_TIMEOUT * 1.2)  # the frozen source's first deadline has fired: its cancel is running
            # Point selects on the healthy source answer as usual.
            worst = 0.0
            for _ in range(20):
                start = time.monotonic()
                assert point_select(ex, healthy_user)() == [(healthy_user,)]
                worst = max(worst, time.monotonic() - start)
            assert worst < STATEMENT_TIMEOUT
            # And a slow statement there is cancelled at its own deadline, not after the frozen one's cancels.
            deadline = 0.5
            elapsed, error = bounded(
                lambda: ex.execute("SELECT SLEEP(slow) FROM t_order WHERE user_id = %s", (healthy_user,),
                                   timeout=deadline).close(),
                BOUND * deadline,
            )
            assert isinstance(error, QueryTimeoutError) and error.data_source == "ds_1", error
        finally:
            stop.set()
            hammer.join(BOUND * (ACQUIRE_TIMEOUT + STATEMENT_TIMEOUT))
    assert not hammer.is_alive()
    assert frozen_errors and all(e.data_source == "ds_0" for e in frozen_errors)  # type: ignore[attr-defined]
    ex.execute("DELETE FROM t_order WHERE user_id = %s", (healthy_user,)).close()


@pytest.mark.parametrize("timeout", [STATEMENT_TIMEOUT, None], ids=["deadline", "no-deadline"])
def test_a_statement_sent_without_waiting_fails_in_time(config: Any, frozen_sources: Frozen, timeout: float | None
                                                       ) -> None:  # fmt: skip
    """``send_single``: an event loop waits for the socket until ``answer_by``, then ``finish`` fails at once.

    The bound is the deadline plus the cancel grace, or (no deadline) the data source's socket timeout;
    the wait for readability below is what ``ddm proxy``'s loop does.
    """
    import select

    ex = Executor(config, timeout=timeout, cancel_grace=0.5)
    try:
        user = user_on(ex, "ds_0")
        point_select(ex, user)()  # warm and just used: lent idle, no ping
        with frozen_sources.frozen():
            sent = ex.send_single(ex.router.route("SELECT user_id FROM t_order WHERE user_id = %s", (user,)))
            assert sent is not None and sent.answer_by is not None
            bound = (STATEMENT_TIMEOUT + 0.5) if timeout else SOCKET_TIMEOUT
            assert abs(sent.answer_by - (sent.started + bound)) < 0.01
            began = time.monotonic()
            readable, _, _ = select.select([sent.fileno], [], [], max(0.0, sent.answer_by - time.monotonic()))
            # the frozen server said nothing; at the deadline the guard's cancel may end the socket itself
            assert timeout is not None or not readable
            with pytest.raises(FAILURES) as info:
                sent.finish()
            assert time.monotonic() - began < bound + 0.5  # the read after answer_by gives up at once
            assert "ds_0" in str(info.value)
        assert_no_leaks(ex, wait=5.0)
    finally:
        ex.close()


def test_private_server_is_answering_again(frozen_sources: Frozen) -> None:
    """Sanity: after the freezes the private server answers, so the tests above froze a live server."""
    raw = frozen_sources.server.raw()
    try:
        with raw.cursor() as cur:
            cur.execute("SELECT 1")
            assert cur.fetchone() == (1,)
    finally:
        raw.close()
