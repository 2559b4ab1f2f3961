"""A stand-alone application instance for tests/test_config_etcd.py: follows an etcd configuration.

``python tests/etcd_config_watcher.py URL PREFIX SNAPSHOT [GROUP]`` prints ``ready <maxOffset> <from_snapshot>``
once following, ``serving <maxOffset> <digest>`` for every version installed (after the holder has
written its snapshot) and ``refused <message>`` for every version the holder refuses; it exits when
stdin closes.
"""

from __future__ import annotations

import sys
import threading

from ddm_core.metadata import ConfigHolder
from ddm_core.metadata.sources.etcd import EtcdSource
from ddm_core.metadata.sources.etcd_client import EtcdClient


def main() -> None:
    url, prefix, snapshot = sys.argv[1], sys.argv[2], sys.argv[3]
    group = sys.argv[4] if len(sys.argv) > 4 else None
    source = EtcdSource(EtcdClient(url, timeout=1.0), prefix=prefix, group=group)
    holder = ConfigHolder(source, snapshot=snapshot, check_env=False)
    lock = threading.Lock()

    def say(line: str) -> None:
        with lock:
            print(line, flush=True)

    holder.subscribe(lambda new, old: say(f"serving {new.config.runtime.max_offset} {new.digest}"))
    stop = source.follow(holder, poll=60.0)  # long poll: a flip arrives by the watch
    current = holder.current
    say(f"ready {current.config.runtime.max_offset} {current.digest} {int(current.from_snapshot)}")
    done = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
    last = None
    while not done.wait(0.05):
        error = holder.last_error
        if error is not None and error is not last:
            say("refused " + " | ".join(error.message.splitlines()))
        last = error
    stop()


if __name__ == "__main__":
    main()
