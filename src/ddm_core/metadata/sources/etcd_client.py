"""A small etcd v3 client over etcd's JSON gateway (``/v3/...``), with a watch that survives reconnects and compaction.

ddm-core needs few etcd calls: read a key or a prefix together with the store's
revision, put, one compare-then-put transaction, leases, and a watch. They go
over HTTP with ``requests`` (the ``etcd`` extra) to the gateway every etcd 3.4+
serves on its client URL. The maintained gateway client (etcd3gw) was measured
here and not used: its watch delivers nothing and raises nothing when the
revision asked for was compacted, and stalls silently when etcd restarts under
it, and its reads do not return the store's revision (docs/configuration.md#etcd-config-center).

:class:`Watch` is what those clients lack. It follows a key (or a prefix) from
a revision and hands each batch of events to a callback, in revision order:

* a dropped stream (etcd killed, restarted, a network error, no answer within
  ``idle_timeout``) is opened again from *the last delivered revision + 1*, so
  nothing is missed and nothing is delivered twice (events at or below the last
  delivered revision are dropped, should etcd send them again);
* when that revision was compacted away, etcd cancels the watch
  (``compact_revision``): the watch re-reads the watched range and delivers it
  as one :class:`WatchBatch` with ``snapshot`` set — the whole current state at
  one revision R, which the consumer takes in place of what it had — then
  watches again from R + 1.
"""

from __future__ import annotations

import base64
import json
import logging
import random
import socket
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Sequence

from ddm_core.errors import EtcdCompactedError, EtcdError, EtcdUnavailableError, MissingExtraError

__all__ = [
    "EtcdClient",
    "KeyValue",
    "Event",
    "WatchBatch",
    "Watch",
    "Compare",
    "TxnResult",
    "put_op",
    "delete_op",
    "range_op",
    "prefix_end",
]

log = logging.getLogger("ddm_core.metadata")


def _b64(data: str | bytes) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode("ascii")


def _unb64(data: str | None) -> bytes:
    return base64.b64decode(data) if data else b""


def prefix_end(prefix: str) -> bytes:
    """The range end that makes ``[prefix, end)`` every key starting with ``prefix``."""
    raw = bytearray(prefix.encode())
    while raw:
        if raw[-1] < 0xFF:
            raw[-1] += 1
            return bytes(raw)
        raw.pop()
    return b"\0"  # the prefix is all 0xff bytes (or empty): to the end of the key space


@dataclass(frozen=True, slots=True)
class KeyValue:
    """One key as etcd stores it (revisions are the store's: every write raises the revision by one)."""

    key: str
    value: bytes
    create_revision: int
    mod_revision: int
    version: int
    lease: int = 0

    @property
    def text(self) -> str:
        return self.value.decode("utf-8", "surrogateescape")

    @classmethod
    def from_json(cls, kv: dict[str, Any]) -> "KeyValue":
        return cls(
            _unb64(kv.get("key")).decode("utf-8", "surrogateescape"),
            _unb64(kv.get("value")),
            int(kv.get("create_revision", 0)),
            int(kv.get("mod_revision", 0)),
            int(kv.get("version", 0)),
            int(kv.get("lease", 0)),
        )


@dataclass(frozen=True, slots=True)
class Event:
    """A change seen by a watch: ``kv`` after a PUT, the deleted key (empty value) after a DELETE."""

    type: Literal["PUT", "DELETE"]
    kv: KeyValue

    @property
    def revision(self) -> int:
        return self.kv.mod_revision


@dataclass(frozen=True, slots=True)
class WatchBatch:
    """What one callback receives.

    Attributes:
        events: Changes, in revision order (empty when ``snapshot`` is set).
        revision: Everything up to this revision has been delivered.
        snapshot: After a compaction, the whole watched range as read at ``revision``
            (replace what you hold with it); ``None`` for an ordinary batch.
    """

    events: tuple[Event, ...]
    revision: int
    snapshot: tuple[KeyValue, ...] | None = None


