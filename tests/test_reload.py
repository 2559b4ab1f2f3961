"""Hot reload: atomic swaps, refused bad versions, numbering, local snapshot."""

from __future__ import annotations

import json
import os
import stat
import threading
import time
from pathlib import Path
from typing import Any, Mapping

import pytest

from ddm_core.metadata import (
    ConfigHolder,
    ConfigSource,
    ConfigValidationError,
    ConfigVersion,
    FileSource,
    SourceUnavailableError,
    StaticSource,
)
from ddm_core.metadata.sources import Fetched


def config_text(gen: int, *, bad: bool = False, layout: int | None = None) -> str:
    """A valid config whose every part carries ``gen`` or its layout (so a mix of two versions is detectable).

    ``layout`` (default: ``gen``) decides the placement — data sources, data nodes,
    sharding count; versions of one layout differ only in what a hot reload may
    change, versions of two layouts need a migration step. ``bad=True`` adds a
    data node in an unknown data source: it must never be served.
    """
    lay = gen if layout is None else layout
    n_ds = 1 + lay % 3
    ds = "\n".join(f"  ds_{i}: sqlite:///gen{lay}_{i}.db" for i in range(n_ds))
    extra = ", ds_9.t_order_x" if bad else ""
    return f"""
name: {"bad" if bad else "gen"}-{gen}-{lay}
dataSources:
{ds}
tables:
  - logicTable: t_order
    dataNodes: "ds_${{0..{n_ds - 1}}}.t_order_{lay}{extra}"
    databaseStrategy: {{kind: standard, column: user_id, algorithm: MOD, props: {{sharding-count: {n_ds}}}}}
runtime: {{maxOffset: {1000 + gen}}}
"""


def check_consistent(version: ConfigVersion) -> int:
    """The generation of ``version``'s config, after checking all its parts agree."""
    c = version.config
    assert c.name is not None and c.name.startswith("gen-"), c.name
    gen, lay = (int(part) for part in c.name.split("-")[1:])
    assert c.runtime.max_offset == 1000 + gen
    t = c.table("t_order")
    assert t is not None
    assert len(c.data_sources) == 1 + lay % 3 == len(t.data_nodes)
    assert all(n.table == f"t_order_{lay}" for n in t.data_nodes)
    assert t.database_strategy.algorithm is not None
    assert t.database_strategy.algorithm.props["sharding-count"] == len(c.data_sources)
    return gen


@pytest.fixture()
def cfg(tmp_path: Path) -> Path:
    path = tmp_path / "ddm.yaml"
    path.write_text(config_text(1))
    return path


def write(path: Path, text: str) -> None:
    """Replace the file's content so that its mtime/size visibly change."""
    st = path.stat() if path.exists() else None
    path.write_text(text)
    if st is not None:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))


def test_start_numbers_and_snapshots(cfg: Path, tmp_path: Path) -> None:
    snap = tmp_path / "snap" / "ddm.snapshot.json"
    holder = ConfigHolder(cfg, snapshot=snap)
    assert holder.version == 1 and check_consistent(holder.current) == 1
    assert not holder.current.from_snapshot and holder.current.origin == str(cfg)
    data = json.loads(snap.read_text())
    assert data["version"] == 1 and data["content"] == cfg.read_text() and data["format"] == "native"
    assert stat.S_IMODE(snap.stat().st_mode) == 0o600  # may hold credentials as written in the source


