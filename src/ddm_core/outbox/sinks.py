"""Where the relay delivers: any callable taking a :class:`Message`, and the Redis Streams sink.

A sink raises to say "not delivered" (the message is retried later); returning
means delivered. A sink may also offer ``deliver_many(messages)`` returning one
``None`` (delivered) or exception per message, in order: the relay then hands
it a whole batch at once (the Redis sink pipelines its XADDs that way).
"""

from __future__ import annotations

import json
import sys
from typing import Any, Callable, Protocol, Sequence, TextIO, runtime_checkable
from urllib.parse import parse_qs, urlsplit

from ddm_core._extras import require_extra
from ddm_core.errors import ConfigError
from ddm_core.outbox.message import Message

__all__ = ["Sink", "BatchSink", "RedisStreamSink", "StdoutSink", "sink_from_spec", "deliver_batch"]

Sink = Callable[[Message], Any]


@runtime_checkable
class BatchSink(Protocol):
    """A sink that takes a batch: one ``None`` or exception per message, in order."""

    def deliver_many(self, messages: Sequence[Message]) -> Sequence[BaseException | None]: ...


def deliver_batch(sink: Sink, messages: Sequence[Message]) -> list[BaseException | None]:
    """Deliver ``messages`` through ``sink``: per message, ``None`` if delivered, else the exception."""
    if isinstance(sink, BatchSink):
        try:
            outcome = list(sink.deliver_many(messages))
        except Exception as exc:  # the whole batch failed (connection lost)
            return [exc] * len(messages)
        if len(outcome) != len(messages):
            err = RuntimeError(f"sink {sink!r} answered {len(outcome)} outcomes for {len(messages)} messages")
            return [err] * len(messages)
        return outcome
    results: list[BaseException | None] = []
    for message in messages:
        try:
            sink(message)
        except Exception as exc:  # any failure of the sink is a failed delivery, retried later
            results.append(exc)
        else:
            results.append(None)
    return results


class RedisStreamSink:
    """``XADD <prefix><topic> * id <message_id> key <key> payload <payload> ...`` per message.

    Args:
        client: A ``redis.Redis`` client (``redis`` package, the ``redis`` extra).
        prefix: Put before the topic to name the stream.
        maxlen: Trim each stream to about this many entries (``XADD MAXLEN ~``); ``None``: never.

    Every entry carries ``id`` (the message id, for the consumer's
    :func:`~ddm_core.outbox.consume_once`), ``topic``, ``key`` (empty when none),
    ``payload``, ``source`` (the data source) and ``created_ms``. A message may
    be added twice when a relay dies between XADD and marking it sent.
    """

    def __init__(self, client: Any, *, prefix: str = "", maxlen: int | None = None) -> None:
        if maxlen is not None and not (type(maxlen) is int and 1 <= maxlen <= 1 << 40):
            raise ConfigError(f"Redis sink maxlen must be an int from 1 to 2**40, not {maxlen!r}", field="maxlen")
        self.client = client
        self.prefix = prefix
        self.maxlen = maxlen

    @classmethod
    def from_url(cls, url: str, *, prefix: str = "", maxlen: int | None = None) -> RedisStreamSink:
        """A sink on ``redis://host:port/db`` (needs the ``redis`` package)."""
        require_extra("redis", needed_by=f"the Redis sink {url!r}")
        import redis

        return cls(redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5), prefix=prefix, maxlen=maxlen)

    def stream_of(self, topic: str) -> str:
        """The stream a topic's messages go to."""
        return f"{self.prefix}{topic}"

    def _fields(self, m: Message) -> dict[str, Any]:
        return {
            "id": m.message_id,
            "topic": m.topic,
            "key": m.key or "",
            "payload": m.payload,
            "source": m.data_source,
            "created_ms": m.created_ms,
        }

    def __call__(self, message: Message) -> None:
        self.client.xadd(self.stream_of(message.topic), self._fields(message), maxlen=self.maxlen, approximate=True)

    def deliver_many(self, messages: Sequence[Message]) -> list[BaseException | None]:
        pipe = self.client.pipeline(transaction=False)
        for m in messages:
            pipe.xadd(self.stream_of(m.topic), self._fields(m), maxlen=self.maxlen, approximate=True)
        replies = pipe.execute(raise_on_error=False)
        return [r if isinstance(r, BaseException) else None for r in replies]

    def close(self) -> None:
        self.client.close()

    def __repr__(self) -> str:
        return f"<RedisStreamSink prefix={self.prefix!r}>"


class StdoutSink:
    """One JSON line per message (payload decoded as UTF-8, replacing what is not): for trying things out."""

    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out

    def __call__(self, message: Message) -> None:
        out = self.out or sys.stdout
        line = {
            "id": message.message_id,
            "topic": message.topic,
            "key": message.key,
            "payload": message.payload.decode("utf-8", "replace"),
            "source": message.data_source,
        }
        out.write(json.dumps(line) + "\n")
        out.flush()


def sink_from_spec(spec: str) -> Sink:
    """The sink a ``--sink`` option names.

    * ``redis://host:port/db[?prefix=P&maxlen=N]`` (also ``rediss://``, ``unix://``): :class:`RedisStreamSink`;
    * ``stdout``: :class:`StdoutSink`.

    Raises:
        ConfigError: anything else, or a bad ``maxlen``.
        MissingExtraError: a Redis sink without the redis package (the ``redis`` extra).
    """
    if spec == "stdout":
        return StdoutSink()
    parts = urlsplit(spec)
    if parts.scheme in ("redis", "rediss", "unix"):
        query = parse_qs(parts.query)
        prefix = query.pop("prefix", [""])[-1]
        maxlen_text = query.pop("maxlen", [None])[-1]
        try:
            maxlen = None if maxlen_text is None else int(maxlen_text)
        except ValueError:
            raise ConfigError(f"--sink {spec!r}: maxlen={maxlen_text!r} is not an integer", field="sink") from None
        rest = "&".join(f"{k}={v}" for k, vs in query.items() for v in vs)
        url = parts._replace(query=rest).geturl()
        return RedisStreamSink.from_url(url, prefix=prefix, maxlen=maxlen)
    raise ConfigError(
        f"--sink {spec!r} is not a sink ddm knows: use redis://host:port/db[?prefix=...&maxlen=...] or stdout",
        field="sink",
    )
