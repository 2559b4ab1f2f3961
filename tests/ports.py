"""Ports for the servers tests start themselves (private ``mariadbd``, ``etcd``) and for addresses nothing listens on.

Each test process takes ports from its own range, below the kernel's ephemeral ports (from 32768), and never
the same port twice. Under pytest-xdist the workers' ranges are disjoint. A port from the kernel (``bind`` to
port 0) could be given again to another process once its server was killed. That process's server then met
the old server's clients reconnecting: a binlog reader's, or a writer's.
"""

from __future__ import annotations

import os
import random
import socket

_FIRST, _LAST = 20000, 32000  # below the kernel's ephemeral ports
_given: set[int] = set()
_rng = random.Random()


def _own_range() -> tuple[int, int]:
    """This process's ports: an equal share of the range per pytest-xdist worker (all of it outside xdist)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")  # gw0, gw1, ...
    count = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")
    index, workers = (int(worker), int(count)) if worker.isdigit() and count.isdigit() else (0, 1)
    span = (_LAST - _FIRST) // max(workers, 1)
    low = _FIRST + index * span
    return low, low + span


def free_port() -> int:
    """A port free now on 127.0.0.1, from this process's range, not given before in this process."""
    low, high = _own_range()
    for _ in range(500):
        port = _rng.randrange(low, high)
        if port in _given:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _given.add(port)
        return port
    raise RuntimeError(f"no free port in {low}-{high - 1} after 500 tries")
