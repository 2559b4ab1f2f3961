"""A stand-alone application instance for tests/test_config_redis.py: follows a Redis configuration.

``python tests/redis_config_watcher.py PREFIX SNAPSHOT [GROUP]`` prints ``ready <maxOffset>`` once
following, ``serving <maxOffset> <origin>`` for every version installed and ``refused <message>``
for every version the holder refuses; it exits when stdin closes.
"""

from __future__ import annotations

import sys
import threading

import redis

from ddm_core.metadata import ConfigHolder
from ddm_core.metadata.sources.redis import RedisSource


def main() -> None:
    prefix, snapshot = sys.argv[1], sys.argv[2]
    group = sys.argv[3] if len(sys.argv) > 3 else None
    source = RedisSource(redis.Redis(host="127.0.0.1", port=6379), prefix=prefix, group=group)
    holder = ConfigHolder(source, snapshot=snapshot, check_env=False)
    lock = threading.Lock()

    def say(line: str) -> None:
        with lock:
            print(line, flush=True)

    holder.subscribe(lambda new, old: say(f"serving {new.config.runtime.max_offset} {new.origin}"))
    stop = source.follow(holder, poll=60.0)  # long poll: a change arrives by the pub/sub notice
    say(f"ready {holder.config.runtime.max_offset}")
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
