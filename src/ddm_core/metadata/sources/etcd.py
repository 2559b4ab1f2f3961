"""A configuration source on etcd: numbered versions and an active-version pointer flipped in one transaction
(docs/configuration.md#etcd-config-center).

The rules of :class:`~ddm_core.metadata.sources.redis.RedisSource`, on etcd:

* **Keys** (prefix ``/ddm/config`` by default): ``<prefix>/versions/<N>`` (N zero-padded to
  ten digits, so keys sort as numbers) holds one version as JSON — ``body``, ``checksum``,
  ``created``, ``group`` — never changed once written; ``<prefix>/last_version`` the highest
  number handed out; ``<prefix>/active_version`` the number everyone serves;
  ``<prefix>/groups/<g>/active_version`` the number a rollout group serves.
* **Flips are transactions.** :meth:`EtcdSource.publish` writes version N, ``last_version`` and
  the pointer in one etcd transaction that compares ``last_version``'s revision (no two
  publishers get one number) and, with ``expect_version``, the pointer's value (compare-and-swap
  on the version the caller saw). A rollback flips the pointer back to an earlier version
  (no new version is written); a promote flips everyone's pointer to a group's version and
  removes the group's pointer, in one transaction.
* **A corrupt version never replaces the serving one**: its checksum is verified on every fetch,
  and a pointer older (by etcd revision) than one already read is refused, as a
  :class:`~ddm_core.errors.ConfigRowError` the holder keeps serving through.
* **A group's pointer wins** for the instances of that group while it exists (a canary stays on
  its version whatever everyone else is flipped to); :meth:`promote` ends the stage.
* **Following**: :meth:`EtcdSource.follow` watches the pointer(s) from the revision the holder's
  version was read at and reloads the holder on each flip; the watch resumes after a dropped
  stream from its last revision + 1 and re-reads the pointer after a compaction
  (:class:`~ddm_core.metadata.sources.etcd_client.Watch`). The holder polls as well, so it notices
  when etcd becomes unreachable (it keeps serving, and says so in ``last_error``).
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import threading
import urllib.parse
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from ddm_core.errors import (
    ConfigError,
    ConfigPublishConflictError,
    ConfigRowError,
    EtcdError,
    EtcdUnavailableError,
    SourceUnavailableError,
)
from ddm_core.metadata.load import parse_config
from ddm_core.metadata.reload import ConfigHolder
from ddm_core.metadata.sources import Fetched
from ddm_core.metadata.sources.etcd_client import Compare, EtcdClient, KeyValue, Watch, delete_op, put_op, range_op
from ddm_core.metadata.sources.redis import check_group
from ddm_core.metadata.sources.table import check_publishable, checksum_of, version_problem

__all__ = ["EtcdSource", "EtcdVersion", "EtcdFollowing", "DEFAULT_PREFIX"]

log = logging.getLogger("ddm_core.metadata")

DEFAULT_PREFIX = "/ddm/config"
_T = TypeVar("_T")
_PUBLISH_ATTEMPTS = 20  # another publisher took the number we read: read it again


@dataclass(frozen=True, slots=True)
class EtcdVersion:
    """One stored version (for ``ddm config history``)."""

    version: int
    checksum: str
    created: str
    group: str = ""  # the group it was published for ("": everyone)
    active_for: tuple[str, ...] = ()  # "everyone" and/or the groups whose pointer names it


@dataclass(frozen=True, slots=True)
class _Pointer:
    version: int
    key: str  # which pointer named it (everyone's or the group's)
    mod_revision: int


class EtcdSource:
    """The version an active-version pointer on etcd names, as a :class:`~ddm_core.metadata.sources.ConfigSource`.

    Args:
        client: An :class:`~ddm_core.metadata.sources.etcd_client.EtcdClient`.
        prefix: The keys' prefix.
        name: Names the source in messages (default: the endpoint and prefix).
        group: The rollout group this instance belongs to (``None``: none).
    """

    def __init__(self, client: EtcdClient, *, prefix: str = DEFAULT_PREFIX, name: str | None = None,
                 group: str | None = None) -> None:  # fmt: skip
        if not prefix.strip("/") or any(c.isspace() for c in prefix):
            raise ConfigError(f"etcd configuration prefix {prefix!r} must be a non-empty key without spaces",
                              prefix=prefix)  # fmt: skip
        self.client = client
        self.prefix = prefix.rstrip("/")
        self.name = name or f"{client.endpoint}{self.prefix}"
        self.group = None if group is None else check_group(group)
        self.active_key = f"{self.prefix}/active_version"
        self._last_key = f"{self.prefix}/last_version"
        self._group_key = None if self.group is None else self.group_pointer(self.group)
        #: The etcd revision of the last successful read of the pointer(s): a follower watches from here.
        self.read_revision = 0
        self._newest_pointer_revision = 0
        self._reported: str | None = None

    @classmethod
    def from_url(cls, url: str, *, group: str | None = None, timeout: float = 5.0) -> "EtcdSource":
        """``etcd://host:port/<prefix>?group=<g>`` (the prefix defaults to ``/ddm/config``; ``group``
        given here wins over the URL's)."""
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("etcd", "etcds") or not parts.hostname:
            raise ConfigError(f"etcd configuration URL {url!r} must look like etcd://host:2379/ddm/config?group=canary",
                              url=url)  # fmt: skip
        try:
            port = parts.port or 2379
        except ValueError as exc:
            raise ConfigError(f"etcd configuration URL {url!r}: {exc}", url=url) from None
        options = urllib.parse.parse_qs(parts.query)
        unknown = sorted(set(options) - {"group"})
        if unknown:
            raise ConfigError(f"etcd configuration URL {url!r}: unknown option(s) {', '.join(unknown)} (only group)",
                              url=url)  # fmt: skip
        scheme = "https" if parts.scheme == "etcds" else "http"
        client = EtcdClient(f"{scheme}://{parts.hostname}:{port}", timeout=timeout)
        named = options.get("group")
        return cls(client, prefix=parts.path if parts.path.strip("/") else DEFAULT_PREFIX,
                   group=group if group is not None else (named[0] if named else None), name=url)  # fmt: skip

    @property
    def where(self) -> str:
        return f"etcd configuration {self.name!r}"

    def group_pointer(self, group: str) -> str:
        return f"{self.prefix}/groups/{check_group(group)}/active_version"

    def version_key(self, version: int) -> str:
        return f"{self.prefix}/versions/{version:010d}"

    def _call(self, what: str, work: Callable[[], _T]) -> _T:
        try:
            return work()
        except EtcdUnavailableError as exc:
            raise SourceUnavailableError(f"{self.where}: cannot {what}: etcd is unreachable ({exc.message})",
                                         source=self.name) from exc  # fmt: skip
        except EtcdError as exc:
            raise SourceUnavailableError(f"{self.where}: cannot {what}: {exc.message}", source=self.name) from exc

    def _number(self, kv: KeyValue) -> int:
        try:
            return int(kv.text)
        except ValueError:
            raise ConfigRowError(f"{self.where}: {kv.key} holds {kv.text[:40]!r}, not a version number",
                                 source=self.name) from None  # fmt: skip

    # -- ConfigSource ------------------------------------------------------------------------

    def pointer(self) -> _Pointer | None:
        """The pointer this instance follows (its group's while that exists, else everyone's), read at one revision."""
        if self._group_key is None:
            kv, revision = self._call("read the active version", lambda: self.client.get(self.active_key))
            found = [] if kv is None else [kv]
        else:
            keys = (self._group_key, self.active_key)
            result = self._call("read the active version",
                                lambda: self.client.txn([], [range_op(k) for k in keys]))  # fmt: skip
            found = [kvs[0] for kvs in (result.kvs(0), result.kvs(1)) if kvs]
            revision = result.revision
        self.read_revision = revision
        if not found:
            return None
        return _Pointer(self._number(found[0]), found[0].key, found[0].mod_revision)

    def changed(self, revision: str | None) -> bool:
        try:
            now = self.pointer()
        except (SourceUnavailableError, ConfigRowError):
            return True  # let fetch() report it
        return now is None or revision != f"{now.version}@{now.mod_revision}"

    def fetch(self) -> Fetched:
        now = self.pointer()
        if now is None:
            raise SourceUnavailableError(
                f"{self.where} holds no configuration version yet; publish one first (ddm config push)",
                source=self.name,
            )
        revision = f"{now.version}@{now.mod_revision}"
        if now.mod_revision < self._newest_pointer_revision:
            problem: str | None = (f"{now.key} was read at etcd revision {now.mod_revision}, older than one already "
                                   f"served ({self._newest_pointer_revision}): etcd restored from an old backup?")  # fmt: skip
        else:
            problem, body = self._stored(now.version)
        if problem is not None:
            if self._reported != revision:
                self._reported = revision
                log.error("%s: version %d refused: %s", self.where, now.version, problem)
            raise ConfigRowError(f"{self.where}: version {now.version} is refused, the serving version stays: "
                                 f"{problem}", source=self.name, version=now.version)  # fmt: skip
        self._newest_pointer_revision = now.mod_revision
        return Fetched(body, revision, f"{self.where} version {now.version}")

    def _stored(self, version: int) -> tuple[str | None, str]:
        """``(why it cannot be served or None, its body)`` of a stored version."""
        kv, _ = self._call("read a version", lambda: self.client.get(self.version_key(version)))
        if kv is None:
            return "it does not exist", ""
        try:
            fields = json.loads(kv.value)
            body, checksum = fields["body"], fields["checksum"]
        except (ValueError, KeyError, TypeError):
            return f"{kv.key} is not a stored version (JSON with body and checksum)", ""
        return version_problem(version, body, checksum, 0), body

    # -- publishing and history --------------------------------------------------------------

    def publish(self, body: str, *, expect_version: int | None = None, validate: bool = True,
                group: str | None = None) -> int:  # fmt: skip
        """Store ``body`` as the next version and flip the pointer (everyone's, or ``group``'s) to it.

        Args:
            expect_version: The version the pointer names now (compare-and-swap; 0: no version yet);
                ``None``: whatever it names.
            validate: Load ``body`` first and refuse an invalid configuration.
            group: Publish for this rollout group only (``None``: for everyone).

        Raises:
            ConfigValidationError: ``body`` is not a valid configuration.
            ConfigPublishConflictError: the pointer does not name ``expect_version``.
            SourceUnavailableError: etcd cannot be reached.
        """
        check_publishable(body, self.where, validate=validate, source=self.name)
        target = self.active_key if group is None else self.group_pointer(group)
        created = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        stored = json.dumps({"body": body, "checksum": checksum_of(body), "created": created, "group": group or ""})
        for _ in range(_PUBLISH_ATTEMPTS):
            last, _rev = self._call("read the last version number", lambda: self.client.get(self._last_key))
            number = (0 if last is None else self._number(last)) + 1
            compare = [Compare.mod_revision(self._last_key, 0 if last is None else last.mod_revision)]
            compare += self._expect(target, expect_version)
            result = self._call("publish a version", lambda: self.client.txn(  # noqa: B023
                compare, [put_op(self.version_key(number), stored), put_op(self._last_key, str(number)),  # noqa: B023
                          put_op(target, str(number))],  # noqa: B023
                [range_op(target)]))  # fmt: skip
            if result.succeeded:
                log.info("%s: published version %d%s", self.where, number, "" if group is None else f" for {group!r}")
                return number
            self._check_expected(target, result.kvs(0), expect_version)  # else: another publisher's number
        raise SourceUnavailableError(f"{self.where}: {_PUBLISH_ATTEMPTS} publishers raced for the next version "
                                     "number; publish again", source=self.name)  # fmt: skip

    def _expect(self, pointer_key: str, expect_version: int | None) -> list[Compare]:
        if expect_version is None:
            return []
        if expect_version == 0:
            return [Compare.absent(pointer_key)]
        return [Compare.value(pointer_key, str(expect_version))]

    def _check_expected(self, pointer_key: str, found: list[KeyValue], expect_version: int | None) -> None:
        current = self._number(found[0]) if found else 0
        if expect_version is not None and current != expect_version:
            raise ConfigPublishConflictError(
                f"{self.where}: {pointer_key} names version {current}, not {expect_version}; "
                "read the active version and try again",
                source=self.name, version=current,
            )  # fmt: skip

    def _flip(self, pointer_key: str, version: int, expect_version: int | None, *, what: str,
              also: tuple[dict[str, Any], ...] = (), guard: tuple[Compare, ...] = ()) -> None:  # fmt: skip
        """Point ``pointer_key`` at ``version`` (a stored, valid one) in one transaction, with ``also``
        done in it, if ``guard`` holds."""
        problem, body = self._stored(version)
        if problem is not None:
            raise ConfigRowError(f"{self.where}: version {version} cannot be {what}: {problem}",
                                 source=self.name, version=version)  # fmt: skip
        parse_config(body, origin=f"{self.where} version {version} (to be {what})", check_env=False)
        compare = [Compare.mod_revision(self.version_key(version), 0, "GREATER"), *guard,
                   *self._expect(pointer_key, expect_version)]  # fmt: skip
        result = self._call(f"flip {pointer_key}", lambda: self.client.txn(
            compare, [put_op(pointer_key, str(version)), *also], [range_op(pointer_key)]))  # fmt: skip
        if not result.succeeded:
            self._check_expected(pointer_key, result.kvs(0), expect_version)
            raise ConfigPublishConflictError(f"{self.where}: the pointers changed while version {version} was being "
                                             f"{what}; read them and try again", source=self.name,
                                             version=version)  # fmt: skip
        log.info("%s: %s now names version %d (%s)", self.where, pointer_key, version, what)

    def rollback(self, to_version: int, *, expect_version: int | None = None, group: str | None = None) -> int:
        """Flip the pointer (everyone's, or ``group``'s) back to ``to_version``; returns it."""
        target = self.active_key if group is None else self.group_pointer(group)
        self._flip(target, to_version, expect_version, what="rolled back to")
        return to_version

    def promote(self, group: str, *, expect_version: int | None = None) -> int:
        """Flip everyone's pointer to ``group``'s version and end the group's stage (one transaction); returns it.

        Raises:
            ConfigRowError: nothing was published for ``group``, or its version is unreadable.
        """
        key = self.group_pointer(group)
        kv, _ = self._call("read the group's version", lambda: self.client.get(key))
        if kv is None:
            raise ConfigRowError(f"{self.where}: nothing was published for group {group!r}; "
                                 "publish with --group first", source=self.name, group=group)  # fmt: skip
        version = self._number(kv)
        self._flip(self.active_key, version, expect_version, what="promoted", also=(delete_op(key),),
                   guard=(Compare.mod_revision(key, kv.mod_revision),))  # the group was not flipped meanwhile
        return version

    def history(self, limit: int = 20) -> list[EtcdVersion]:
        """The newest ``limit`` versions, newest first, with the pointers that name them."""
        kvs, _ = self._call("read the history", lambda: self.client.get_prefix(
            f"{self.prefix}/versions/", limit=limit, descending=True))  # fmt: skip
        pointers, _ = self._call("read the pointers", lambda: self.client.get_prefix(f"{self.prefix}/groups/"))
        active, _ = self._call("read the active version", lambda: self.client.get(self.active_key))
        naming: dict[int, list[str]] = {}
        for kv in ([active] if active is not None else []) + pointers:
            who = "everyone" if kv.key == self.active_key else kv.key[len(self.prefix) + 8:].split("/")[0]
            naming.setdefault(self._number(kv), []).append(who)
        out = []
        for kv in kvs:
            number = int(kv.key.rsplit("/", 1)[1])
            try:
                fields = json.loads(kv.value)
            except ValueError:
                fields = {}
            out.append(EtcdVersion(number, str(fields.get("checksum", "")), str(fields.get("created", "")),
                                   str(fields.get("group", "")), tuple(naming.get(number, ()))))  # fmt: skip
        return out

    def body_of(self, version: int) -> str:
        """The text of a stored version (checked against its checksum)."""
        problem, body = self._stored(version)
        if problem is not None:
            raise ConfigRowError(f"{self.where}: version {version} cannot be read: {problem}",
                                 source=self.name, version=version)  # fmt: skip
        return body

    # -- following ---------------------------------------------------------------------------

    def follow(self, holder: ConfigHolder, *, poll: float = 5.0, idle_timeout: float = 30.0) -> "EtcdFollowing":
        """Reload ``holder`` on every flip of the pointer(s) it follows; poll every ``poll`` seconds as well.

        The watch starts after the revision the holder's version was read at (from now when the
        holder started from its snapshot, the poll catching up), so a flip between the two is not lost.

        Returns:
            Call it to stop both; its attributes say how the watch fares.
        """
        start = self.read_revision + 1 if self.read_revision else 0
        keys = [self.active_key] + ([] if self._group_key is None else [self._group_key])
        lock = threading.Lock()

        def flipped(_batch: object) -> None:
            with lock:
                holder.reload()

        watches = [self.client.watch(key, flipped, start_revision=start, idle_timeout=idle_timeout) for key in keys]
        holder.watch(poll)
        return EtcdFollowing(holder, tuple(watches))

    def __repr__(self) -> str:
        return f"EtcdSource({self.name!r})"


class EtcdFollowing:
    """A running :meth:`EtcdSource.follow`: call it to stop; read it for health and metrics."""

    def __init__(self, holder: ConfigHolder, watches: tuple[Watch, ...]) -> None:
        self.holder = holder
        self.watches = watches

    @property
    def watching(self) -> bool:
        """Every pointer's watch stream is open (``False`` while etcd is down or frozen)."""
        return all(w.connected for w in self.watches)

    @property
    def reconnects(self) -> int:
        return sum(w.reconnects for w in self.watches)

    @property
    def resyncs(self) -> int:
        """How many times a compaction made a watch re-read its pointer."""
        return sum(w.resyncs for w in self.watches)

    def __call__(self) -> None:
        for watch in self.watches:
            watch.stop()
        self.holder.stop()
