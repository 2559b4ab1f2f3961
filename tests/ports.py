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

_SPAN = 2000  # ports per test process: 20000-31999 for six workers
_FIRST = 20000
_given: set[int] = set()
_rng = random.Random()


def _worker_index() -> int:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")  # gw0, gw1, ... (unset outside xdist)
    digits = worker.removeprefix("gw")
    return int(digits) % 6 if digits.isdigit() else 0


def free_port() -> int:
    """A port free now on 127.0.0.1, from this process's range, not given before in this process."""
    low = _FIRST + _worker_index() * _SPAN
    for _ in range(500):
        port = _rng.randrange(low, low + _SPAN)
        if port in _given:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _given.add(port)
        return port
    raise RuntimeError(f"no free port in {low}-{low + _SPAN - 1} after 500 tries")
