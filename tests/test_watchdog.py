"""Deadlines: reusable guards, fired on a thread of their own, no wake-up per statement."""

from __future__ import annotations

import threading
import time

from ddm_core.execute.watchdog import Watchdog


def test_a_deadline_that_passes_cancels_once() -> None:
    wd = Watchdog()
    cancelled = threading.Event()
    calls: list[int] = []

    def cancel() -> None:
        calls.append(1)
        cancelled.set()

    guard = wd.guard(cancel)
    try:
        guard.arm(time.monotonic() + 0.05)
        assert cancelled.wait(5)
        assert guard.disarm() is True and calls == [1]
        assert wd.armed() == 0
    finally:
        wd.stop()


def test_a_disarmed_deadline_never_fires() -> None:
    wd = Watchdog()
    calls: list[int] = []
    guard = wd.guard(lambda: calls.append(1))
    try:
        guard.arm(time.monotonic() + 0.05)
        assert guard.disarm() is False
        time.sleep(0.15)  # well past the deadline
        assert calls == [] and wd.armed() == 0
        guard.arm(time.monotonic() + 60)  # reused for the connection's next statement
        assert guard.disarm() is False and calls == []
    finally:
        wd.stop()


def test_a_hanging_cancel_delays_no_other_deadline() -> None:
    wd = Watchdog()
    hang, stuck, other = threading.Event(), threading.Event(), threading.Event()

    def frozen_cancel() -> None:  # a data source that does not answer
        stuck.set()
        hang.wait(10)

    frozen = wd.guard(frozen_cancel)
    healthy = wd.guard(other.set)
    try:
        frozen.arm(time.monotonic() + 0.02)
        assert stuck.wait(5)
        healthy.arm(time.monotonic() + 0.02)
        assert other.wait(5)  # fired while the first cancel still hangs
        assert healthy.disarm() is True
    finally:
        hang.set()
        assert frozen.disarm() is True
        wd.stop()


def test_disarm_waits_for_a_cancel_in_flight() -> None:
    wd = Watchdog()
    started, go, disarmed = threading.Event(), threading.Event(), threading.Event()
    fired: list[bool] = []

    def slow_cancel() -> None:
        started.set()
        go.wait(10)

    guard = wd.guard(slow_cancel)

    def statement_thread() -> None:
        started.wait(10)
        fired.append(guard.disarm())
        disarmed.set()

    t = threading.Thread(target=statement_thread)
    try:
        guard.arm(time.monotonic() + 0.02)
        t.start()
        assert started.wait(5)
        # The connection must not go back to its pool while the cancel aimed at it runs.
        assert not disarmed.wait(0.2)
        go.set()
        assert disarmed.wait(5) and fired == [True]
    finally:
        go.set()
        t.join(timeout=5)
        wd.stop()


def test_a_stream_of_statements_does_not_wake_the_thread_per_statement() -> None:
    wd = Watchdog()
    guard = wd.guard(lambda: None)
    try:
        guard.arm(time.monotonic() + 3)
        guard.disarm()
        time.sleep(0.05)  # the thread has settled into its linger
        before = wd.wakes
        for _ in range(2000):
            guard.arm(time.monotonic() + 3)
            guard.disarm()
        assert wd.wakes - before < 20
    finally:
        wd.stop()


def test_a_short_deadline_shortens_the_linger_once() -> None:
    wd = Watchdog()
    calls: list[int] = []
    guard = wd.guard(lambda: calls.append(1))
    try:
        for _ in range(3):
            guard.arm(time.monotonic() + 0.2)
            assert guard.disarm() is False
        time.sleep(0.05)
        before = wd.wakes
        for _ in range(500):
            guard.arm(time.monotonic() + 0.2)
            guard.disarm()
        assert wd.wakes - before < 50 and calls == []
    finally:
        wd.stop()