@dataclass(frozen=True, slots=True)
class Compare:
    """One condition of a transaction: ``target`` of ``key`` ``result`` ``value``.

    Build them with the class methods; a key that does not exist has mod_revision 0.
    """

    key: str
    target: Literal["MOD", "VALUE", "CREATE", "VERSION", "LEASE"]
    result: Literal["EQUAL", "NOT_EQUAL", "GREATER", "LESS"]
    operand: int | bytes

    @classmethod
    def mod_revision(cls, key: str, revision: int, result: Literal["EQUAL", "NOT_EQUAL", "GREATER", "LESS"] = "EQUAL",
                     ) -> "Compare":  # fmt: skip
        return cls(key, "MOD", result, revision)

    @classmethod
    def value(cls, key: str, value: str | bytes) -> "Compare":
        return cls(key, "VALUE", "EQUAL", value.encode() if isinstance(value, str) else value)

    @classmethod
    def absent(cls, key: str) -> "Compare":
        return cls(key, "CREATE", "EQUAL", 0)

    def to_json(self) -> dict[str, Any]:
        fields = {"MOD": "mod_revision", "VALUE": "value", "CREATE": "create_revision", "VERSION": "version",
                  "LEASE": "lease"}  # fmt: skip
        operand = _b64(self.operand) if isinstance(self.operand, bytes) else str(self.operand)
        return {"key": _b64(self.key), "target": self.target, "result": self.result, fields[self.target]: operand}


def put_op(key: str, value: str | bytes, *, lease: int = 0) -> dict[str, Any]:
    """A put inside a transaction."""
    request: dict[str, Any] = {"key": _b64(key), "value": _b64(value)}
    if lease:
        request["lease"] = str(lease)
    return {"request_put": request}


def delete_op(key: str) -> dict[str, Any]:
    """A delete inside a transaction."""
    return {"request_delete_range": {"key": _b64(key)}}


def range_op(key: str) -> dict[str, Any]:
    """A read inside a transaction (its result: :meth:`TxnResult.kvs`)."""
    return {"request_range": {"key": _b64(key)}}


@dataclass(frozen=True, slots=True)
class TxnResult:
    """A transaction's outcome: which branch ran, at which revision, and its operations' answers."""

    succeeded: bool
    revision: int
    responses: tuple[dict[str, Any], ...] = field(default=())

    def kvs(self, index: int) -> list[KeyValue]:
        """The keys read by operation ``index`` (a :func:`range_op`) of the branch that ran."""
        found = self.responses[index].get("response_range", {}).get("kvs") or []
        return [KeyValue.from_json(kv) for kv in found]


def _requests(needed_by: str) -> Any:
    try:
        import requests
    except ModuleNotFoundError as exc:
        raise MissingExtraError("etcd", needed_by, exc.name or "requests") from exc
    return requests


