"""A configuration source in a database table: ``ddm_config`` (version, body, checksum, created).

Every application instance points a :class:`~ddm_core.metadata.reload.ConfigHolder`
at the same table and polls it (``holder.watch(1.0)``), so one INSERT reaches
all of them; this is how a migration publishes each of its phases
(docs/migration.md#the-configuration-table). The table lives on a configured
data source; this module never opens connections itself (the metadata layer
imports no driver code): it is given a ``connect`` callable returning a DB-API
connection in autocommit mode — :func:`ddm_core.migrate.config_table_source`
builds one from a data source of a configuration.

The rules of :class:`~ddm_core.metadata.sources.file.FileSource`, for rows:

* **A version is one row, taken whole.** Publishing is an ``INSERT`` of the
  next version inside a transaction that reads the row back and compares its
  checksum before committing (:meth:`TableSource.publish`), so a body cut by
  the server (a non-strict ``sql_mode`` truncates long text with a warning) is
  never committed. Rows are never updated: a new version is a new row.
* **A corrupt or unreadable newest row never replaces the serving version.**
  :meth:`TableSource.fetch` recomputes the checksum (SHA-256 of the body, the
  same digest :class:`~ddm_core.metadata.reload.ConfigVersion` carries) and
  raises :class:`~ddm_core.errors.ConfigRowError` — a
  :class:`~ddm_core.errors.SourceUnavailableError`, so the holder keeps
  serving, reports it in :attr:`ConfigHolder.last_error` and the reload's
  result, and starts from its snapshot if it is the first fetch. So does a
  newest version lower than one already seen (a deleted row: publish the old
  content as a new version instead). The error is logged once per bad row.
* **Placement is the holder's rule, unchanged:** a version that moves data is
  refused by every watcher (:mod:`ddm_core.metadata.placement`).
* :meth:`TableSource.changed` is one primary-key lookup of the newest
  ``(version, checksum)``; the body is read only when that differs.
"""

from __future__ import annotations

import hashlib
import logging
import re
from typing import Any, Callable

from ddm_core.errors import ConfigError, ConfigPublishConflictError, ConfigRowError, SourceUnavailableError
from ddm_core.metadata.limits import MAX_DOCUMENT_BYTES
from ddm_core.metadata.load import parse_config
from ddm_core.metadata.sources import Fetched
from ddm_core.metadata.sources.kept_connection import KeptConnection

__all__ = ["TableSource", "DEFAULT_TABLE", "create_table_sql", "checksum_of", "version_problem", "check_publishable"]

log = logging.getLogger("ddm_core.metadata")

#: The table's default name.
DEFAULT_TABLE = "ddm_config"

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$]{0,63}")
# MEDIUMTEXT holds 16 MiB, well above MAX_DOCUMENT_BYTES; utf8mb4_bin keeps the bytes as written.
_CREATE = """CREATE TABLE IF NOT EXISTS `{table}` (
  version BIGINT UNSIGNED NOT NULL,
  body MEDIUMTEXT NOT NULL,
  checksum CHAR(64) CHARACTER SET ascii NOT NULL,
  created TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (version)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"""


def checksum_of(body: str) -> str:
    """The checksum a row carries: SHA-256 (hex) of the body's UTF-8 bytes (= ``digest_of(body)``)."""
    return hashlib.sha256(body.encode("utf-8", "surrogateescape")).hexdigest()


def check_publishable(body: str, where: str, *, validate: bool, **context: Any) -> None:
    """Refuse, before a versioned source stores it, a body over the size limit or (``validate``) an invalid one.

    Environment variables are not checked: the publisher may not have the application's secrets.

    Raises:
        ConfigError: larger than ``MAX_DOCUMENT_BYTES`` (``context`` names the source).
        ConfigValidationError: not a valid configuration.
    """
    size = len(body.encode("utf-8", "surrogateescape"))
    if size > MAX_DOCUMENT_BYTES:
        raise ConfigError(f"{where}: a configuration of {size} bytes is larger than {MAX_DOCUMENT_BYTES} bytes "
                          "(docs/config-limits.md)", **context)  # fmt: skip
    if validate:
        parse_config(body, origin=f"{where} (to publish)", check_env=False)


