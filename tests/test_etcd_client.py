"""ddm-core's etcd client against a private etcd (tests/etcd_support.py): keys, transactions, leases, and a
watch that neither misses nor repeats an event while etcd is killed, restarted, frozen and compacted.

What the client reads is checked against what etcd answers over a separate path (the fixture's own
standard-library calls), and what the watch delivers against the revisions the writers were given.
"""

from __future__ import annotations

import threading
import time
from typing import Iterator

import pytest

from ddm_core.errors import EtcdError, EtcdUnavailableError
from ddm_core.metadata.sources.etcd_client import Compare, EtcdClient, WatchBatch, put_op
from etcd_support import PrivateEtcd, private_etcd  # noqa: F401 - the fixture
from services import require_module

require_module("requests", "the etcd client (the 'etcd' extra)")


@pytest.fixture()
def client(private_etcd: PrivateEtcd) -> Iterator[EtcdClient]:  # noqa: F811
    c = EtcdClient(private_etcd.url, timeout=2.0)
    yield c
    c.close()


def test_keys_and_revisions_match_etcd(client: EtcdClient, private_etcd: PrivateEtcd) -> None:  # noqa: F811
    assert client.get("/a/missing") == (None, private_etcd.revision())
    r1 = client.put("/a/one", "1")
    r2 = client.put("/a/two", b"\xff\x00binary")
    private_etcd.put("/b/other", "x")
    kv, revision = client.get("/a/one")
    assert kv is not None and kv.text == "1" and kv.mod_revision == r1 and revision == r2 + 1
    kvs, _ = client.get_prefix("/a/")
    assert [(k.key, k.value) for k in kvs] == [("/a/one", b"1"), ("/a/two", b"\xff\x00binary")]
    assert client.delete("/a/one") > r2 and private_etcd.get("/a/one") is None