class EtcdClient:
    """Calls to one etcd endpoint (``http://host:port``); thread-safe (one HTTP session per thread).

    Args:
        endpoint: etcd's client URL.
        timeout: Seconds a call may take before it counts as etcd being unavailable.

    Every call raises :class:`~ddm_core.errors.EtcdUnavailableError` when etcd cannot be
    reached or does not answer within ``timeout``, and :class:`~ddm_core.errors.EtcdError`
    when it refuses the request.
    """

    def __init__(self, endpoint: str, *, timeout: float = 5.0) -> None:
        self._requests = _requests(f"the etcd client for {endpoint!r}")
        self.endpoint = endpoint.rstrip("/")
        self.timeout = timeout
        self._local = threading.local()
        self._sessions: list[Any] = []
        self._sessions_lock = threading.Lock()

    def _session(self) -> Any:
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = self._requests.Session()
            with self._sessions_lock:
                self._sessions.append(session)
        return session

    def call(self, path: str, body: dict[str, Any], *, timeout: float | None = None) -> dict[str, Any]:
        """POST ``body`` to the gateway's ``/v3`` + ``path``; the decoded answer."""
        try:
            response = self._session().post(f"{self.endpoint}/v3{path}", json=body,
                                            timeout=self.timeout if timeout is None else timeout)  # fmt: skip
        except self._requests.RequestException as exc:
            raise EtcdUnavailableError(f"etcd at {self.endpoint} cannot be reached ({path}): {exc}",
                                       endpoint=self.endpoint) from exc  # fmt: skip
        if response.status_code >= 500 and response.status_code != 501:
            raise EtcdUnavailableError(f"etcd at {self.endpoint} answered {path} with HTTP {response.status_code}: "
                                       f"{response.text[:200]}", endpoint=self.endpoint)  # fmt: skip
        try:
            answer: dict[str, Any] = response.json()
        except ValueError as exc:
            raise EtcdError(f"etcd at {self.endpoint} answered {path} with something not JSON: {response.text[:200]!r}",
                            endpoint=self.endpoint) from exc  # fmt: skip
        if response.status_code != 200 or "error" in answer:
            message = answer.get("message") or answer.get("error") or response.text[:200]
            raise EtcdError(f"etcd at {self.endpoint} refused {path}: {message}", endpoint=self.endpoint)
        return answer

    # -- keys ------------------------------------------------------------------------------------

    def get(self, key: str) -> tuple[KeyValue | None, int]:
        """``(the key or None, the store's revision at the read)``."""
        answer = self.call("/kv/range", {"key": _b64(key)})
        kvs = answer.get("kvs") or []
        return (KeyValue.from_json(kvs[0]) if kvs else None), int(answer["header"]["revision"])

    def get_prefix(self, prefix: str, *, limit: int = 0, descending: bool = False) -> tuple[list[KeyValue], int]:
        """Keys starting with ``prefix`` sorted by key (the last ``limit`` ones first when ``descending``;
        0: all) and the store's revision at the read."""
        body: dict[str, Any] = {"key": _b64(prefix), "range_end": _b64(prefix_end(prefix))}
        if limit:
            body["limit"] = str(limit)
        if descending:
            body.update(sort_order="DESCEND", sort_target="KEY")
        answer = self.call("/kv/range", body)
        return [KeyValue.from_json(kv) for kv in answer.get("kvs") or []], int(answer["header"]["revision"])

    def put(self, key: str, value: str | bytes, *, lease: int = 0) -> int:
        """Write ``key``; returns the revision of the write."""
        body: dict[str, Any] = {"key": _b64(key), "value": _b64(value)}
        if lease:
            body["lease"] = str(lease)
        return int(self.call("/kv/put", body)["header"]["revision"])

    def delete(self, key: str) -> int:
        """Delete ``key`` (no error when absent); returns the store's revision after it."""
        return int(self.call("/kv/deleterange", {"key": _b64(key)})["header"]["revision"])

    def txn(self, compare: Sequence[Compare], success: Sequence[dict[str, Any]],
            failure: Sequence[dict[str, Any]] = ()) -> TxnResult:  # fmt: skip
        """One transaction: if every ``compare`` holds run ``success``, else ``failure`` (atomic in etcd)."""
        answer = self.call("/kv/txn", {"compare": [c.to_json() for c in compare], "success": list(success),
                                       "failure": list(failure)})  # fmt: skip
        return TxnResult(bool(answer.get("succeeded", False)), int(answer["header"]["revision"]),
                         tuple(answer.get("responses") or ()))  # fmt: skip

    def put_if(self, key: str, value: str | bytes, compare: Sequence[Compare], *,
               also: Sequence[dict[str, Any]] = ()) -> TxnResult:  # fmt: skip
        """Put ``key`` (and the ``also`` operations) only if every ``compare`` holds; else read ``key``.

        The failure branch reads ``key``, so a refused caller learns what is there
        (``result.kvs(0)``) without another round trip.
        """
        return self.txn(compare, [put_op(key, value), *also], [range_op(key)])

    def compact(self, revision: int, *, physical: bool = True) -> None:
        """Drop history before ``revision`` (tests and operators; watches behind it get compacted)."""
        self.call("/kv/compaction", {"revision": revision, "physical": physical})

    # -- leases ----------------------------------------------------------------------------------

    def lease_grant(self, ttl: int) -> tuple[int, int]:
        """A new lease of ``ttl`` seconds: ``(lease id, granted ttl)``."""
        answer = self.call("/lease/grant", {"TTL": ttl})
        return int(answer["ID"]), int(answer["TTL"])

    def lease_keep_alive(self, lease: int) -> int:
        """Renew ``lease`` once; returns its new TTL, 0 when it has already expired (its keys are gone)."""
        answer = self.call("/lease/keepalive", {"ID": str(lease)})
        return int(answer.get("result", {}).get("TTL", 0))

    def lease_time_to_live(self, lease: int) -> int:
        """Seconds ``lease`` has left; -1 when it does not exist (expired or revoked)."""
        return int(self.call("/kv/lease/timetolive", {"ID": str(lease)}).get("TTL", -1))

    def lease_revoke(self, lease: int) -> None:
        """End ``lease`` now, deleting its keys (no error when it already expired)."""
        try:
            self.call("/kv/lease/revoke", {"ID": str(lease)})
        except EtcdUnavailableError:
            raise
        except EtcdError as exc:
            if "not found" not in exc.message:
                raise

    # -- watching --------------------------------------------------------------------------------

    def watch(self, key: str, on_batch: Callable[[WatchBatch], None], *, start_revision: int,
              prefix: bool = False, idle_timeout: float = 30.0) -> "Watch":  # fmt: skip
        """Follow ``key`` (every key under it with ``prefix``) from ``start_revision`` (0: from now) in a daemon thread.

        ``on_batch`` runs in that thread; see :class:`Watch`.
        """
        return Watch(self, key, on_batch, start_revision=start_revision, prefix=prefix, idle_timeout=idle_timeout)

    def close(self) -> None:
        """Close every thread's HTTP session (the client still works: a call opens a new one)."""
        with self._sessions_lock:
            sessions, self._sessions = self._sessions, []
        for session in sessions:
            session.close()
        self._local = threading.local()

    def __repr__(self) -> str:
        return f"EtcdClient({self.endpoint!r})"


