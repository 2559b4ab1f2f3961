"""FileSource takes a changed file only once it is complete and stable.

A file rewritten in place is seen half-written; the source reads it twice,
``settle`` seconds apart, and takes it only when both reads agree. Under a
writer that rewrites the file non-atomically while a watcher polls, no
accepted version ever places data differently, and the last complete
version is the one that ends up serving.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest

from ddm_core.errors import SourceUnavailableError
from ddm_core.metadata import ConfigHolder, ConfigVersion, FileSource
from ddm_core.metadata.load import digest_of
from placement_checks import NATIVE_CONFIGS, ROOT, assert_same_placement

ORDERS = (ROOT / "examples" / "orders.yaml").read_text()


def test_fetch_waits_until_the_file_stops_changing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each pause between two reads lets the writer add one more chunk; only the whole file is taken."""
    path = tmp_path / "orders.yaml"
    chunks = [ORDERS[i : i + 300] for i in range(0, len(ORDERS), 300)]
    path.write_text(chunks[0])
    left = chunks[1:]
    pauses = []

    def writer_goes_on(self: FileSource) -> None:
        pauses.append(len(left))
        if left:
            with path.open("a") as fh:
                fh.write(left.pop(0))

    monkeypatch.setattr(FileSource, "_pause", writer_goes_on)
    fetched = FileSource(path, max_wait=60).fetch()
    assert fetched.content == ORDERS
    assert len(pauses) == len(chunks)  # one pause per chunk written, then one with nothing new
    assert not FileSource(path).changed(fetched.revision)


def test_a_file_that_keeps_changing_is_not_taken(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "orders.yaml"
    path.write_text(ORDERS)
    holder = ConfigHolder(FileSource(path, settle=0, max_wait=0), check_env=False)
    serving = holder.current

    def never_done(self: FileSource) -> None:
        with path.open("a") as fh:
            fh.write("# still writing\n")

    monkeypatch.setattr(FileSource, "_pause", never_done)
    path.write_text(ORDERS.replace("maxOffset: 10000", "maxOffset: 5"))
    result = holder.reload()
    assert result.status == "unreachable" and holder.current is serving
    assert isinstance(result.error, SourceUnavailableError)
    assert "still being written" in str(result.error) and "os.replace" in str(result.error)
    assert str(path) in str(result.error)


def test_a_same_size_rewrite_within_one_mtime_is_seen(tmp_path: Path) -> None:
    path = tmp_path / "orders.yaml"
    path.write_text(ORDERS)
    source = FileSource(path, settle=0)
    fetched = source.fetch()
    st = path.stat()
    path.write_text(ORDERS.replace("maxOffset: 10000", "maxOffset: 20000"))  # same size
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # and the same mtime
    assert path.stat().st_size == st.st_size
    assert source.changed(fetched.revision)


def test_a_file_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    path = tmp_path / "orders.yaml"
    path.write_bytes(ORDERS.encode() + b"\xff\xfe")
    with pytest.raises(SourceUnavailableError, match="not UTF-8"):
        FileSource(path, settle=0).fetch()


def publish_atomically(path: Path, text: str) -> None:
    """The documented way to publish a version: write a temporary file, rename it over the old one."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def rewrite_in_place(path: Path, text: str, rng: random.Random) -> None:
    """What an editor or ``cat > file`` does: truncate, then write piece by piece."""
    lines = text.splitlines(keepends=True)
    stall = rng.randrange(len(lines)) if rng.random() < 0.3 else -1
    with path.open("w") as fh:
        for i, line in enumerate(lines):
            fh.write(line)
            fh.flush()
            if i == stall:
                time.sleep(0.02)  # a writer stalled mid-file longer than the source's settle time
            elif i % 8 == 0:
                time.sleep(0)


def _wait_for(holder: ConfigHolder, digest: str) -> None:
    deadline = time.monotonic() + 60
    while holder.current.digest != digest and time.monotonic() < deadline:
        time.sleep(0.005)


@pytest.mark.parametrize("path", NATIVE_CONFIGS[:2], ids=[p.name for p in NATIVE_CONFIGS[:2]])
def test_in_place_rewrites_while_watching(tmp_path: Path, path: Path) -> None:
    text = path.read_text()
    assert "maxOffset: 10000" in text
    target = tmp_path / "ddm.yaml"
    target.write_text(text)
    accepted: list[ConfigVersion] = []
    holder = ConfigHolder(FileSource(target, settle=0.005), check_env=False)
    original = holder.config  # SQLite paths resolved against the file's directory
    holder.subscribe(lambda new, old: accepted.append(new))
    rng = random.Random(20240611)
    final = text.replace("maxOffset: 10000", "maxOffset: 99999")
    with holder:
        holder.watch(interval=0.002)
        for i in range(150):
            rewrite_in_place(target, text.replace("maxOffset: 10000", f"maxOffset: {10001 + i}"), rng)
        rewrite_in_place(target, final, rng)
        _wait_for(holder, digest_of(final))
    assert accepted, "the watcher took no version at all"
    for version in accepted:
        assert_same_placement(original, version.config, keys=range(16))
    assert holder.current.digest == digest_of(final)
    assert holder.config.runtime.max_offset == 99999
    assert_same_placement(original, holder.config)


def test_atomic_renames_are_taken_whole(tmp_path: Path) -> None:
    target = tmp_path / "ddm.yaml"
    target.write_text(ORDERS)
    accepted: list[ConfigVersion] = []
    holder = ConfigHolder(FileSource(target, settle=0.005), check_env=False)
    holder.subscribe(lambda new, old: accepted.append(new))
    texts = [ORDERS.replace("maxOffset: 10000", f"maxOffset: {20000 + i}") for i in range(40)]
    with holder:
        holder.watch(interval=0.002)
        for text in texts:
            publish_atomically(target, text)
        _wait_for(holder, digest_of(texts[-1]))
    whole = {digest_of(t) for t in texts}
    assert accepted and all(v.digest in whole for v in accepted)  # never a partial file
    assert holder.current.digest == digest_of(texts[-1])


def test_watch_never_moves_data(tmp_path: Path) -> None:
    """A watcher takes a retuned file but never a file that moves data, complete or not."""
    target = tmp_path / "ddm.yaml"
    target.write_text(ORDERS)
    holder = ConfigHolder(FileSource(target, settle=0), check_env=False)
    moved = ORDERS.replace("{t_config: ds_0}", "{t_config: ds_1}")
    publish_atomically(target, moved)
    assert holder.reload().status == "rejected"
    retuned = ORDERS.replace("maxOffset: 10000", "maxOffset: 123")
    publish_atomically(target, retuned)
    assert holder.reload().updated and holder.config.runtime.max_offset == 123


def test_an_oversized_file_is_refused_without_reading_it_whole(tmp_path: Path) -> None:
    """A file beyond the loader's size limit never reaches the parser; the serving version stays."""
    from ddm_core.metadata.limits import MAX_DOCUMENT_BYTES

    path = tmp_path / "orders.yaml"
    path.write_text(ORDERS)
    holder = ConfigHolder(FileSource(path, settle=0))
    served = holder.config
    path.write_text(ORDERS + "#" * (MAX_DOCUMENT_BYTES + 10) + "\n")
    with pytest.raises(SourceUnavailableError, match=f"larger than {MAX_DOCUMENT_BYTES} bytes"):
        FileSource(path, settle=0).fetch()
    holder.reload()
    assert holder.config is served
