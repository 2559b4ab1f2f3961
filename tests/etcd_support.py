"""A private etcd for tests: its own data dir and loopback ports, killed, frozen and compacted on demand.

``private_etcd`` (a fixture, use it via ``from etcd_support import private_etcd``) starts the
Debian ``etcd`` binary (``etcd-server``, installed by .ci/install_tools.sh) on two free loopback
ports with a data dir under ``tmp_path`` and yields a :class:`PrivateEtcd`; it stops the server
by the PID it started. Nothing here uses ddm-core's etcd client: the helpers talk to etcd's JSON
gateway with the standard library, so a test can check the client against an independent path.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest

from ports import free_port
from processes import freeze
from services import require_service

__all__ = ["PrivateEtcd", "private_etcd", "etcd_call"]


def etcd_call(url: str, path: str, body: dict[str, Any], timeout: float = 5.0) -> dict[str, Any]:
    """POST ``body`` to etcd's gateway at ``url + path`` (e.g. ``/v3/kv/range``); the decoded answer."""
    request = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})  # fmt: skip
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - loopback test server
        answer: dict[str, Any] = json.loads(response.read())
        return answer


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


class PrivateEtcd:
    """One single-member etcd in ``base``; the ports and data dir stay the same across restarts."""

    def __init__(self, base: Path) -> None:
        binary = shutil.which("etcd")
        if binary is None:
            require_service("the etcd binary (Debian etcd-server)", "etcd is not on PATH")
        self.binary = str(binary)
        self.base = base
        self.data_dir = base / "etcd-data"
        self.client_port = free_port()
        self.peer_port = free_port()
        self.url = f"http://127.0.0.1:{self.client_port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.frozen = False

    def _args(self, url: str) -> list[str]:
        peer = f"http://127.0.0.1:{self.peer_port}"
        return [
            self.binary, "--name", "ddm-test", "--data-dir", str(self.data_dir),
            "--listen-client-urls", url, "--advertise-client-urls", url,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"ddm-test={peer}", "--initial-cluster-state", "new",
            "--logger", "zap", "--log-outputs", "stderr",
        ]  # fmt: skip

    def start(self, timeout: float = 20.0, *, aside: bool = False) -> str:
        """Start etcd (on the same data dir and ports as before) and wait until it answers; returns its URL.

        ``aside``: on another client port, which its clients do not know (they stay disconnected
        while a test writes and compacts behind their backs through the returned URL).
        """
        assert self.process is None, "etcd is already running"
        url = f"http://127.0.0.1:{free_port()}" if aside else self.url
        log = open(self.base / "etcd.log", "ab")  # noqa: SIM115 - the child keeps it
        try:
            self.process = subprocess.Popen(self._args(url), stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        finally:
            log.close()
        self.frozen = False
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"etcd exited with {self.process.returncode}; see {self.base / 'etcd.log'}")
            try:
                self.revision(url)
                return url
            except (OSError, urllib.error.URLError, ValueError):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"etcd did not answer within {timeout} s; see {self.base / 'etcd.log'}")
                time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL the server (no clean shutdown: its clients' streams reset)."""
        process, self.process = self.process, None
        if process is not None:
            if self.frozen:
                os.kill(process.pid, signal.SIGCONT)  # a stopped process dies only once it runs again
            process.kill()
            process.wait()
        self.frozen = False

    def restart(self) -> None:
        """SIGKILL it, then start it again on the same data dir and ports."""
        self.kill()
        self.start()

    def freeze(self) -> None:
        """SIGSTOP: connections stay open, nothing answers (a hung server, not a dead one)."""
        assert self.process is not None
        freeze(self.process.pid)
        self.frozen = True

    def thaw(self) -> None:
        """SIGCONT after :meth:`freeze`."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGCONT)
        self.frozen = False

    def revision(self, url: str | None = None) -> int:
        """The store's current revision."""
        answer = etcd_call(url or self.url, "/v3/kv/range", {"key": b64("\0")}, timeout=2.0)
        return int(answer["header"]["revision"])

    def compact(self, revision: int | None = None) -> int:
        """Compact history up to ``revision`` (default: the current one), physically; returns it."""
        target = self.revision() if revision is None else revision
        etcd_call(self.url, "/v3/kv/compaction", {"revision": target, "physical": True})
        return target

    def put(self, key: str, value: str) -> int:
        """Write ``key`` directly (not through ddm-core); returns the new revision."""
        answer = etcd_call(self.url, "/v3/kv/put", {"key": b64(key), "value": b64(value)})
        return int(answer["header"]["revision"])

    def get(self, key: str) -> str | None:
        """Read ``key`` directly (not through ddm-core)."""
        kvs = etcd_call(self.url, "/v3/kv/range", {"key": b64(key)}).get("kvs") or []
        return base64.b64decode(kvs[0].get("value", "")).decode() if kvs else None

    def stop(self) -> None:
        """Stop the server this object started (SIGKILL: its data dir is thrown away)."""
        self.kill()


@pytest.fixture()
def private_etcd(tmp_path: Path) -> Iterator[PrivateEtcd]:
    server = PrivateEtcd(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()