def test_reload_updates_refuses_and_recovers(cfg: Path, tmp_path: Path) -> None:
    snap = tmp_path / "snap.json"
    holder = ConfigHolder(cfg, snapshot=snap)
    seen: list[tuple[int, int]] = []
    holder.subscribe(lambda new, old: seen.append((old.number, new.number)))

    assert holder.reload().status == "unchanged"

    write(cfg, config_text(2, layout=1))
    result = holder.reload()
    assert result.updated and result.version.number == 2 and check_consistent(holder.current) == 2
    assert json.loads(snap.read_text())["version"] == 2

    write(cfg, config_text(3, bad=True, layout=1))
    result = holder.reload()
    assert result.status == "rejected" and holder.version == 2 and check_consistent(holder.current) == 2
    assert isinstance(result.error, ConfigValidationError)
    assert "unknown data source 'ds_9'" in str(result.error) and str(cfg) in str(result.error)
    assert holder.last_error is result.error
    assert json.loads(snap.read_text())["version"] == 2  # the snapshot keeps the last good version
    assert holder.reload().status == "rejected"  # still bad; not re-parsed, still reported

    write(cfg, config_text(3, layout=1))
    result = holder.reload()
    assert result.updated and holder.version == 3 and holder.last_error is None
    assert seen == [(1, 2), (2, 3)]


def test_unreachable_source_keeps_serving(cfg: Path) -> None:
    holder = ConfigHolder(cfg)
    cfg.unlink()
    result = holder.reload()
    assert result.status == "unreachable" and isinstance(result.error, SourceUnavailableError)
    assert holder.version == 1 and check_consistent(holder.current) == 1


def test_start_from_snapshot_when_source_is_unreachable(cfg: Path, tmp_path: Path) -> None:
    snap = tmp_path / "snap.json"
    first = ConfigHolder(cfg, snapshot=snap)
    write(cfg, config_text(2, layout=1))
    first.reload()
    cfg.unlink()

    holder = ConfigHolder(cfg, snapshot=snap)
    assert holder.current.from_snapshot and holder.version == 2
    assert check_consistent(holder.current) == 2
    assert isinstance(holder.last_error, SourceUnavailableError)

    write(cfg, config_text(2, layout=1))  # the source comes back with the same content
    assert holder.reload().status == "unchanged"
    assert not holder.current.from_snapshot and holder.version == 2
    write(cfg, config_text(4, layout=1))
    assert holder.reload().version.number == 3


def test_numbering_continues_across_restarts(cfg: Path, tmp_path: Path) -> None:
    snap = tmp_path / "snap.json"
    ConfigHolder(cfg, snapshot=snap)
    assert ConfigHolder(cfg, snapshot=snap).version == 1  # same content, same number
    write(cfg, config_text(5))
    assert ConfigHolder(cfg, snapshot=snap).version == 2


def test_unreachable_without_snapshot_fails(tmp_path: Path) -> None:
    with pytest.raises(SourceUnavailableError, match="no usable snapshot"):
        ConfigHolder(tmp_path / "missing.yaml", snapshot=tmp_path / "none.json")


def test_invalid_source_at_start_fails_fast(cfg: Path, tmp_path: Path) -> None:
    snap = tmp_path / "snap.json"
    ConfigHolder(cfg, snapshot=snap)
    write(cfg, config_text(2, bad=True))
    with pytest.raises(ConfigValidationError, match="ds_9"):
        ConfigHolder(cfg, snapshot=snap)  # reachable but wrong: refuse to start, do not hide it


def test_corrupt_snapshot_is_ignored(cfg: Path, tmp_path: Path) -> None:
    snap = tmp_path / "snap.json"
    snap.write_text("{not json")
    holder = ConfigHolder(cfg, snapshot=snap)
    assert holder.version == 1 and json.loads(snap.read_text())["version"] == 1


def test_file_source_change_detection(cfg: Path) -> None:
    source = FileSource(cfg)
    fetched = source.fetch()
    assert not source.changed(fetched.revision)
    write(cfg, config_text(2))
    assert source.changed(fetched.revision)
    cfg.unlink()
    assert source.changed(fetched.revision)
    with pytest.raises(SourceUnavailableError, match="ddm.yaml"):
        source.fetch()


