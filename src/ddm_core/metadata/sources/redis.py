"""A configuration source on Redis: numbered versions, a pub/sub notice per version (docs/configuration.md#redis-config-center).

Many application instances point a :class:`~ddm_core.metadata.reload.ConfigHolder`
at the same Redis keys and see one configuration version. The rules of
:class:`~ddm_core.metadata.sources.table.TableSource`, on Redis:

* **Keys** (prefix ``ddm:config`` by default): ``<prefix>:latest`` holds
  ``"<version>:<checksum>"``; ``<prefix>:v:<n>`` is a hash (``body``,
  ``checksum``, ``created``) per version, never changed once written;
  ``<prefix>:history`` a sorted set of the version numbers; every new version
  is announced on the channel ``<prefix>:changes``.
* **Versions are monotonic.** :meth:`RedisSource.publish` runs one Lua script
  — atomic in Redis — that reads the newest version, refuses when it is not
  the expected one (compare-and-set), writes version + 1 and announces it. A
  rollback publishes an old version's content as a new version.
* **A corrupt newest version never replaces the serving one**: its checksum is
  recomputed on every fetch, and a newest version lower than one already seen
  is refused (:func:`~ddm_core.metadata.sources.table.version_problem`), as a
  :class:`~ddm_core.errors.ConfigRowError` the holder keeps serving through.
  A version that is not a valid configuration is refused by the holder, as
  for every source; :meth:`publish` validates before writing.
* **Snapshot**: the holder's local snapshot is the fallback when Redis is
  unreachable at start (``ConfigHolder(source, snapshot=...)``).
* **Notification**: :meth:`RedisSource.follow` subscribes to the channel and
  reloads the holder on each notice, and polls as well (a notice sent while
  an instance was disconnected is not replayed by Redis pub/sub).
* **Staged rollout**: a version published for a named *group*
  (``publish(body, group="canary")``) becomes ``<prefix>:latest:<group>``
  and reaches only the instances whose source names that group
  (``RedisSource(client, group="canary")``); they serve whichever of their
  group's newest and everyone's newest has the higher number.
  :meth:`RedisSource.promote` publishes the group's version for everyone, as a
  new version; to take a group back, publish a good version for it (or for
  everyone) again.

The metadata layer imports no client library: the caller passes a
``redis.Redis`` client (``redis.Redis.from_url(url)``). One Redis, not a
cluster (the script writes keys it computes).
"""

from __future__ import annotations

import datetime as _dt
import logging
import re
import threading
from dataclasses import dataclass
from typing import Any, Callable

from ddm_core.errors import ConfigError, ConfigPublishConflictError, ConfigRowError, SourceUnavailableError
from ddm_core.metadata.reload import ConfigHolder
from ddm_core.metadata.sources import Fetched
from ddm_core.metadata.sources.table import check_publishable, checksum_of, version_problem

__all__ = ["RedisSource", "RedisVersion", "DEFAULT_PREFIX"]

log = logging.getLogger("ddm_core.metadata")

DEFAULT_PREFIX = "ddm:config"

# KEYS: history, the key this version becomes the newest of (latest or a group's).
# ARGV: expected version ('' = any), body, checksum, version-key prefix, channel, created, group ('' = everyone).
# Numbers are global (the history's highest), so a group's version and everyone's are ordered.
_GROUP = re.compile(r"[A-Za-z0-9_.-]{1,64}")

_PUBLISH = """
local top = redis.call('ZREVRANGE', KEYS[1], 0, 0)
local current = 0
if top[1] then current = tonumber(top[1]) end
if ARGV[1] ~= '' and tonumber(ARGV[1]) ~= current then return {-1, current} end
local n = current + 1
redis.call('HSET', ARGV[4] .. n, 'body', ARGV[2], 'checksum', ARGV[3], 'created', ARGV[6], 'group', ARGV[7])
redis.call('ZADD', KEYS[1], n, n)
redis.call('SET', KEYS[2], n .. ':' .. ARGV[3])
redis.call('PUBLISH', ARGV[5], n)
return {n, current}
"""


@dataclass(frozen=True, slots=True)
class RedisVersion:
    """One stored version (for ``ddm config history``)."""

    version: int
    checksum: str
    created: str
    group: str = ""  # the group it was published for ("": everyone)


def _text(value: Any) -> str:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, (bytes, bytearray)) else str(value)


def check_group(group: str) -> str:
    if not _GROUP.fullmatch(group):
        raise ConfigError(f"configuration rollout group {group!r} must be 1-64 letters, digits, '_', '.' or '-'",
                          group=group)  # fmt: skip
    return group


