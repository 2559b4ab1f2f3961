"""A process holding a leased worker id, for tests/test_id_lease.py (not collected: no test_ prefix).

``python id_lease_holder.py URL NAMESPACE MODE TTL`` (an ``http://`` URL is etcd's: the lease is taken there):

* ``hold``: lease once the file ``$GO_FILE`` exists, print ``ID <worker id>``,
  keep the lease until stdin closes, release, exit 0;
* ``issue``: lease, print ``ID <worker id>``, then print ``N <id>`` for one
  snowflake id every few milliseconds until the lease is lost: print
  ``LOST <message>`` and exit 3.
"""

from __future__ import annotations

import os
import sys
import time

from typing import Any

from ddm_core import lease_worker_id
from ddm_core.errors import WorkerLeaseLostError
from ddm_core.idlease.etcd import lease_worker_id_etcd


def main() -> int:
    url, namespace, mode, ttl = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    lease_for: Any = lease_worker_id_etcd if url.startswith("http://") else lease_worker_id
    if mode == "hold":
        go = os.environ["GO_FILE"]
        while not os.path.exists(go):  # every holder starts its lease at (nearly) the same moment
            time.sleep(0.005)
        with lease_for(url, namespace=namespace, ttl=ttl) as lease:
            print(f"ID {lease.worker_id}", flush=True)
            sys.stdin.read()
        return 0
    lease = lease_for(url, namespace=namespace, ttl=ttl)
    print(f"ID {lease.worker_id}", flush=True)
    gen = lease.snowflake()
    while True:
        try:
            value = gen.next_id()
        except WorkerLeaseLostError as exc:
            print(f"LOST {exc}", flush=True)
            return 3
        print(f"N {value}", flush=True)
        time.sleep(0.003)


if __name__ == "__main__":
    sys.exit(main())
