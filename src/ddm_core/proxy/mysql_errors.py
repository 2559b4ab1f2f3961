"""ddm-core errors → MySQL error packets: a code and SQLSTATE a MySQL client knows.

A driver error from a data source keeps the server's own code (1146 unknown
table, 1054 unknown column, 1064 syntax...): the client sees what one MySQL
server would have said. ddm-core's own refusals get the nearest MySQL code and
a message starting with ``ddm:`` so they are told apart from the server's
(docs/proxy.md#errors).
"""

from __future__ import annotations

from typing import NamedTuple

from ddm_core.errors import (
    CrossShardTransactionError,
    NoSuchSavepointError,
    DataSourceUnavailableError,
    DdmError,
    DeepPaginationError,
    DuplicateKeyError,
    ExecutionError,
    FullRouteError,
    ParameterError,
    PoolTimeoutError,
    ProxyAccessDeniedError,
    QueryTimeoutError,
    RateLimitedError,
    ShardKeyUpdateError,
    ShardValueError,
    StatementInterruptedError,
    TransactionCharacteristicsError,
    TransactionError,
    UnknownSessionError,
    UnsupportedSQLError,
    XaBranchAbortedError,
    XaCapacityError,
    XaTimeoutError,
)

__all__ = ["MysqlErrorInfo", "sqlstate_of", "error_info", "ACCESS_DENIED", "UNKNOWN_DATABASE", "UNKNOWN_ERROR"]

ACCESS_DENIED = 1045
UNKNOWN_DATABASE = 1049
UNKNOWN_ERROR = 1105
NOT_SUPPORTED = 1235
UNKNOWN_SYSTEM_VARIABLE = 1193
TOO_MANY_CONNECTIONS = 1040
FOREIGN_DATA_SOURCE = 1429  # ER_CONNECT_TO_FOREIGN_DATA_SOURCE: a data source cannot be reached
QUERY_TIMEOUT = 3024  # ER_QUERY_TIMEOUT (MySQL 8)
WRONG_VALUE = 1231
USER_LIMIT_REACHED = 1226  # ER_USER_LIMIT_REACHED: a rate limit refused the statement
TRUNCATED_WRONG_VALUE = 1292
LOCK_DEADLOCK = 1213  # ER_LOCK_DEADLOCK (40001): retry the whole transaction
TX_IN_PROGRESS = 1568  # ER_CANT_CHANGE_TX_CHARACTERISTICS: SET transaction_type inside a transaction
INSECURE_TRANSPORT = 3159  # ER_SECURE_TRANSPORT_REQUIRED: proxy.tls.required and the client did not use TLS
NO_SUCH_THREAD = 1094  # ER_NO_SUCH_THREAD: KILL of an id that is no session of this proxy
QUERY_INTERRUPTED = 1317  # ER_QUERY_INTERRUPTED: KILL QUERY ended the statement
CLIENT_INTERACTION_TIMEOUT = 4031  # ER_CLIENT_INTERACTION_TIMEOUT (MySQL 8): dropped after wait_timeout idle
NO_SUCH_SAVEPOINT = 1305  # ER_SP_DOES_NOT_EXIST: ROLLBACK TO / RELEASE of a savepoint the transaction did not set
#: ProxyAccessDeniedError.scope -> MySQL's code for that refusal (docs/proxy.md#privileges)
ACCESS_DENIED_CODES = {
    "operation": 1227,  # ER_SPECIFIC_ACCESS_DENIED_ERROR: "you need (at least one of) the X privilege(s)"
    "table": 1142,  # ER_TABLEACCESS_DENIED_ERROR
    "routine": 1370,  # ER_PROCACCESS_DENIED_ERROR
    "database": 1044,  # ER_DBACCESS_DENIED_ERROR
    "session": 1095,  # ER_KILL_DENIED_ERROR
}

#: Code → SQLSTATE, as the MySQL server error reference gives them; anything else is HY000.
_SQLSTATES: dict[int, str] = {
    1040: "08004",
    1044: "42000",
    1045: "28000",
    1046: "3D000",
    1048: "23000",
    1049: "42000",
    1054: "42S22",
    1062: "23000",
    1064: "42000",
    1065: "42000",
    1142: "42000",
    1146: "42S02",
    1193: "HY000",
    1213: "40001",
    1227: "42000",
    1226: "42000",
    1231: "42000",
    1235: "42000",
    1264: "22003",  # out of range value
    1292: "22007",  # incorrect datetime / truncated incorrect value
    1365: "22012",  # division by 0
    1366: "22007",  # incorrect integer / string value
    1317: "70100",
    1370: "42000",
    1406: "22001",
    1451: "23000",
    1452: "23000",
    1568: "25001",
    1690: "22003",  # BIGINT value out of range
    3169: "HY000",
}


def sqlstate_of(code: int) -> str:
    """The SQLSTATE MySQL sends with ``code``."""
    return _SQLSTATES.get(int(code), "HY000")


class MysqlErrorInfo(NamedTuple):
    """What goes into the error packet."""

    code: int
    message: str


# ddm-core refusals, most specific first: the first class the error is an instance of decides.
_REFUSALS: tuple[tuple[type[DdmError], int], ...] = (
    (DuplicateKeyError, 1062),
    (RateLimitedError, USER_LIMIT_REACHED),
    (QueryTimeoutError, QUERY_TIMEOUT),
    (PoolTimeoutError, TOO_MANY_CONNECTIONS),
    (DataSourceUnavailableError, FOREIGN_DATA_SOURCE),
    (FullRouteError, NOT_SUPPORTED),
    (DeepPaginationError, NOT_SUPPORTED),
    (ShardKeyUpdateError, NOT_SUPPORTED),
    (CrossShardTransactionError, NOT_SUPPORTED),
    (UnsupportedSQLError, NOT_SUPPORTED),
    (UnknownSessionError, NO_SUCH_THREAD),
    (StatementInterruptedError, QUERY_INTERRUPTED),
    (ShardValueError, TRUNCATED_WRONG_VALUE),
    (ParameterError, WRONG_VALUE),
    # XA through the proxy (docs/proxy.md#xa-transactions): a deadlock's code, so clients retry the transaction
    (XaBranchAbortedError, LOCK_DEADLOCK),
    (XaTimeoutError, QUERY_TIMEOUT),
    (XaCapacityError, TOO_MANY_CONNECTIONS),
    (NoSuchSavepointError, NO_SUCH_SAVEPOINT),
    (TransactionCharacteristicsError, NOT_SUPPORTED),
    (TransactionError, UNKNOWN_ERROR),
)


def error_info(exc: DdmError) -> MysqlErrorInfo:
    """The code and message a client gets for ``exc``."""
    if isinstance(exc, DuplicateKeyError):
        return MysqlErrorInfo(1062, exc.message)
    if isinstance(exc, ProxyAccessDeniedError):
        return MysqlErrorInfo(ACCESS_DENIED_CODES[exc.context["scope"]], f"ddm: {exc.message}")
    driver_code = exc.context.get("code")
    if (
        isinstance(exc, ExecutionError)
        and not isinstance(exc, (DataSourceUnavailableError, PoolTimeoutError, QueryTimeoutError))
        and isinstance(driver_code, int)
    ):
        # The data source's own error (1146, 1054, 1064...): its code, its words.
        return MysqlErrorInfo(driver_code, exc.message)
    for cls, code in _REFUSALS:
        if isinstance(exc, cls):
            return MysqlErrorInfo(code, f"ddm: {exc.message}")
    return MysqlErrorInfo(UNKNOWN_ERROR, f"ddm: {exc.message}")