class RedisSource:
    """The newest version under a Redis key prefix, as a :class:`~ddm_core.metadata.sources.ConfigSource`.

    Args:
        client: A ``redis.Redis`` client (bytes or decoded responses).
        prefix: The keys' prefix.
        name: Names the source in messages (default: the prefix).
        group: The rollout group this instance belongs to (``None``: none);
            it also serves versions published for that group.
    """

    def __init__(self, client: Any, *, prefix: str = DEFAULT_PREFIX, name: str | None = None,
                 group: str | None = None) -> None:  # fmt: skip
        if not prefix or any(c.isspace() for c in prefix):
            raise ConfigError(f"Redis configuration prefix {prefix!r} must be a non-empty key without spaces",
                              prefix=prefix)  # fmt: skip
        self.client = client
        self.prefix = prefix
        self.name = name or prefix
        self.group = None if group is None else check_group(group)
        self.channel = f"{prefix}:changes"
        self._latest_key = f"{prefix}:latest"
        # What this instance reads: everyone's newest, then its group's.
        self._read_keys = [self._latest_key] + ([] if self.group is None else [self._group_key(self.group)])
        self._history_key = f"{prefix}:history"
        self._highest = 0
        self._reported: str | None = None

    @property
    def where(self) -> str:
        return f"Redis configuration {self.name!r}"

    def _version_key(self, version: int) -> str:
        return f"{self.prefix}:v:{version}"

    def _group_key(self, group: str) -> str:
        return f"{self._latest_key}:{group}"

    def _call(self, what: str, work: Callable[[], Any]) -> Any:
        try:
            return work()
        except Exception as exc:  # the client's errors have no base class the metadata layer can import
            raise SourceUnavailableError(f"{self.where}: cannot {what}: {exc}", source=self.name) from exc

    # -- ConfigSource ------------------------------------------------------------------------

    def latest(self) -> tuple[int, str] | None:
        """``(version, checksum)`` of the newest version this instance serves, or ``None`` when nothing was published.

        With a group: the higher of everyone's newest and the group's newest (one round trip).
        """
        raws = self._call("read the newest version", lambda: self.client.mget(self._read_keys))
        found = [self._parse_latest(key, raw) for key, raw in zip(self._read_keys, raws) if raw is not None]
        return max(found) if found else None

    def _parse_latest(self, key: str, raw: Any) -> tuple[int, str]:
        number, _, checksum = _text(raw).partition(":")
        try:
            return int(number), checksum
        except ValueError:
            raise ConfigRowError(f"{self.where}: {key} holds {_text(raw)[:40]!r}, not '<version>:<checksum>'",
                                 source=self.name) from None  # fmt: skip

    def changed(self, revision: str | None) -> bool:
        try:
            newest = self.latest()
        except (SourceUnavailableError, ConfigRowError):
            return True  # let fetch() report it
        return newest is None or revision != f"{newest[0]}:{newest[1]}"

    def fetch(self) -> Fetched:
        newest = self.latest()
        if newest is None:
            raise SourceUnavailableError(
                f"{self.where} holds no configuration version yet; publish one first (ddm config push)",
                source=self.name,
            )
        version, _ = newest
        stored = self._call("read a version", lambda: self.client.hgetall(self._version_key(version)))
        fields = {_text(k): v for k, v in (stored or {}).items()}
        body, checksum = fields.get("body"), _text(fields.get("checksum", ""))
        problem = "it is missing" if body is None else version_problem(version, body, checksum, self._highest)
        if problem is not None:
            revision = f"{version}:{checksum}"
            if self._reported != revision:
                self._reported = revision
                log.error("%s: version %d refused: %s", self.where, version, problem)
            raise ConfigRowError(f"{self.where}: version {version} is refused, the serving version stays: {problem}",
                                 source=self.name, version=version)  # fmt: skip
        self._highest = max(self._highest, version)
        return Fetched(_text(body), f"{version}:{checksum}", f"{self.where} version {version}")

    # -- publishing and history --------------------------------------------------------------

    def publish(self, body: str, *, expect_version: int | None = None, validate: bool = True,
                group: str | None = None) -> int:  # fmt: skip
        """Store ``body`` as the next version and announce it; returns that version.

        Args:
            expect_version: The newest version number (anyone's, any group's) this one follows
                (compare-and-set); ``None``: whatever is newest.
            validate: Load ``body`` first and refuse an invalid configuration (environment
                variables are not checked: the publisher may not have the application's secrets).
            group: Publish for this rollout group only (``None``: for everyone).

        Raises:
            ConfigValidationError: ``body`` is not a valid configuration.
            ConfigPublishConflictError: the newest version is not ``expect_version``.
            SourceUnavailableError: Redis cannot be reached.
        """
        check_publishable(body, self.where, validate=validate, source=self.name)
        target = self._latest_key if group is None else self._group_key(check_group(group))
        created = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        args = ("" if expect_version is None else str(expect_version), body, checksum_of(body),
                f"{self.prefix}:v:", self.channel, created, group or "")  # fmt: skip
        result = self._call("publish a version", lambda: self.client.eval(
            _PUBLISH, 2, self._history_key, target, *args))  # fmt: skip
        version, current = int(result[0]), int(result[1])
        if version < 0:
            raise ConfigPublishConflictError(
                f"{self.where}: the newest version is {current}, not {expect_version}; "
                "read the newest version and publish again",
                source=self.name, version=current,
            )  # fmt: skip
        log.info("%s: published version %d%s", self.where, version, "" if group is None else f" for group {group!r}")
        return version

    def promote(self, group: str, *, expect_version: int | None = None) -> int:
        """Publish the newest version of ``group`` for everyone, as a new version; returns it.

        Raises:
            ConfigRowError: nothing was published for ``group``, or its version is unreadable.
        """
        key = self._group_key(check_group(group))
        raw = self._call("read the group's newest version", lambda: self.client.get(key))
        if raw is None:
            raise ConfigRowError(f"{self.where}: nothing was published for group {group!r}; "
                                 "publish with --group first", source=self.name, group=group)  # fmt: skip
        version, _ = self._parse_latest(key, raw)
        return self.publish(self.body_of(version), expect_version=expect_version, validate=True)

    def history(self, limit: int = 20) -> list[RedisVersion]:
        """The newest ``limit`` versions, newest first."""
        numbers = self._call("read the history", lambda: self.client.zrevrange(self._history_key, 0, limit - 1))
        out = []
        for raw in numbers:
            key = self._version_key(int(_text(raw)))
            fields = self._call("read a version", lambda: self.client.hmget(key, "checksum", "created", "group"))  # noqa: B023
            out.append(RedisVersion(int(_text(raw)), *(_text(f or "") for f in fields)))
        return out

    def body_of(self, version: int) -> str:
        """The text of a stored version (checked against its checksum).

        Raises:
            ConfigRowError: no such version, or it does not match its checksum.
        """
        stored = self._call("read a version", lambda: self.client.hgetall(self._version_key(version)))
        fields = {_text(k): v for k, v in (stored or {}).items()}
        body = fields.get("body")
        problem = "it does not exist" if body is None else version_problem(
            version, body, _text(fields.get("checksum", "")), 0)  # fmt: skip
        if problem is not None:
            raise ConfigRowError(f"{self.where}: version {version} cannot be read: {problem}",
                                 source=self.name, version=version)  # fmt: skip
        return _text(body)

    def rollback(self, to_version: int, *, expect_version: int | None = None) -> int:
        """Publish version ``to_version``'s content again, as a new version (versions never go back)."""
        return self.publish(self.body_of(to_version), expect_version=expect_version, validate=True)

    # -- following ---------------------------------------------------------------------------

    def follow(self, holder: ConfigHolder, *, poll: float = 1.0) -> Callable[[], None]:
        """Reload ``holder`` on every version notice, and poll every ``poll`` seconds as well.

        Returns:
            A function that stops both.
        """
        stop = threading.Event()

        def listen() -> None:
            while not stop.is_set():
                pubsub = None
                try:
                    pubsub = self.client.pubsub(ignore_subscribe_messages=True)
                    pubsub.subscribe(self.channel)
                    holder.reload()  # anything published while not subscribed
                    while not stop.is_set():
                        message = pubsub.get_message(timeout=0.5)
                        if message is not None and message.get("type") == "message":
                            holder.reload()
                except Exception:  # Redis went away: the poll keeps the holder current meanwhile
                    log.warning("%s: notifications lost, subscribing again", self.where, exc_info=True)
                    stop.wait(poll)
                finally:
                    if pubsub is not None:
                        try:
                            pubsub.close()
                        except Exception:  # closing a broken connection must not end the loop
                            pass

        thread = threading.Thread(target=listen, name="ddm-config-redis", daemon=True)
        thread.start()
        holder.watch(poll)

        def stop_following() -> None:
            stop.set()
            thread.join()
            holder.stop()

        return stop_following

    def __repr__(self) -> str:
        return f"RedisSource({self.prefix!r})"
