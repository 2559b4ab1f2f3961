"""Freezing a process the test started (SIGSTOP): a hung server, not a dead one.

SIGSTOP is delivered asynchronously, one thread after another: for a moment after the signal a running
thread can still answer a request, which on a loaded machine (tests on several workers) a test met.
:func:`freeze` returns once every thread of the process is stopped.
"""

from __future__ import annotations

import os
import signal
import time


def stopped(pid: int) -> bool:
    """Every thread of process ``pid`` is stopped (state ``T``; ``t`` under a tracer)."""
    states = set()
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/stat", encoding="ascii") as f:
                states.add(f.read().rsplit(")", 1)[1].split()[0])
        except FileNotFoundError:  # a thread that just ended
            continue
    return bool(states) and states <= {"T", "t"}


def freeze(pid: int, within: float = 10.0) -> None:
    """SIGSTOP ``pid`` and wait until every one of its threads has stopped."""
    os.kill(pid, signal.SIGSTOP)
    end = time.monotonic() + within
    while not stopped(pid):
        if time.monotonic() > end:
            raise AssertionError(f"process {pid} did not stop within {within:g} s of SIGSTOP")
        time.sleep(0.005)