class Watch:
    """A watch that is never lost: see the module docstring. Stop it with :meth:`stop`.

    Attributes:
        next_revision: The revision the watch resumes from (last delivered + 1).
        connected: The stream is open and etcd confirmed the watch.
        reconnects: How many times the stream was opened again.
        resyncs: How many times a compaction made it re-read the range.
        last_error: Why the stream last dropped (``None`` while it never did).
    """

    def __init__(self, client: EtcdClient, key: str, on_batch: Callable[[WatchBatch], None], *, start_revision: int,
                 prefix: bool, idle_timeout: float) -> None:  # fmt: skip
        self.client = client
        self.key = key
        self.prefix = prefix
        self.on_batch = on_batch
        self.idle_timeout = idle_timeout
        self.next_revision = max(0, start_revision)
        self.connected = False
        self.reconnects = 0
        self.resyncs = 0
        self.last_error: Exception | None = None
        self._stop = threading.Event()
        self._response: Any = None
        self._response_lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"ddm-etcd-watch {key}", daemon=True)
        self._thread.start()

    def _create_request(self) -> dict[str, Any]:
        create: dict[str, Any] = {"key": _b64(self.key), "progress_notify": True}
        if self.next_revision:  # else: from now (the created answer's revision + 1 becomes next_revision)
            create["start_revision"] = str(self.next_revision)
        if self.prefix:
            create["range_end"] = _b64(prefix_end(self.key))
        return {"create_request": create}

    def _run(self) -> None:
        delay = 0.05
        while not self._stop.is_set():
            try:
                self._stream()
                delay = 0.05  # a stream that ended cleanly (idle) reopens at once
            except EtcdCompactedError as exc:
                self.last_error = exc
                try:
                    self._resync()
                    continue
                except EtcdError as again:
                    self.last_error = again
            except Exception as exc:  # the stream's errors: requests', the socket's, a bad chunk
                self.last_error = exc
                if not self._stop.is_set():
                    log.info("etcd watch on %r dropped (%s); resuming from revision %d", self.key, exc,
                             self.next_revision)  # fmt: skip
            finally:
                self.connected = False
            if self._stop.wait(delay * (0.5 + random.random())):  # noqa: S311 - jitter, not security
                return
            delay = min(delay * 2, 1.0)
            self.reconnects += 1

    def _stream(self) -> None:
        requests = self.client._requests
        response = self.client._session().post(
            f"{self.client.endpoint}/v3/watch", json=self._create_request(), stream=True,
            timeout=(self.client.timeout, self.idle_timeout),
        )  # fmt: skip
        with self._response_lock:
            self._response = response
        try:
            if self._stop.is_set():
                return
            if response.status_code != 200:
                raise EtcdUnavailableError(f"etcd at {self.client.endpoint} answered a watch with HTTP "
                                           f"{response.status_code}", endpoint=self.client.endpoint)  # fmt: skip
            try:
                for line in response.iter_lines(chunk_size=None):
                    if line.strip():
                        self._handle(json.loads(line))
            except requests.exceptions.ConnectionError as exc:
                if any(type(cause).__name__ == "ReadTimeoutError" for cause in exc.args):
                    return  # idle past idle_timeout: reopen from next_revision (a silent peer looks alike)
                raise
        finally:
            with self._response_lock:
                self._response = None
            response.close()

    def _handle(self, chunk: dict[str, Any]) -> None:
        if "error" in chunk:
            raise EtcdUnavailableError(f"etcd watch stream error: {chunk['error']}", endpoint=self.client.endpoint)
        result = chunk.get("result") or {}
        compacted = int(result.get("compact_revision", 0) or 0)
        if compacted:
            raise EtcdCompactedError(f"etcd compacted revisions before {compacted}; the watch of {self.key!r} "
                                     f"needed {self.next_revision}", endpoint=self.client.endpoint,
                                     compact_revision=compacted)  # fmt: skip
        if result.get("canceled"):
            raise EtcdUnavailableError(f"etcd canceled the watch of {self.key!r}: {result.get('cancel_reason', '')}",
                                       endpoint=self.client.endpoint)  # fmt: skip
        if result.get("created"):
            self.connected = True
            if not self.next_revision:
                self.next_revision = int((result.get("header") or {}).get("revision", 0)) + 1
            return
        events = []
        for raw in result.get("events") or ():
            kv = KeyValue.from_json(raw.get("kv") or {})
            if kv.mod_revision >= self.next_revision:  # anything older was delivered before a reconnect
                events.append(Event("DELETE" if raw.get("type") == "DELETE" else "PUT", kv))
        if not events:
            return  # a progress notice, or a batch delivered before
        revision = max(e.revision for e in events)
        self.next_revision = revision + 1
        self._deliver(WatchBatch(tuple(events), revision))

    def _resync(self) -> None:
        if self.prefix:
            kvs, revision = self.client.get_prefix(self.key)
        else:
            kv, revision = self.client.get(self.key)
            kvs = [] if kv is None else [kv]
        self.resyncs += 1
        self.next_revision = revision + 1
        self._deliver(WatchBatch((), revision, tuple(kvs)))

    def _deliver(self, batch: WatchBatch) -> None:
        try:
            self.on_batch(batch)
        except Exception:  # the consumer's failure must not end the watch
            log.exception("etcd watch on %r: the consumer failed on revision %d", self.key, batch.revision)

    def stop(self) -> None:
        """End the watch (closes its stream; returns once the thread has ended)."""
        self._stop.set()
        with self._response_lock:
            response = self._response
        if response is not None:
            _shut(response)
        if threading.current_thread() is not self._thread:
            self._thread.join()


def _shut(response: Any) -> None:
    """Interrupt a thread blocked reading ``response``'s stream: shut its socket down."""
    sock = getattr(getattr(response.raw, "connection", None), "sock", None)
    try:
        if sock is not None:
            sock.shutdown(socket.SHUT_RDWR)
        else:
            response.close()
    except OSError:
        pass
