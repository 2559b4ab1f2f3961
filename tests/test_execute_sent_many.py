"""``Executor.send_many``: a multi-unit read sent without waiting, its answers read off the sockets, settled once.

On the four MariaDB databases (one unit per data source): the pools' accounting after a read relayed whole,
read into rows, failed mid-way while sending (what was sent discarded, what was not given back as it was) or
declined (nothing lent); the full-route slot such a read holds given back on every path; and the
:class:`~ddm_core.execute.shared.Slots` the slot comes from. The answers are taken off the sockets by the
proxy's own readers (proxy/relay_many.py), on an asyncio loop.
"""

from __future__ import annotations

import asyncio
import copy
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from ddm_core.errors import DdmError, ExecutionError
from ddm_core.execute import Executor
from ddm_core.execute.pools import EndpointPool, PoolStats
from ddm_core.execute.sent_many import SentMany
from ddm_core.execute.shared import Slots, style_of
from ddm_core.metadata import ConfigHolder
from ddm_core.proxy.relay_many import read_many, take_many
from ddm_core.route.plan import RouteKind
from test_execute_support import (  # noqa: F401 - fixtures
    assert_no_leaks,
    mysql_config,
    mysql_databases,
    mysql_executor,
    sharding_config,
)

READ = "SELECT order_id, user_id FROM t_order ORDER BY order_id"  # every table: a FULL route, one unit a data source


def _fill(ex: Executor) -> list[tuple[Any, ...]]:
    for user in range(1, 41):
        ex.execute("INSERT INTO t_order (order_id, user_id, amount) VALUES (%s, %s, %s)", (user * 10, user, user)).close()
    with ex.execute(READ) as result:
        return list(result.fetchall())


def _primaries(ex: Executor) -> dict[str, EndpointPool]:
    return {unit.data_source: ex.runner.endpoints.primary(unit.data_source) for unit in ex.router.route(READ).units}


def _stats(pools: dict[str, EndpointPool]) -> dict[str, PoolStats]:
    return {name: pool.stats() for name, pool in pools.items()}


def _freshly_used(ex: Executor) -> None:
    """Every primary's top idle connection used a moment ago: ``send_many`` lends it without a ping."""
    ex.warm_up()
    ex.execute(READ).close()


def _sent(ex: Executor) -> SentMany:
    for _ in range(20):  # a 2-core machine may pause past the ping window (0.5 s) between the two: try again
        _freshly_used(ex)
        sent = ex.send_many(ex.router.route(READ), caller_style=style_of(READ))
        if sent is not None:
            return sent
    pytest.fail("send_many declined the read 20 times")


def _slots_free(ex: Executor) -> int:
    return ex.runner._full_slots.free()


def test_a_read_into_rows_gives_every_connection_back(mysql_executor: Executor) -> None:
    ex = mysql_executor
    expected = _fill(ex)
    pools = _primaries(ex)
    assert len(pools) == 4 and ex.router.route(READ).kind is RouteKind.FULL
    sent = _sent(ex)
    assert sent.slot is not None and _slots_free(ex) == ex.full_route_concurrency - 1  # the read holds one
    assert len({id(part.borrowed) for part in sent.parts}) == 4  # one connection a unit
    before = _stats(pools)
    answers, lost = asyncio.run(read_many(sent))
    with sent.read(answers, lost) as result:
        assert list(result.fetchall()) == expected
    after = _stats(pools)
    for name in pools:
        assert after[name].borrowed == 0 and after[name].discards == before[name].discards
        assert after[name].idle == before[name].idle + 1  # its connection back, kept
    assert _slots_free(ex) == ex.full_route_concurrency
    assert_no_leaks(ex)


def test_a_relayed_read_gives_every_connection_back_with_its_closing_flags(mysql_executor: Executor) -> None:
    ex = mysql_executor
    expected = _fill(ex)
    pools = _primaries(ex)
    sent = _sent(ex)
    before = _stats(pools)
    taken = asyncio.run(take_many(sent))
    assert all(answer is not None for answer in taken.answers) and not taken.reading.lost
    raws = [part.borrowed.raw for part in sent.parts]
    statuses = list(taken.reading.statuses)
    for raw in raws:
        raw.server_status = 0  # what the relayed answers' closing flags must overwrite
    sent.relayed(len(expected), statuses, taken.reading.errors, taken.reading.lost)
    assert [raw.server_status for raw in raws] == statuses and all(statuses)
    for part in sent.parts:
        assert part.borrowed.released
    after = _stats(pools)
    for name in pools:
        assert after[name].borrowed == 0 and after[name].discards == before[name].discards
        assert after[name].idle == before[name].idle + 1
    assert _slots_free(ex) == ex.full_route_concurrency
    sent.abandon()  # settled already: nothing is given back twice
    assert _stats(pools) == after
    assert_no_leaks(ex)