def version_problem(version: int, body: Any, checksum: Any, highest: int) -> str | None:
    """Why a stored version may not be served (``None``: it may), for any versioned source.

    Args:
        version: Its number; ``highest``: the highest this process fetched (versions never go back).
        body: The stored text (bytes are decoded as UTF-8); ``checksum``: what was stored with it.
    """
    if isinstance(body, (bytes, bytearray)):
        try:
            body = bytes(body).decode("utf-8")
        except UnicodeDecodeError as exc:
            return f"its body is not UTF-8 text (byte {exc.start})"
    if not isinstance(body, str):
        return f"its body is {type(body).__name__}, not text"
    if version < highest:
        return (
            f"the newest version went back from {highest} to {version} (a row was deleted?); "
            "to return to an earlier configuration, publish its content as a new version"
        )
    actual = checksum_of(body)
    if actual != checksum:
        return (
            f"its checksum {str(checksum)[:16]}... does not match its body ({len(body)} characters, "
            f"checksum {actual[:16]}...): the row was changed or cut after it was written"
        )
    return None


def create_table_sql(table: str = DEFAULT_TABLE) -> str:
    """``CREATE TABLE IF NOT EXISTS`` for the configuration table (MySQL / MariaDB)."""
    return _CREATE.format(table=_checked_name(table))


def _checked_name(table: str) -> str:
    if not _NAME.fullmatch(table):
        raise ConfigError(
            f"configuration table name {table!r} must be a plain identifier (letters, digits, _ and $; "
            "at most 64 characters)",
            table=table,
        )
    return table