def test_any_source_object_works() -> None:
    class ConfigCenter:
        """What a config-center client (Apollo, Nacos) looks like to the holder."""

        def __init__(self) -> None:
            self.version = 7
            self.value: Mapping[str, Any] = {
                "dataSources": {"ds_0": "sqlite:///a.db"},
                "runtime": {"maxOffset": 5000},
            }
            self.up = True

        def fetch(self) -> Fetched:
            if not self.up:
                raise SourceUnavailableError("config center down")
            return Fetched(self.value, str(self.version), "apollo://ddm/shard.strategy.config")

        def changed(self, revision: str | None) -> bool:
            return revision != str(self.version)

    center = ConfigCenter()
    assert isinstance(center, ConfigSource)
    holder = ConfigHolder(center)
    assert holder.config.runtime.max_offset == 5000
    center.value = {**center.value, "runtime": {"maxOffset": 6000}}
    center.version += 1
    assert holder.reload().updated and holder.config.runtime.max_offset == 6000
    center.up = False
    assert holder.reload(force=True).status == "unreachable" and holder.config.runtime.max_offset == 6000


def test_snapshot_of_a_mapping_source(tmp_path: Path) -> None:
    snap = tmp_path / "snap.json"
    source = StaticSource({"dataSources": {"ds_0": "sqlite:///a.db"}, "broadcastTables": ["t_dict"]})
    ConfigHolder(source, snapshot=snap)
    source.available = False
    holder = ConfigHolder(source, snapshot=snap)
    assert holder.current.from_snapshot and holder.config.is_broadcast("t_dict")


def test_listener_errors_do_not_undo_a_reload() -> None:
    source = StaticSource(config_text(1))
    holder = ConfigHolder(source)

    def boom(new: ConfigVersion, old: ConfigVersion) -> None:
        raise RuntimeError("listener bug")

    unsubscribe = holder.subscribe(boom)
    source.set(config_text(2, layout=1))
    assert holder.reload().updated and holder.version == 2
    unsubscribe()
    source.set(config_text(3, layout=1))
    assert holder.reload().updated


def test_watch_picks_up_file_changes(cfg: Path) -> None:
    with ConfigHolder(cfg) as holder:
        holder.watch(interval=0.01)
        write(cfg, config_text(2, layout=1))
        deadline = time.monotonic() + 5
        while holder.version < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert holder.version == 2 and check_consistent(holder.current) == 2
    holder.stop()  # idempotent


def test_concurrent_readers_never_see_torn_or_bad_versions() -> None:
    """Migration steps push good and bad versions while readers check every version they see."""
    source = StaticSource(config_text(0))
    holder = ConfigHolder(source)
    stop = threading.Event()
    errors: list[BaseException] = []
    reads = [0] * 4
    seen_gens: set[int] = set()

    def reader(i: int) -> None:
        last = 0
        try:
            while not stop.is_set():
                version = holder.current  # one read; everything below is that one version
                gen = check_consistent(version)
                assert version.number >= last, "versions went backwards"
                last = version.number
                seen_gens.add(gen)
                reads[i] += 1
                if reads[i] % 64 == 0:
                    time.sleep(0)  # let the writer have the GIL now and then
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
            stop.set()

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    results = []
    try:
        for gen in range(1, 41):
            source.set(config_text(gen, bad=gen % 4 == 0))
            results.append(holder.reload(allow_placement_change=True))
            if gen % 4 == 0:
                assert results[-1].status == "rejected"
                assert check_consistent(holder.current) == gen - 1  # the old one keeps serving
            time.sleep(0.002)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors, errors
    assert min(reads) > 0
    assert sum(r.updated for r in results) == 30 and holder.version == 31
    assert not any(g % 4 == 0 and g > 0 for g in seen_gens)  # bad generations were never served
    assert len(seen_gens) > 1


def test_failover_snapshot_named_by_the_configuration(tmp_path: Path) -> None:
    snap = tmp_path / "from-config.json"
    source = StaticSource(config_text(1) + f"metadata: {{failoverSnapshot: '{snap}'}}\n")
    holder = ConfigHolder(source)
    assert json.loads(snap.read_text())["version"] == 1
    source.available = False
    restarted = ConfigHolder(source, snapshot=snap)
    assert restarted.current.from_snapshot and check_consistent(restarted.current) == 1
    assert holder.version == 1
