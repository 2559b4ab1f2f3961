"""MySQL and MariaDB: the dialect ddm-core speaks, reached through PyMySQL.

MariaDB answers every question as MySQL does; it is a subclass only so that
configurations, URLs and messages keep its own name.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from ddm_core.dialects.base import Dialect

__all__ = ["MySQL", "MariaDB"]

#: Client and server codes meaning "the connection is gone or never came": server
#: shutdown (1053), connection killed (1927, MariaDB), cannot connect (2002, 2003),
#: server gone away (2006), lost during query (2013), lost at handshake (2055).
DISCONNECT_CODES = frozenset({1053, 1927, 2002, 2003, 2006, 2013, 2055})
#: ER_NET_PACKET_TOO_LARGE, ER_NET_READ_ERROR, ER_NET_READ_INTERRUPTED, ER_NET_ERROR_ON_WRITE,
#: ER_NET_WRITE_INTERRUPTED: the server answers, then closes the connection.
ENDS_CONNECTION_CODES = frozenset({1153, 1158, 1159, 1160, 1161})
#: ER_DUP_ENTRY.
DUPLICATE_KEY = 1062
#: First releases with ``FOR UPDATE SKIP LOCKED``: MariaDB 10.6, MySQL 8.0.1.
# Column type codes (the protocol's): TINY/MEDIUM/LONG BLOB and BLOB (TEXT too) index only a prefix;
# JSON and GEOMETRY take no plain index (a temporary copy's keys: docs/cross-node-queries.md).
_BLOBS = frozenset({249, 250, 251, 252})
_UNINDEXED = frozenset({245, 255})
#: The protocol's type codes by the kind of their values (Dialect.key_kind).
_KIND_OF_TYPE = {
    **dict.fromkeys((1, 2, 3, 8, 9), "integer"), **dict.fromkeys((0, 246), "decimal"), **dict.fromkeys((4, 5), "float"),
    **dict.fromkeys((7, 10, 11, 12, 13, 14), "temporal"), 16: "bit", 255: "geometry",
    **dict.fromkeys((15, 245, 247, 248, 249, 250, 251, 252, 253, 254), "string"),
}
SKIP_LOCKED_SINCE = {"MariaDB": (10, 6, 0), "MySQL": (8, 0, 1)}
#: First MariaDB release with ``CRC32C()`` (MySQL has none).
CRC32C_SINCE = (10, 8, 0)
_RELEASE = re.compile(r"(\d+)\.(\d+)\.(\d+)")


def server_release(version: str | None) -> tuple[str, tuple[int, ...]] | None:
    """``("MariaDB", (10, 11, 6))`` for ``VERSION()`` = ``"10.11.6-MariaDB-log"``; ``None``: no release in it.

    The server, not the configured backend name, decides: a ``mysql://`` URL may reach MariaDB.
    """
    found = _RELEASE.search(version or "")
    if found is None:
        return None
    flavor = "MariaDB" if "mariadb" in (version or "").lower() else "MySQL"
    return flavor, tuple(int(part) for part in found.groups())


class MySQL(Dialect):
    """MySQL (also the base of :class:`MariaDB`)."""

    name = "mysql"
    title = "MySQL"
    sqlglot_name = "mysql"
    schemes = ("mysql",)
    default_port = 3306
    driver_module = "pymysql"
    error_modules = ("pymysql",)
    paramstyle = "format"
    writes_ddl = True
    runs_mysql_sql = True
    supports_xa = True
    reports_replication = True
    has_binlog = True
    describes_prepared_columns = True
    deletes_with_limit = True

    def key_kind(self, type_code: Any) -> str | None:
        return _KIND_OF_TYPE.get(type_code) if isinstance(type_code, int) else None

    def temporary_copy(self, table: str, select: str, keys: Sequence[tuple[str, Any]] = ()) -> list[str]:
        # One statement: CREATE INDEX / ALTER TABLE on a table, temporary or not, commits the open
        # transaction implicitly; CREATE TEMPORARY TABLE with its keys declared does not.
        indexes = [f"KEY ({self.identifier(c)}{'(255)' if t in _BLOBS else ''})" for c, t in keys if t not in _UNINDEXED]
        declared = f" ({', '.join(indexes)})" if indexes else ""
        return [f"CREATE TEMPORARY TABLE {self.identifier(table)}{declared} {select}"]

    def drop_temporary(self, table: str) -> str:
        return f"DROP TEMPORARY TABLE IF EXISTS {self.identifier(table)}"

    def ddl_statements(self, sql: str) -> list[str]:
        """The routed statement unchanged: the template's text arrives byte for byte."""
        return [sql]

    def analyze_statement(self, tables: Sequence[str]) -> str:
        return "ANALYZE TABLE " + ", ".join(self.identifier(t) for t in tables)

    def table_columns_query(self, table: str) -> tuple[str, tuple[Any, ...]]:
        """``information_schema.COLUMNS`` of the connection's database, primary-key positions joined in."""
        return (
            "SELECT c.COLUMN_NAME, c.COLUMN_TYPE, COALESCE(k.ORDINAL_POSITION, 0) "
            "FROM information_schema.COLUMNS c LEFT JOIN information_schema.KEY_COLUMN_USAGE k "
            "ON k.TABLE_SCHEMA = c.TABLE_SCHEMA AND k.TABLE_NAME = c.TABLE_NAME "
            "AND k.COLUMN_NAME = c.COLUMN_NAME AND k.CONSTRAINT_NAME = 'PRIMARY' "
            "WHERE c.TABLE_SCHEMA = DATABASE() AND c.TABLE_NAME = %s ORDER BY c.ORDINAL_POSITION",
            (table,),
        )

    def packet_limit_query(self) -> str | None:
        return "SELECT @@max_allowed_packet"

    def cancel_statement(self, connection_id: int) -> str | None:
        return f"KILL QUERY {int(connection_id)}"

    def supports_skip_locked(self, version: str | None) -> bool:
        release = server_release(version)
        return release is not None and release[1] >= SKIP_LOCKED_SINCE[release[0]]

    def has_crc32c(self, version: str) -> bool:
        release = server_release(version)
        return release is not None and release[0] == "MariaDB" and release[1] >= CRC32C_SINCE

    def is_duplicate_key(self, exc: BaseException, code: Any) -> bool:
        return bool(code == DUPLICATE_KEY)

    def is_disconnect(self, exc: BaseException, code: Any) -> bool:
        name = type(exc).__name__
        if name == "InterfaceError":  # PyMySQL's "(0, '')": the connection was already closed
            return True
        return bool(name == "OperationalError" and code in DISCONNECT_CODES)

    def ends_connection(self, exc: BaseException, code: Any) -> bool:
        return code in ENDS_CONNECTION_CODES


class MariaDB(MySQL):
    """MariaDB: MySQL's answers under its own name."""

    name = "mariadb"
    title = "MariaDB"
    schemes = ("mariadb",)