class TableSource:
    """The newest row of a configuration table, as a :class:`~ddm_core.metadata.sources.ConfigSource`.

    Args:
        connect: Returns a new DB-API connection (MySQL / MariaDB, autocommit,
            ``%s`` placeholders) to the database holding the table. Called
            again after any failure; one connection is kept between polls.
        table: The table's name.
        name: Names the source in messages (``"ds_0"``, a URL); default the table.

    Thread-safe: the holder's watcher and a publisher may share one source.
    """

    def __init__(self, connect: Callable[[], Any], *, table: str = DEFAULT_TABLE, name: str | None = None) -> None:
        self.table = _checked_name(table)
        self.name = name or table
        self.connect = connect  # the instance registry keeps a connection of its own to the same database
        self._kept = KeptConnection(connect)
        self._highest = 0  # the highest version fetched: the newest may never go below it
        self._reported: str | None = None  # the bad row last logged, so each is logged once

    @property
    def where(self) -> str:
        """``"configuration table 'ddm_config' on ds_0"``."""
        return f"configuration table {self.table!r}" + (f" on {self.name}" if self.name != self.table else "")

    # -- connection ------------------------------------------------------------------------

    def _run(self, what: str, work: Callable[[Any], Any]) -> Any:
        """``work(cursor)`` on the kept connection; any driver failure drops it and is unavailability."""
        return self._kept.run(
            work,
            lambda exc: SourceUnavailableError(f"{self.where}: cannot {what}: {exc}", source=self.name, table=self.table),
        )

    def close(self) -> None:
        """Close the kept connection (the next call opens a new one)."""
        self._kept.close()

    def __enter__(self) -> "TableSource":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the table -------------------------------------------------------------------------

    def create_table(self) -> None:
        """Create the table if it does not exist."""
        self._run("create the table", lambda cur: cur.execute(create_table_sql(self.table)))

    def latest_version(self) -> int:
        """The newest version in the table (0 when it is empty)."""
        row = self._run("read the newest version", lambda cur: self._newest(cur, "version"))
        return int(row[0]) if row else 0

    def _newest(self, cur: Any, columns: str) -> Any:
        cur.execute(f"SELECT {columns} FROM `{self.table}` ORDER BY version DESC LIMIT 1")
        return cur.fetchone()

    # -- ConfigSource ------------------------------------------------------------------------

    def changed(self, revision: str | None) -> bool:
        try:
            row = self._run("read the newest version", lambda cur: self._newest(cur, "version, checksum"))
        except SourceUnavailableError:
            return True  # let fetch() report it
        return row is None or revision != f"{int(row[0])}:{row[1]}"

    def fetch(self) -> Fetched:
        row = self._run("read the newest version", lambda cur: self._newest(cur, "version, body, checksum"))
        if row is None:
            raise SourceUnavailableError(
                f"{self.where} holds no configuration version yet; publish one first "
                "(TableSource.publish, or ddm migrate config-publish)",
                source=self.name,
                table=self.table,
            )
        version, body, checksum = int(row[0]), row[1], row[2]
        problem = self._problem(version, body, checksum)
        if problem is not None:
            revision = f"{version}:{checksum}"
            if self._reported != revision:
                self._reported = revision
                log.error("%s: version %d refused: %s", self.where, version, problem)
            raise ConfigRowError(
                f"{self.where}: version {version} is refused, the serving version stays: {problem}",
                source=self.name,
                table=self.table,
                version=version,
            )
        self._highest = max(self._highest, version)
        return Fetched(body, f"{version}:{checksum}", f"{self.where} version {version}")

    def _problem(self, version: int, body: Any, checksum: Any) -> str | None:
        return version_problem(version, body, checksum, self._highest)

    # -- publishing --------------------------------------------------------------------------

    def publish(self, body: str, *, expect_version: int | None = None, validate: bool = True) -> int:
        """Insert ``body`` as the next version; returns that version.

        The INSERT, a read-back of the row and the checksum comparison run in
        one transaction, committed only when the stored body is the one given.

        Args:
            body: The configuration text (ddm-core or ShardingSphere YAML).
            expect_version: The version this one follows (compare-and-set): the
                new row is ``expect_version + 1`` and the call fails if another
                publisher took that number. ``None``: the newest + 1.
            validate: Load ``body`` first and refuse an invalid configuration
                (environment variables are not checked: the publisher may not
                have the application's secrets).

        Raises:
            ConfigValidationError: ``body`` is not a valid configuration.
            ConfigPublishConflictError: the version was taken by another publisher.
            ConfigRowError: the server did not store the body as given.
            SourceUnavailableError: the table cannot be reached or written.
        """
        check_publishable(body, self.where, validate=validate, table=self.table)
        size = len(body.encode("utf-8", "surrogateescape"))
        checksum = checksum_of(body)

        def insert(cur: Any) -> int:
            if expect_version is None:
                row = self._newest(cur, "version")
                version = (int(row[0]) if row else 0) + 1
            else:
                version = expect_version + 1
            cur.execute("BEGIN")
            try:
                try:
                    cur.execute(
                        f"INSERT INTO `{self.table}` (version, body, checksum) VALUES (%s, %s, %s)",
                        (version, body, checksum),
                    )
                except Exception as exc:  # driver errors have no common base: is the version taken?
                    cur.execute("ROLLBACK")
                    cur.execute(f"SELECT 1 FROM `{self.table}` WHERE version = %s", (version,))
                    if cur.fetchone() is not None:
                        raise ConfigPublishConflictError(
                            f"{self.where}: version {version} was published by someone else first; "
                            "read the newest version and publish again",
                            table=self.table,
                            version=version,
                        ) from exc
                    raise
                cur.execute(f"SELECT body FROM `{self.table}` WHERE version = %s", (version,))
                stored = cur.fetchone()
                if stored is None or checksum_of(str(stored[0])) != checksum:
                    raise ConfigRowError(
                        f"{self.where}: version {version} was not stored as given "
                        f"({size} bytes sent, {len(str(stored[0])) if stored else 0} characters stored; "
                        "a non-strict sql_mode truncates text); nothing was published",
                        source=self.name,
                        table=self.table,
                        version=version,
                    )
                cur.execute("COMMIT")
            except BaseException:
                try:
                    cur.execute("ROLLBACK")
                except Exception:  # the original failure matters more
                    pass
                raise
            return version

        version: int = self._run("publish a version", insert)
        log.info("%s: published version %d", self.where, version)
        return version

    def __repr__(self) -> str:
        return f"TableSource({self.table!r} on {self.name!r})"
