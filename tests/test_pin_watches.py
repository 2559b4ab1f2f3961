"""``PinWatches`` (the ``hotpin`` unit): a transaction's pins watched by the event loop from one read to the next.

Each twin on the loop the proxy runs (uvloop) and on asyncio's own, with real sockets (a socket pair): a watched
socket's bytes call the callback; a parked one's do not, and give the watch up (the bytes left to whoever reads
the socket), unless a reader took them in the same turn of the loop; ``drop`` gives every watch up and closes the duplicates (no descriptor left open); the socket stays
blocking for its driver; a new socket under the same descriptor number gets a watch of its own.
"""

from __future__ import annotations

import asyncio
import os
import socket
from typing import Any, Callable, Iterator

import pytest

from ddm_core._fast import Implementation

uvloop: Any = pytest.importorskip("uvloop")

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {"uvloop": uvloop.new_event_loop,
                                                               "asyncio": asyncio.new_event_loop}  # fmt: skip


@pytest.fixture(params=sorted(LOOPS))
def loop(request: pytest.FixtureRequest) -> Iterator[asyncio.AbstractEventLoop]:
    made = LOOPS[request.param]()
    try:
        yield made
    finally:
        made.close()


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _turns(loop: asyncio.AbstractEventLoop, n: int = 5) -> None:
    """Let the loop run its ready callbacks and poll ``n`` times."""
    for _ in range(n):
        loop.run_until_complete(asyncio.sleep(0.01))


def test_a_watched_pin_calls_back_and_a_parked_one_gives_itself_up(impl: Implementation,
                                                                  loop: asyncio.AbstractEventLoop) -> None:  # fmt: skip
    before = _open_fds()
    pin, server = socket.socketpair()
    try:
        watches = impl.hotpin.PinWatches()
        called: list[bytes] = []

        def readable() -> None:
            watches.park(pin.fileno())  # as a read does before it reads
            called.append(pin.recv(100))

        for i in range(3):  # one registration for every read
            watches.watch(loop, pin, pin.fileno(), readable)
            assert os.get_blocking(pin.fileno())  # blocking for its driver while it is watched
            server.send(b"answer %d" % i)
            _turns(loop)
            assert called == [b"answer %d" % j for j in range(i + 1)]
            assert len(watches) == 1
        assert _open_fds() == before + 3  # the pair and one duplicate
        server.send(b"unasked")  # parked: nobody on the loop awaits it
        _turns(loop)
        assert len(called) == 3 and len(watches) == 0  # given up, its duplicate closed
        assert _open_fds() == before + 2
        assert pin.recv(100) == b"unasked"  # left to whoever reads the socket (a worker's driver)
        watches.watch(loop, pin, pin.fileno(), readable)  # watched anew
        server.send(b"again")
        _turns(loop)
        assert called[-1] == b"again" and len(watches) == 1
        watches.drop()
        assert len(watches) == 0 and _open_fds() == before + 2
        server.send(b"after the drop")
        _turns(loop)
        assert called[-1] == b"again" and pin.recv(100) == b"after the drop"
        watches.drop()  # nothing left: no effect
    finally:
        pin.close()
        server.close()
    assert _open_fds() == before


def test_a_pin_closed_elsewhere_wakes_nobody_and_its_number_gets_a_watch_of_its_own(
        impl: Implementation, loop: asyncio.AbstractEventLoop) -> None:  # fmt: skip
    before = _open_fds()
    watches = impl.hotpin.PinWatches()
    called: list[str] = []
    pin, server = socket.socketpair()
    watches.watch(loop, pin, pin.fileno(), lambda: called.append("old"))
    watches.park(pin.fileno())
    number = pin.fileno()
    pin.close()  # closed elsewhere (a connection discarded) while parked: the duplicate keeps the socket open
    new, peer = socket.socketpair()
    try:
        if new.fileno() != number:  # the number is taken again by the next socket, as a new pool connection's
            os.dup2(new.fileno(), number)
            new.close()
            new = socket.socket(fileno=number)
        watches.watch(loop, new, number, lambda: called.append("new"))  # another socket: the old watch given up
        assert server.recv(10) == b""  # its duplicate closed: the old socket is closed at last
        peer.send(b"x")
        _turns(loop)
        assert called and set(called) == {"new"}
        watches.drop()
    finally:
        new.close()
        peer.close()
        server.close()
    # an end reaching a parked watch (the data source closed the connection) wakes it: it gives itself up
    pin, server = socket.socketpair()
    watches.watch(loop, pin, pin.fileno(), lambda: called.append("ended"))
    watches.park(pin.fileno())
    server.close()
    _turns(loop)
    assert "ended" not in called and len(watches) == 0
    pin.close()
    assert _open_fds() == before


def test_a_parked_watch_woken_for_bytes_a_reader_took_already_stays(impl: Implementation,
                                                                    loop: asyncio.AbstractEventLoop) -> None:  # fmt: skip
    """Two pins readable in one poll, both read by the first callback (as a multi-unit read takes whatever has
    come): the second, parked by then, is woken with nothing left on its socket and keeps its registration."""
    watches = impl.hotpin.PinWatches()
    pairs = [socket.socketpair() for _ in range(2)]
    got: list[bytes] = []

    def read_both() -> None:
        for pin, _ in pairs:
            watches.park(pin.fileno())
            got.append(pin.recv(100))

    try:
        for _ in range(3):
            for pin, _ in pairs:
                watches.watch(loop, pin, pin.fileno(), read_both)
            for i, (_, server) in enumerate(pairs):
                server.send(b"answer %d" % i)  # both before the loop polls: one poll sees both
            _turns(loop)
            assert got[-2:] == [b"answer 0", b"answer 1"]
            assert len(watches) == 2  # neither given up
        watches.drop()
    finally:
        for pin, server in pairs:
            pin.close()
            server.close()
