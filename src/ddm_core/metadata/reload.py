"""Hot reload: versions swapped atomically, bad versions refused, data never moved, a local snapshot.

A :class:`ConfigHolder` keeps the current :class:`ConfigVersion` in one
attribute. A reload fetches the source, validates the new text completely
and only then replaces that attribute — one reference assignment, atomic in
CPython — so a reader that takes ``holder.current`` once sees one whole
version, never a mix; readers take no lock. A version that fails validation is
refused: the old one keeps serving and :attr:`ConfigHolder.last_error` (and the
:class:`ReloadResult`) say why. Versions are numbered; each good one is
written to a local snapshot file, and when the source is unreachable at start
the holder starts from that snapshot instead of refusing to start.

A reload may change runtime settings, pools, replicas and weights, never
where data lives (see :mod:`ddm_core.metadata.placement`): a version that
would move data is refused with a :class:`~ddm_core.errors.PlacementChangeError`
naming each table and what moved, and the serving version stays. Placement
changes come only as migration steps, through
:meth:`ConfigHolder.publish` (or :meth:`ConfigHolder.reload`) with
``allow_placement_change=True`` — what the resharding engine calls once the
rows are where the new version says — or announced: a version carrying a
``migration:`` block names its target, and the version placing data exactly as
that target is taken (:func:`~ddm_core.metadata.placement.check_reload_placement`).
:attr:`ConfigHolder.confirmed_at` says when the source last confirmed the
serving version (routers fence a migration's writes on it).

The holder reads any :class:`~ddm_core.metadata.sources.ConfigSource` (a file,
a database table, Redis: :mod:`ddm_core.metadata.sources`); fetch raises
:class:`SourceUnavailableError` when it cannot reach its backend.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal, Mapping

from ddm_core.errors import ConfigError, PlacementChangeError, SourceUnavailableError
from ddm_core.metadata.dump import dump_native
from ddm_core.metadata.load import digest_of, parse_config
from ddm_core.metadata.model import ShardingConfig
from ddm_core.metadata.placement import check_reload_placement, placement_changes
from ddm_core.metadata.sources import ConfigSource, Fetched
from ddm_core.metadata.sources.file import FileSource

__all__ = [
    "SourceUnavailableError",
    "PlacementChangeError",
    "ConfigVersion",
    "ReloadResult",
    "ConfigHolder",
    "SNAPSHOT_FORMAT",
]

log = logging.getLogger("ddm_core.metadata")

SNAPSHOT_FORMAT = 1


@dataclass(frozen=True, slots=True)
class ConfigVersion:
    """One numbered, validated configuration.

    Attributes:
        number: 1, 2, 3... (continues the snapshot's numbering across restarts).
        config: The configuration itself.
        digest: SHA-256 of the source content.
        loaded_at: ``time.time()`` when it became current.
        origin: Where it came from.
        from_snapshot: Loaded from the local snapshot (the source was unreachable).
        revision: The source's change token for it (``"<version>:<checksum>"`` on the
            table and Redis sources; ``""`` from a snapshot or :meth:`ConfigHolder.publish`):
            the instance registry reports the source's version number from it.
    """

    number: int
    config: ShardingConfig
    digest: str
    loaded_at: float
    origin: str
    from_snapshot: bool = False
    revision: str = ""


@dataclass(frozen=True, slots=True)
class ReloadResult:
    """What one :meth:`ConfigHolder.reload` did.

    Attributes:
        status: ``"updated"``, ``"unchanged"``, ``"rejected"`` (invalid, or it
            would move data; the old version keeps serving) or ``"unreachable"``.
        version: The version serving after the call.
        error: Why it was rejected / unreachable.
    """

    status: Literal["updated", "unchanged", "rejected", "unreachable"]
    version: ConfigVersion
    error: ConfigError | None = None

    @property
    def updated(self) -> bool:
        return self.status == "updated"


Listener = Callable[[ConfigVersion, ConfigVersion], None]


class ConfigHolder:
    """Holds the current configuration version; reloads it safely.

    Reading is lock-free: ``v = holder.current`` then use ``v.config`` (take it
    once per unit of work so one statement sees one version throughout).
    Reloads never move data; :meth:`publish` with ``allow_placement_change=True``
    is the one way a migration step changes placement.

    Args:
        source: A :class:`ConfigSource` (or a path, wrapped in :class:`FileSource`).
        snapshot: File for the local snapshot of the last good version
            (``None``: the configuration's ``metadata.failoverSnapshot`` if it
            names one, else no snapshot). Only an explicit path can be read
            back at start: before the first load nothing names the file.
        format: Force ``"native"`` or ``"shardingsphere"`` (else detected).
        check_env: Check environment-variable credentials at load.

    Raises:
        ConfigValidationError: the source is reachable but its configuration
            is invalid (fail fast at start), or the snapshot used is invalid.
        SourceUnavailableError: the source is unreachable and there is no
            usable snapshot.
    """

    def __init__(
        self,
        source: ConfigSource | str | os.PathLike[str],
        *,
        snapshot: str | os.PathLike[str] | None = None,
        format: str | None = None,
        check_env: bool = True,
    ) -> None:
        self.source: ConfigSource = FileSource(source) if isinstance(source, (str, os.PathLike)) else source
        self.snapshot_path = Path(snapshot) if snapshot is not None else None
        self.format = format
        self.check_env = check_env
        self.last_error: ConfigError | None = None
        self.snapshot_error: OSError | None = None
        self._lock = threading.RLock()  # serializes reloads; readers never take it
        self._listeners: list[Listener] = []
        self._revision: str | None = None
        self._rejected_digest: str | None = None
        self._watch_stop: threading.Event | None = None
        self._watcher: threading.Thread | None = None
        #: ``time.monotonic()`` of the last check that reached the source and found the serving
        #: version current (a fetch, or ``changed()`` saying "no change"); ``-inf`` before any,
        #: e.g. after starting from the snapshot. Routers fence migrating writes on it.
        self.confirmed_at: float = float("-inf")
        self._serve(self._start())

    # -- reading ---------------------------------------------------------------------

    @property
    def current(self) -> ConfigVersion:
        """The serving version (one atomic read)."""
        return self._current

    def _serve(self, version: ConfigVersion) -> None:
        """Serve ``version``: ``config`` is its configuration, kept as a plain attribute (read for every routed
        statement: no property call), set right after the version (one reference assignment each)."""
        self._current = version
        #: Shortcut for ``current.config``.
        self.config: ShardingConfig = version.config

    @property
    def version(self) -> int:
        return self._current.number

    # -- start -------------------------------------------------------------------------

    def _start(self) -> ConfigVersion:
        snap = self._read_snapshot()
        try:
            fetched = self.source.fetch()
        except SourceUnavailableError as exc:
            if snap is None:
                raise SourceUnavailableError(
                    f"{exc.message}; and no usable snapshot"
                    + (f" at {str(self.snapshot_path)!r}" if self.snapshot_path else " is configured"),
                    **exc.context,
                ) from exc
            self.last_error = exc
            log.warning(
                "configuration source unreachable (%s); starting from snapshot %s version %s",
                exc.message,
                self.snapshot_path,
                snap["version"],
            )
            config = parse_config(
                snap["content"],
                origin=f"snapshot {self.snapshot_path} of {snap['origin']}",
                format=snap.get("format") or self.format,
                base_dir=Path(snap["base_dir"]) if snap.get("base_dir") else None,
                check_env=self.check_env,
            )
            return ConfigVersion(
                int(snap["version"]), config, snap["digest"], time.time(), snap["origin"], True
            )
        config = self._parse(fetched)
        self.confirmed_at = time.monotonic()
        digest = digest_of(fetched.content)
        number = 1 if snap is None else int(snap["version"]) + (0 if snap["digest"] == digest else 1)
        version = ConfigVersion(number, config, digest, time.time(), fetched.origin, revision=fetched.revision)
        self._revision = fetched.revision
        self._write_snapshot(version, fetched)
        return version

    def _parse(self, fetched: Fetched) -> ShardingConfig:
        return parse_config(
            fetched.content,
            origin=fetched.origin,
            format=self.format,
            base_dir=fetched.base_dir,
            check_env=self.check_env,
        )

    # -- reload ----------------------------------------------------------------------------

    def reload(self, *, force: bool = False, allow_placement_change: bool = False) -> ReloadResult:
        """Fetch the source; if it changed and is valid, make it the current version.

        Args:
            force: Fetch even when the source reports no change.
            allow_placement_change: This reload is a migration step: the source
                now holds a version that moves data, and the data has been moved.
                A version refused earlier only for moving data is taken now.
                Never set it in a watcher or an ordinary reload.

        Returns:
            What happened; an invalid or unreachable source, or one that would
            move data (a :class:`~ddm_core.errors.PlacementChangeError`), leaves
            the current version serving and is reported in the result and
            :attr:`last_error`.
        """
        with self._lock:
            current = self._current
            retry = allow_placement_change and isinstance(self.last_error, PlacementChangeError)
            if not force and not retry and not current.from_snapshot and not self.source.changed(self._revision):
                if self._rejected_digest is not None and self.last_error is not None:
                    return ReloadResult("rejected", current, self.last_error)  # the source still holds it
                self.confirmed_at = time.monotonic()
                return ReloadResult("unchanged", current)
            try:
                fetched = self.source.fetch()
            except SourceUnavailableError as exc:
                self.last_error = exc
                return ReloadResult("unreachable", current, exc)
            digest = digest_of(fetched.content)
            if digest == current.digest:
                self.confirmed_at = time.monotonic()
                self._revision = fetched.revision
                self._rejected_digest = None
                if current.from_snapshot:  # the source is back with the same content
                    self._serve(ConfigVersion(
                        current.number, current.config, digest, current.loaded_at, fetched.origin,
                        revision=fetched.revision,
                    ))
                    self.last_error = None
                return ReloadResult("unchanged", self._current)
            if digest == self._rejected_digest and not force and not retry and self.last_error is not None:
                self._revision = fetched.revision
                return ReloadResult("rejected", current, self.last_error)
            try:
                config = self._parse(fetched)
                if not allow_placement_change:
                    check_reload_placement(current.config, config, fetched.origin)
            except ConfigError as exc:
                self._revision = fetched.revision
                self._rejected_digest = digest
                self.last_error = exc
                log.error(
                    "configuration %s rejected; version %d keeps serving:\n%s",
                    fetched.origin,
                    current.number,
                    exc.message,
                )
                return ReloadResult("rejected", current, exc)
            self._revision = fetched.revision
            self._rejected_digest = None
            self.last_error = None
            self.confirmed_at = time.monotonic()
            return self._install(current, config, digest, fetched, migration=allow_placement_change)

    def publish(
        self,
        config: ShardingConfig | str | Mapping[str, Any],
        *,
        allow_placement_change: bool = False,
        origin: str = "<published>",
        base_dir: str | os.PathLike[str] | None = None,
    ) -> ReloadResult:
        """Make ``config`` the current version directly (not from the source).

        This is the migration API: a resharding step that has moved the rows
        publishes the configuration saying where they are now, with
        ``allow_placement_change=True``. Without it, ``config`` is held to the
        hot-reload rule and may not move data. The source is left alone: until
        it is updated to the new placement too, a reload from it is refused.

        Args:
            config: A loaded configuration, or YAML text / a mapping (validated
                here, like a source's content).
            allow_placement_change: Accept a version that moves data (logged
                with every change at WARNING).
            origin: Names this version in messages and the snapshot.
            base_dir: Directory relative SQLite paths in text resolve against.

        Returns:
            ``"updated"``, or ``"unchanged"`` when it equals the serving version.

        Raises:
            ConfigValidationError: ``config`` is text or a mapping and invalid.
            PlacementChangeError: it would move data and ``allow_placement_change``
                is false. The serving version stays in either case.
        """
        parsed: ShardingConfig | None = None
        content: str | Mapping[str, Any]
        if isinstance(config, ShardingConfig):
            # Written back in the native format, so the snapshot can load it again.
            parsed, content = config, dump_native(config, secrets="keep")
        else:
            content = config
        fetched = Fetched(content, "", origin, Path(base_dir) if base_dir is not None else None)
        with self._lock:
            current = self._current
            digest = digest_of(content)
            if digest == current.digest or (parsed is not None and parsed == current.config):
                return ReloadResult("unchanged", current)
            if parsed is None:
                parsed = self._parse(fetched)
            if not allow_placement_change:
                check_reload_placement(current.config, parsed, origin)
            return self._install(current, parsed, digest, fetched, migration=allow_placement_change)

    def _install(
        self, current: ConfigVersion, config: ShardingConfig, digest: str, fetched: Fetched, *, migration: bool
    ) -> ReloadResult:
        new = ConfigVersion(current.number + 1, config, digest, time.time(), fetched.origin, revision=fetched.revision)
        moved = placement_changes(current.config, config) if migration else ()
        self._serve(new)  # the swap: one reference assignment
        if moved:
            log.warning(
                "configuration version %d from %s moves data as a migration step:\n%s",
                new.number,
                fetched.origin,
                "\n".join(f"  - {c}" for c in moved),
            )
        log.info("configuration version %d loaded from %s", new.number, fetched.origin)
        self._write_snapshot(new, fetched)
        for listener in list(self._listeners):
            try:
                listener(new, current)
            except Exception:  # a listener must not undo a good reload
                log.exception("configuration listener %r failed", listener)
        return ReloadResult("updated", new)

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(new, old)`` after each update; returns an unsubscribe function."""
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    # -- watching ------------------------------------------------------------------------------

    def watch(self, interval: float = 1.0) -> None:
        """Poll the source every ``interval`` seconds in a daemon thread (until :meth:`stop`)."""
        with self._lock:
            if self._watcher is not None:
                return
            stop = threading.Event()
            self._watch_stop = stop

            def loop() -> None:
                while not stop.wait(interval):
                    try:
                        self.reload()
                    except Exception:  # keep watching whatever one poll did
                        log.exception("configuration reload failed")

            self._watcher = threading.Thread(target=loop, name="ddm-config-watch", daemon=True)
            self._watcher.start()

    def stop(self) -> None:
        """Stop watching (no-op when not watching)."""
        with self._lock:
            stop, watcher = self._watch_stop, self._watcher
            self._watch_stop = self._watcher = None
        if stop is not None:
            stop.set()
        if watcher is not None:
            watcher.join()

    def __enter__(self) -> "ConfigHolder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- snapshot ------------------------------------------------------------------------------

    def _read_snapshot(self) -> dict[str, Any] | None:
        path = self.snapshot_path
        if path is None or not path.exists():
            return None
        try:
            data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
            if (
                not isinstance(data, dict)
                or data.get("ddm_snapshot") != SNAPSHOT_FORMAT
                or not isinstance(data.get("version"), int)
            ):
                raise ValueError("not a ddm-core snapshot")
            for key in ("digest", "origin", "content"):
                if key not in data:
                    raise ValueError(f"missing {key!r}")
            return data
        except (OSError, ValueError) as exc:
            log.warning("ignoring unreadable configuration snapshot %s: %s", path, exc)
            return None

    def _write_snapshot(self, version: ConfigVersion, fetched: Fetched) -> None:
        path = self.snapshot_path
        if path is None and version.config.metadata.failover_snapshot:
            path = Path(version.config.metadata.failover_snapshot)  # metadata.failoverSnapshot
        if path is None:
            return
        data = {
            "ddm_snapshot": SNAPSHOT_FORMAT,
            "version": version.number,
            "digest": version.digest,
            "origin": version.origin,
            "format": version.config.origin.format if version.config.origin else None,
            "base_dir": str(fetched.base_dir) if fetched.base_dir else None,
            "saved_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "content": fetched.content if isinstance(fetched.content, str) else dict(fetched.content),
        }
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
            try:
                with os.fdopen(
                    fd, "w", encoding="utf-8"
                ) as fh:  # mkstemp: mode 0600, credentials stay private
                    json.dump(data, fh, ensure_ascii=False, indent=1, default=str)
                os.replace(tmp, path)  # atomic: a crash leaves the old snapshot or the new one
            except BaseException:
                os.unlink(tmp)
                raise
            self.snapshot_error = None
        except OSError as exc:
            self.snapshot_error = exc
            log.warning("could not write configuration snapshot %s: %s", path, exc)
