"""Key generators behind INSERT: one per worker id for the whole process, whoever asks first."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from ddm_core.metadata.model import KeyGeneratorSpec
from ddm_core.route.insert import insert
from ddm_core.route.insert.insert import generator_for


def test_specs_with_one_worker_id_share_one_generator() -> None:
    # Two configs (a reload, a second executor) naming worker 7 must not restart its sequence.
    a = generator_for(KeyGeneratorSpec("a", "SNOWFLAKE", worker_id=7))
    b = generator_for(KeyGeneratorSpec("b", "SNOWFLAKE", worker_id=7))
    assert a is b
    assert generator_for(KeyGeneratorSpec("c", "SNOWFLAKE", worker_id=8)) is not a
    gene = generator_for(KeyGeneratorSpec("g", "GENE", worker_id=7, gene_bits=10, shard_column="user_id"))
    assert gene is not a and type(gene).__name__ == "GeneIdGenerator"
    assert generator_for(KeyGeneratorSpec("u", "UUID")) is None
    ids = a.next_ids(1000).tolist() + b.next_ids(1000).tolist()
    assert len(set(ids)) == 2000


def test_first_callers_racing_get_one_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[Any] = []

    class SlowSnowflake:
        """Takes a while to build, so racing first callers all find the registry empty."""

        def __init__(self, worker_id: int) -> None:
            time.sleep(0.05)
            made.append(self)

    monkeypatch.setattr(insert, "_GENERATORS", {})  # a process that has built none yet
    monkeypatch.setattr(insert, "Snowflake", SlowSnowflake)
    spec = KeyGeneratorSpec("k", "SNOWFLAKE", worker_id=3)
    start = threading.Barrier(8)
    got: list[Any] = []

    def ask() -> None:
        start.wait()
        got.append(generator_for(spec))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(made) == 1 and all(g is made[0] for g in got) and len(got) == 8
