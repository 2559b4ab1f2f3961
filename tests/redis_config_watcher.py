"""A stand-alone application instance for tests/test_config_redis.py: follows a Redis configuration.

``python tests/redis_config_watcher.py PREFIX SNAPSHOT [GROUP]`` prints ``ready <maxOffset>`` once
following, ``serving <maxOffset> <origin>`` for every version installed and ``refused <message>``
for every version the holder refuses; it exits when stdin closes.
"""

from __future__ import annotations

import sys

import redis
from config_watcher import follow_and_report

from ddm_core.metadata import ConfigHolder
from ddm_core.metadata.sources.redis import RedisSource


def main() -> None:
    prefix, snapshot = sys.argv[1], sys.argv[2]
    group = sys.argv[3] if len(sys.argv) > 3 else None
    source = RedisSource(redis.Redis(host="127.0.0.1", port=6379), prefix=prefix, group=group)
    holder = ConfigHolder(source, snapshot=snapshot, check_env=False)
    follow_and_report(holder, source, lambda new: f"{new.config.runtime.max_offset} {new.origin}",
                      lambda h: f"{h.config.runtime.max_offset}")  # fmt: skip


if __name__ == "__main__":
    main()
