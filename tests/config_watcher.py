"""The loop both configuration-center watcher scripts run (tests/redis_config_watcher.py, tests/etcd_config_watcher.py).

A watcher follows its center and prints one line per event on stdout: ``ready ...`` once following,
``serving ...`` for every version installed and ``refused <message>`` for every version the holder
refuses; it stops following when stdin closes.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, Callable

from ddm_core.metadata import ConfigHolder


def follow_and_report(holder: ConfigHolder, source: Any, serving: Callable[[Any], str],
                      ready: Callable[[ConfigHolder], str]) -> None:  # fmt: skip
    """Follow ``source`` into ``holder`` and report as the module docstring says, until stdin closes."""
    lock = threading.Lock()

    def say(line: str) -> None:
        with lock:
            print(line, flush=True)

    holder.subscribe(lambda new, old: say("serving " + serving(new)))
    stop = source.follow(holder, poll=60.0)  # long poll: a change arrives by the center's notice or watch
    say("ready " + ready(holder))
    done = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
    last = None
    while not done.wait(0.05):
        error = holder.last_error
        if error is not None and error is not last:
            say("refused " + " | ".join(error.message.splitlines()))
        last = error
    stop()
