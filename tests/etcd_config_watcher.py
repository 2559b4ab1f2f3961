"""A stand-alone application instance for tests/test_config_etcd.py: follows an etcd configuration.

``python tests/etcd_config_watcher.py URL PREFIX SNAPSHOT [GROUP]`` prints ``ready <maxOffset> <from_snapshot>``
once following, ``serving <maxOffset> <digest>`` for every version installed (after the holder has
written its snapshot) and ``refused <message>`` for every version the holder refuses; it exits when
stdin closes.
"""

from __future__ import annotations

import sys

from config_watcher import follow_and_report

from ddm_core.metadata import ConfigHolder
from ddm_core.metadata.sources.etcd import EtcdSource
from ddm_core.metadata.sources.etcd_client import EtcdClient


def main() -> None:
    url, prefix, snapshot = sys.argv[1], sys.argv[2], sys.argv[3]
    group = sys.argv[4] if len(sys.argv) > 4 else None
    source = EtcdSource(EtcdClient(url, timeout=1.0), prefix=prefix, group=group)
    holder = ConfigHolder(source, snapshot=snapshot, check_env=False)

    def ready(h: ConfigHolder) -> str:
        current = h.current
        return f"{current.config.runtime.max_offset} {current.digest} {int(current.from_snapshot)}"

    follow_and_report(holder, source, lambda new: f"{new.config.runtime.max_offset} {new.digest}", ready)


if __name__ == "__main__":
    main()