def test_compare_and_put_loses_no_update(client: EtcdClient, private_etcd: PrivateEtcd) -> None:  # noqa: F811
    """Four threads increment one counter by compare-on-mod_revision: the count equals the successes."""
    client.put("/counter", "0")
    successes = [0] * 4

    def bump(slot: int) -> None:
        mine = EtcdClient(private_etcd.url)
        while successes[slot] < 25:
            kv, _ = mine.get("/counter")
            assert kv is not None
            result = mine.put_if("/counter", str(int(kv.text) + 1), [Compare.mod_revision("/counter", kv.mod_revision)])
            if result.succeeded:
                successes[slot] += 1
            else:
                assert result.kvs(0)[0].mod_revision > kv.mod_revision  # the refusal says what won
        mine.close()

    threads = [threading.Thread(target=bump, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert private_etcd.get("/counter") == "100"
    assert not client.txn([Compare.absent("/counter")], [put_op("/counter", "lost")]).succeeded
    assert client.txn([Compare.value("/counter", "100")], [put_op("/counter", "101")]).succeeded


def test_leases_expire_renew_and_revoke(client: EtcdClient, private_etcd: PrivateEtcd) -> None:  # noqa: F811
    lease, ttl = client.lease_grant(2)
    assert ttl == 2
    client.put("/lease/kept", "x", lease=lease)
    doomed, _ = client.lease_grant(1)
    client.put("/lease/doomed", "y", lease=doomed)
    for _ in range(5):  # 2.5 s: past the short lease, within the renewed one
        assert client.lease_keep_alive(lease) == 2
        time.sleep(0.5)
    assert private_etcd.get("/lease/kept") == "x" and private_etcd.get("/lease/doomed") is None
    assert client.lease_keep_alive(doomed) == 0 and client.lease_time_to_live(doomed) == -1
    client.lease_revoke(lease)
    assert private_etcd.get("/lease/kept") is None
    client.lease_revoke(lease)  # twice is not an error


def test_unreachable_etcd_is_reported_as_such(private_etcd: PrivateEtcd) -> None:  # noqa: F811
    c = EtcdClient(private_etcd.url, timeout=0.5)
    private_etcd.freeze()
    try:
        with pytest.raises(EtcdUnavailableError, match="cannot be reached"):
            c.get("/x")
    finally:
        private_etcd.thaw()
    private_etcd.kill()
    with pytest.raises(EtcdUnavailableError, match=private_etcd.url):
        c.put("/x", "1")
    private_etcd.start()
    with pytest.raises(EtcdError, match="refused"):
        c.compact(10_000_000)  # a future revision


def test_watch_survives_kill_freeze_and_compaction(client: EtcdClient, private_etcd: PrivateEtcd) -> None:  # noqa: F811
    """Writers update two keys while etcd is killed, frozen and compacted under the watch.

    The reference is the revision etcd acknowledged for every write: each must reach the watcher
    exactly once, as an event or folded into a post-compaction snapshot, in revision order.
    """
    start = private_etcd.revision() + 1
    batches: list[WatchBatch] = []
    arrived = threading.Condition()

    def take(batch: WatchBatch) -> None:
        with arrived:
            batches.append(batch)
            arrived.notify_all()

    watch = client.watch("/w/", take, start_revision=start, prefix=True, idle_timeout=2.0)
    acked: dict[int, tuple[str, str]] = {}  # revision -> (key, value), as etcd acknowledged them
    writer = EtcdClient(private_etcd.url, timeout=1.0)

    def write_some(n: int, tag: str) -> None:
        for i in range(n):
            key = f"/w/{i % 2}"  # two hot keys, overwritten again and again
            acked[writer.put(key, f"{tag}-{i}")] = (key, f"{tag}-{i}")

    def wait_for(revision: int) -> None:
        with arrived:
            assert arrived.wait_for(lambda: bool(batches) and batches[-1].revision >= revision, timeout=15), (
                f"the watch never reached revision {revision} (at {batches[-1].revision if batches else None}, "
                f"last error {watch.last_error!r})"
            )

    try:
        write_some(20, "a")
        wait_for(max(acked))
        private_etcd.restart()  # SIGKILL mid-stream
        write_some(20, "b")
        wait_for(max(acked))
        private_etcd.freeze()
        time.sleep(2.5)  # past the watch's idle timeout: it gives the stream up and retries
        private_etcd.thaw()
        write_some(20, "c")
        wait_for(max(acked))
        watch.stop()
        last_watched = max(acked)
        write_some(20, "d")  # written while nobody watches, then compacted away
        private_etcd.compact()
        watch = client.watch("/w/", take, start_revision=last_watched + 1, prefix=True, idle_timeout=2.0)
        write_some(20, "e")
        wait_for(max(acked))
    finally:
        watch.stop()
        writer.close()

    def reference_at(revision: int) -> dict[str, str]:
        return {key: value for r, (key, value) in sorted(acked.items()) if r <= revision}

    seen: list[int] = []
    state: dict[str, str] = {}
    covered_up_to = 0
    for batch in batches:
        if batch.snapshot is not None:
            state = {kv.key: kv.text for kv in batch.snapshot}
            covered_up_to = batch.revision
            assert state == reference_at(covered_up_to)
            continue
        for event in batch.events:
            assert not seen or event.revision > seen[-1], f"revision {event.revision} delivered after {seen[-1]}"
            seen.append(event.revision)
            state[event.kv.key] = event.kv.text
            assert acked[event.revision] == (event.kv.key, event.kv.text)
    assert watch.resyncs == 1 and covered_up_to > 0
    assert len(seen) == len(set(seen)), "an event was delivered twice"
    missed = sorted(r for r in acked if r not in seen and r > covered_up_to)
    assert missed == [] and [r for r in acked if r < start] == []
    # Only what was written between the two watches (and before the re-read) came folded in the snapshot.
    assert sorted(r for r in acked if r not in seen) == sorted(r for r in acked if last_watched < r <= covered_up_to)
    assert state == {"/w/0": private_etcd.get("/w/0"), "/w/1": private_etcd.get("/w/1")}