def test_a_send_failing_mid_way_discards_what_was_sent_and_keeps_the_rest(mysql_executor: Executor) -> None:
    ex = mysql_executor
    expected = _fill(ex)
    plan = ex.router.route(READ)
    pools = _primaries(ex)
    sources = [unit.data_source for unit in plan.units]
    broken_source = sources[2]  # the third unit's: two were sent before it, one comes after
    for _ in range(20):
        _freshly_used(ex)
        before = _stats(pools)
        broken = pools[broken_source]._idle[-1].raw  # the connection lend_idle gives the third unit
        broken._sock.shutdown(socket.SHUT_RDWR)  # the server is reachable; this socket is not any more
        try:
            sent = ex.send_many(ex.router.route(READ), caller_style=style_of(READ))
        except DdmError as exc:
            error = exc
            break
        assert sent is None  # declined (a connection past the ping window): nothing was sent
        assert _stats(pools) == before
        pools[broken_source]._give_back(pools[broken_source]._idle.pop(), True)  # the broken one goes
    else:
        pytest.fail("send_many declined the read 20 times")
    assert broken_source in str(error)
    after = _stats(pools)
    for name in pools:
        assert after[name].borrowed == 0, after[name]
        assert after[name].borrows == before[name].borrows + 1  # each unit's connection lent once
        sent_or_broken = sources.index(name) <= 2  # sent: in doubt; the third: broken; the fourth: as it was
        assert after[name].discards == before[name].discards + sent_or_broken, (name, before[name], after[name])
        assert after[name].idle == before[name].idle - sent_or_broken
    assert _slots_free(ex) == ex.full_route_concurrency
    guards = [pool._idle[-1].guard for pool in pools.values()]
    assert all(g is None or g.deadline is None for g in guards)  # nothing left armed
    with ex.execute(READ) as result:  # the pools serve on
        assert list(result.fetchall()) == expected
    assert_no_leaks(ex)


def test_a_declined_read_lends_nothing_and_gives_its_slot_back(mysql_executor: Executor) -> None:
    ex = mysql_executor
    _fill(ex)
    pools = _primaries(ex)
    _freshly_used(ex)
    time.sleep(0.6)  # past the ping window: every idle connection needs a check a loop does not make
    before = _stats(pools)
    assert ex.send_many(ex.router.route(READ), caller_style=style_of(READ)) is None
    assert _stats(pools) == before
    assert _slots_free(ex) == ex.full_route_concurrency


def test_a_read_waits_for_no_full_route_slot_from_the_loop(mysql_executor: Executor) -> None:
    ex = mysql_executor
    expected = _fill(ex)
    slots = ex.runner._full_slots
    _freshly_used(ex)  # idle connections ready: only the slots stop the read
    taken = 0
    while slots.try_take():  # every slot held (by full-route statements on workers, say)
        taken += 1
    assert taken == ex.full_route_concurrency
    try:
        assert ex.send_many(ex.router.route(READ), caller_style=style_of(READ)) is None
        assert slots.free() == 0
    finally:
        for _ in range(taken):
            slots.give()
    with ex.execute(READ) as result:  # and the worker path takes a slot again
        assert list(result.fetchall()) == expected
    assert slots.free() == ex.full_route_concurrency


def test_slots_take_and_give() -> None:
    slots = Slots(2)
    assert slots.free() == 2
    assert slots.try_take() and slots.try_take()
    assert not slots.try_take() and slots.free() == 0
    started = time.monotonic()
    assert not slots.take(0.05)  # waits, then gives up
    assert time.monotonic() - started >= 0.04
    assert not slots.take(-1.0)  # a deadline already behind: no wait, no error
    threading.Timer(0.05, slots.give).start()
    assert slots.take(5.0)  # a slot given back by another thread wakes the waiter
    slots.give()
    slots.give()
    with pytest.raises(ExecutionError, match="given back more often than taken"):
        slots.give()
    assert slots.free() == 2


def test_a_reload_that_gives_a_data_source_replicas_sends_its_reads_to_the_workers(
    mysql_config: Any, mysql_databases: list[str], tmp_path: Path
) -> None:
    """The primaries ready for the loop are kept per configuration version: after a reload gives ``ds_1``
    replicas, a multi-unit read over it is declined (the splitter chooses, on a worker); after one that takes
    them away, it is sent from the loop again."""
    urls = {f"ds_{i}": {"url": f"mysql://127.0.0.1:3306/{db}", "username": "root", "password": ""}
            for i, db in enumerate(mysql_databases)}  # fmt: skip
    path = tmp_path / "config.yaml"

    def publish(replicas: bool) -> None:
        doc = sharding_config(copy.deepcopy(urls), extra_tables=("t_leak",))
        if replicas:
            doc["dataSources"]["ds_1"]["replicas"] = [{"url": doc["dataSources"]["ds_1"]["url"], "weight": 1}]
        path.write_text(yaml.safe_dump(doc), encoding="utf-8")

    publish(False)
    holder = ConfigHolder(path, check_env=False)
    with Executor(holder, timeout=3.0) as ex:
        sent = _sent(ex)
        answers, lost = asyncio.run(read_many(sent))
        sent.read(answers, lost).close()
        publish(True)
        assert holder.reload(force=True).updated
        primary = ex.runner.endpoints.primary("ds_1")
        for _ in range(3):
            _freshly_used(ex)
            primary.borrow().release()  # ds_1's primary has a connection the loop could take: only replicas stop it
            assert ex.send_many(ex.router.route(READ), caller_style=style_of(READ)) is None
        publish(False)
        assert holder.reload(force=True).updated
        sent = _sent(ex)
        answers, lost = asyncio.run(read_many(sent))
        sent.read(answers, lost).close()
        assert _slots_free(ex) == ex.full_route_concurrency
        assert_no_leaks(ex)
