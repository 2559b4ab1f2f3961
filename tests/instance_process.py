"""A stand-alone application instance for tests/test_instances.py: an executor following a configuration center.

``python tests/instance_process.py '<json>'`` with ``kind`` (``table``: the ``ddm_config`` table,
``redis``: Redis keys under ``prefix``, ``etcd``: etcd keys under ``prefix`` at ``etcd``), ``databases``,
``ttl`` and ``follow`` (seconds between polls of the center; 0: never take a new version). It prints ``registered <instance id>`` once its record reached the registry, then
serves until SIGTERM (a clean stop: the executor closes and removes its record) or SIGKILL.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from typing import Any

from ddm_core.execute import Executor
from ddm_core.metadata import ConfigHolder, load_config
from ddm_core.migrate import config_table_source
from test_execute_support import sharding_config


def config_text(databases: list[str]) -> str:
    import yaml

    urls = {f"ds_{i}": {"url": f"mysql://127.0.0.1:3306/{db}", "username": "root", "password": ""}
            for i, db in enumerate(databases)}  # fmt: skip
    text: str = yaml.safe_dump(sharding_config(urls, tables=2, pool={"maxSize": 2, "minIdle": 0}), sort_keys=False)
    return text


def main() -> None:
    args: dict[str, Any] = json.loads(sys.argv[1])
    if args["kind"] == "redis":
        import redis

        from ddm_core.metadata.sources.redis import RedisSource

        source: Any = RedisSource(redis.Redis(host="127.0.0.1", port=6379, socket_timeout=2), prefix=args["prefix"])
    elif args["kind"] == "etcd":
        from ddm_core.metadata.sources.etcd import EtcdSource
        from ddm_core.metadata.sources.etcd_client import EtcdClient

        source = EtcdSource(EtcdClient(args["etcd"], timeout=2), prefix=args["prefix"])
    else:
        source = config_table_source(load_config(config_text(args["databases"])), "ds_0")
    holder = ConfigHolder(source, check_env=False)
    executor = Executor(holder, instance_ttl=args["ttl"], load_schema=False, replica_monitor=False)
    registrar = executor.instance
    assert registrar is not None, "a holder over a shared source registers"
    if args["follow"]:
        holder.watch(args["follow"])
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    while not registrar.status.healthy:
        time.sleep(0.02)
    print(f"registered {registrar.record.instance_id}", flush=True)
    while not stop.wait(0.1):
        pass
    holder.stop()
    executor.close()


if __name__ == "__main__":
    main()
