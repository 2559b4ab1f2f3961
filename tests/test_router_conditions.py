"""Router, table-driven: conditions that must not widen a route (and never narrow it wrongly).

* hex / bit literals beside a shard condition, and as the shard value itself;
* ``CASE WHEN ... ?`` in GROUP BY / ORDER BY across shards (every unit gets exactly the
  params its SQL needs, in order);
* derived tables pinned by the enclosing WHERE (``SELECT * FROM (SELECT account_id AS a
  FROM t_account) t WHERE t.a = ?``);
* neighbours: ``NOT`` pushed down, row constructors, NULL, folded integer arithmetic,
  IN / OR / BETWEEN with params.

Expected nodes come from the configs' documented formulas in :mod:`router_cases`
(never from the router). The end of the module runs the same kinds of statements
through :class:`ddm_core.execute.Executor` on sharded SQLite files and MariaDB
databases and compares every result with one unsharded table holding all rows.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator, Sequence

import pytest

from ddm_core import load_config
from ddm_core.errors import FullRouteError, UnsupportedSQLError
from ddm_core.execute import Executor
from ddm_core.route import RouteKind

from router_cases import Case, all_nodes, check, ids, n_node, nodes, r_account_node, r_log_node, router, s_node
from test_execute_support import assert_no_leaks
from test_oracle import (
    SHARDS,
    Backend,
    Query,
    SQLiteBackend,
    check as oracle_check,
    mariadb_oracle,
    oracle_config,
    reference_runner,
)

SINGLE, MULTI, FULL = RouteKind.SINGLE, RouteKind.MULTI, RouteKind.FULL
R_LOG = all_nodes("R", "t_log")
R_ACCOUNTS = all_nodes("R", "t_account")


def N(id: str, sql: str, params: Any = None, users: Sequence[Any] = (), **kw: Any) -> Case:
    kw.setdefault("nodes", nodes(n_node, *users))
    return Case(id, "N", sql, params, **kw)


def S(id: str, sql: str, params: Any = None, users: Sequence[Any] = (), **kw: Any) -> Case:
    kw.setdefault("nodes", nodes(s_node, *users))
    return Case(id, "S", sql, params, **kw)


def R(id: str, sql: str, params: Any = None, users: Sequence[Any] = (), **kw: Any) -> Case:
    kw.setdefault("nodes", nodes(r_log_node, *users))
    return Case(id, "R", sql, params, **kw)


def A(id: str, sql: str, params: Any = None, accounts: Sequence[Any] = (), **kw: Any) -> Case:
    kw.setdefault("nodes", nodes(r_account_node, *accounts))
    return Case(id, "R", sql, params, **kw)


def refused(id: str, config: str, sql: str, params: Any, error: type[BaseException], *fragments: str) -> Case:
    return Case(id, config, sql, params, error=(error, fragments))


# -- hex and bit literals -----------------------------------------------------------------------------

HEX_AND_BITS = [
    # On another column: the shard condition alone decides, and the text reaches the unit as written.
    N("hex-quoted-beside-key", "SELECT * FROM t_order WHERE user_id = ? AND status = x'0A'", [7], users=[7], kind=SINGLE),
    N("hex-0x-beside-key", "SELECT * FROM t_order WHERE user_id = ? AND status = 0x0A", [7], users=[7], kind=SINGLE),
    N("hex-odd-digits-beside-key", "SELECT * FROM t_order WHERE status = 0xA AND user_id = ?", [8], users=[8]),
    N("bit-quoted-beside-key", "SELECT * FROM t_order WHERE user_id = ? AND status = b'1'", [9], users=[9], kind=SINGLE),
    N("bit-0b-beside-key", "SELECT * FROM t_order WHERE user_id = ? AND status = 0b101", [9], users=[9]),
    N("hex-in-list-beside-key", "SELECT * FROM t_order WHERE user_id = ? AND flag IN (x'01', 0x02, b'11')", [3],
      users=[3]),
    S("s-hex-beside-key", "SELECT * FROM t_order WHERE user_id = %s AND status = X'0a'", [21], users=[21]),
    S("s-update-hex", "UPDATE t_order SET flag = b'1' WHERE user_id = %s AND status = 0x0A", [21], users=[21],
      kind=SINGLE),
    S("s-delete-hex", "DELETE FROM t_order WHERE user_id = %s AND flag = x'0A'", [22], users=[22], kind=SINGLE),
    # Regenerated for several shards: the 0x / 0b spelling is kept (sqlglot would write x'0A', which
    # MariaDB compares with an integer column as the string '\n', and x'A' is a syntax error).
    N("hex-0x-kept-across-shards", "SELECT * FROM t_order WHERE user_id IN (1, 5) AND status = 0x0A AND b = 0xA "
      "AND c = 0b101 AND d = x'0B'", users=[1, 5], kind=MULTI,
      unit_sql="SELECT * FROM {t_order} WHERE user_id IN (1, 5) AND status = 0x0A AND b = 0xA AND c = 0b101 "
               "AND d = x'0B'"),
    # REGEXP stays an operator (sqlglot would write REGEXP_LIKE(), which MariaDB does not have).
    N("regexp-kept-across-shards", "SELECT * FROM t_order WHERE user_id IN (1, 5) AND (tag REGEXP %s OR tag NOT "
      "RLIKE '^a')", [r"b$"], users=[1, 5],
      unit_sql="SELECT * FROM {t_order} WHERE user_id IN (1, 5) AND ((tag REGEXP %s) OR NOT (tag REGEXP '^a'))"),
    # As the shard value itself: a number or bytes depending on the column type and the server,
    # so it does not narrow (every node where full routes are allowed, refused where not).
    R("hex-as-shard-value-full", "SELECT * FROM t_log WHERE user_id = 0x0A", nodes=R_LOG, kind=FULL),
    R("hex-quoted-as-shard-value-full", "SELECT * FROM t_log WHERE user_id = x'0A'", nodes=R_LOG, kind=FULL),
    R("bit-as-shard-value-full", "SELECT * FROM t_log WHERE user_id = b'1010'", nodes=R_LOG, kind=FULL),
    R("hex-in-shard-list-full", "SELECT * FROM t_log WHERE user_id IN (x'0A', 3)", nodes=R_LOG, kind=FULL),
    refused("hex-as-shard-value-refused", "N", "SELECT * FROM t_order WHERE user_id = 0x0A", None, FullRouteError,
            "user_id"),
]

# -- CASE WHEN ... ? in GROUP BY / ORDER BY --------------------------------------------------------------

CASE_WHEN = [
    # Several shards: the ORDER BY / GROUP BY expression is repeated as a derived column (and GROUP BY
    # gets ORDER BY its keys), each copy with its own placeholder and its own param.
    R("case-group-by-full", "SELECT status, COUNT(*) FROM t_log GROUP BY CASE WHEN amount > ? THEN 1 ELSE 0 END, status",
      [10], nodes=R_LOG, kind=FULL,
      unit_sql="SELECT status, COUNT(*), CASE WHEN amount > ? THEN 1 ELSE 0 END AS __ddm_g0 FROM {t_log} GROUP BY "
               "CASE WHEN amount > ? THEN 1 ELSE 0 END, status ORDER BY CASE WHEN amount > ? THEN 1 ELSE 0 END, status",
      unit_params=(10, 10, 10)),
    R("case-order-by-limit-multi", "SELECT id FROM t_log WHERE user_id IN (?, ?) ORDER BY CASE WHEN status = ? THEN 0 "
      "ELSE 1 END, id LIMIT ? OFFSET ?", [1, 2000, 3, 10, 5], users=[1, 2000], kind=MULTI,
      unit_sql="SELECT id, CASE WHEN status = ? THEN 0 ELSE 1 END AS __ddm_o0 FROM {t_log} WHERE user_id IN (?, ?) "
               "ORDER BY CASE WHEN status = ? THEN 0 ELSE 1 END, id LIMIT ?",
      unit_params=(3, 1, 2000, 3, 15)),  # LIMIT offset + limit on every unit
    R("case-select-and-group-by", "SELECT CASE WHEN amount > ? THEN 'big' ELSE 'small' END AS k, COUNT(*) FROM t_log "
      "WHERE user_id IN (?, ?) GROUP BY CASE WHEN amount > ? THEN 'big' ELSE 'small' END", [10, 1, 2, 20],
      users=[1, 2],
      unit_sql="SELECT CASE WHEN amount > ? THEN 'big' ELSE 'small' END AS k, COUNT(*), CASE WHEN amount > ? THEN "
               "'big' ELSE 'small' END AS __ddm_g0 FROM {t_log} WHERE user_id IN (?, ?) GROUP BY CASE WHEN amount > ? "
               "THEN 'big' ELSE 'small' END ORDER BY CASE WHEN amount > ? THEN 'big' ELSE 'small' END",
      unit_params=(10, 20, 1, 2, 20, 20)),  # different params: the GROUP BY is its own derived column
    R("case-group-by-alias-pyformat", "SELECT CASE WHEN amount > %(a)s THEN 1 ELSE 0 END AS k, COUNT(*) FROM t_log "
      "WHERE status = %(s)s GROUP BY k ORDER BY k", {"a": 10, "s": 2}, nodes=R_LOG,
      unit_sql="SELECT CASE WHEN amount > %s THEN 1 ELSE 0 END AS k, COUNT(*) FROM {t_log} WHERE status = %s "
               "GROUP BY k ORDER BY k",
      unit_params=(10, 2)),
    R("case-order-by-star", "SELECT * FROM t_log ORDER BY CASE WHEN amount > ? THEN 1 ELSE 0 END", [10], nodes=R_LOG,
      unit_sql="SELECT *, CASE WHEN amount > ? THEN 1 ELSE 0 END AS __ddm_o0 FROM {t_log} ORDER BY CASE WHEN "
               "amount > ? THEN 1 ELSE 0 END",
      unit_params=(10, 10)),
    R("case-in-aggregate-order-by", "SELECT status FROM t_log GROUP BY status ORDER BY MAX(CASE WHEN id > ? THEN 1 END) "
      "LIMIT ?", [10, 3], nodes=R_LOG,
      unit_sql="SELECT status, MAX(CASE WHEN id > ? THEN 1 END) AS __ddm_h0 FROM {t_log} GROUP BY status ORDER BY "
               "MAX(CASE WHEN id > ? THEN 1 END)",
      unit_params=(10, 10)),  # grouped: the LIMIT param is the merger's, not the units'
    # One shard: the caller's text unchanged, its params in order.
    R("case-order-by-single", "SELECT id FROM t_log WHERE user_id = ? ORDER BY CASE WHEN status = ? THEN 0 ELSE 1 END",
      [5, 2], users=[5], kind=SINGLE),
]

# -- derived tables ------------------------------------------------------------------------------------

DERIVED = [
    A("derived-alias-qualified", "SELECT * FROM (SELECT account_id AS a FROM t_account) t WHERE t.a = ?", [150],
      accounts=[150], kind=SINGLE),
    A("derived-alias-unqualified", "SELECT * FROM (SELECT account_id AS a FROM t_account) t WHERE a = ?", [250],
      accounts=[250]),
    A("derived-column-list", "SELECT * FROM (SELECT account_id AS a FROM t_account) AS t (x) WHERE t.x = ?", [50],
      accounts=[50]),
    A("derived-star", "SELECT * FROM (SELECT * FROM t_account) t WHERE t.account_id = ?", [350], accounts=[350]),
    A("derived-qualified-star", "SELECT * FROM (SELECT ac.* FROM t_account ac) t WHERE t.account_id = ?", [99],
      accounts=[99]),
    A("derived-nested", "SELECT * FROM (SELECT * FROM (SELECT account_id AS a FROM t_account) i WHERE i.a > 0) o "
      "WHERE o.a = ?", [201], accounts=[201]),
    A("derived-group-key", "SELECT * FROM (SELECT account_id AS a, COUNT(*) AS c FROM t_account GROUP BY account_id) t "
      "WHERE t.a = ?", [120], accounts=[120]),
    A("derived-group-by-alias", "SELECT * FROM (SELECT account_id AS a, COUNT(*) AS c FROM t_account GROUP BY a) t "
      "WHERE t.a = ?", [120], accounts=[120]),
    A("derived-group-by-position", "SELECT * FROM (SELECT account_id AS a, COUNT(*) AS c FROM t_account GROUP BY 1) t "
      "WHERE t.a = ?", [120], accounts=[120]),
    A("derived-in-same-node", "SELECT * FROM (SELECT account_id AS a FROM t_account) t WHERE t.a IN (?, ?)", [110, 190],
      accounts=[110, 190]),
    A("derived-joined-with-broadcast", "SELECT * FROM (SELECT account_id AS a FROM t_account) t JOIN t_country c "
      "ON c.id = t.a WHERE t.a = ?", [310], accounts=[310]),
    N("derived-inner-condition", "SELECT * FROM (SELECT * FROM t_order WHERE user_id = ?) t", [5], users=[5], kind=SINGLE),
    R("derived-not-pushed", "SELECT * FROM (SELECT user_id AS u FROM t_log) t WHERE NOT t.u <> ?", [6], users=[6]),
    # Filtering after the inner SELECT would keep other rows than filtering before it: not pinned.
    refused("derived-in-two-nodes-refused", "R", "SELECT * FROM (SELECT account_id AS a FROM t_account) t "
            "WHERE t.a IN (?, ?)", [10, 390], UnsupportedSQLError, "subquery", "t_account"),
    refused("derived-limit-refused", "R", "SELECT * FROM (SELECT account_id AS a FROM t_account LIMIT 5) t WHERE t.a = ?",
            [150], UnsupportedSQLError, "subquery"),
    refused("derived-aggregate-refused", "R", "SELECT * FROM (SELECT account_id AS a, COUNT(*) AS c FROM t_account) t "
            "WHERE t.a = ?", [150], UnsupportedSQLError, "subquery"),
    refused("derived-window-refused", "R", "SELECT * FROM (SELECT account_id AS a, ROW_NUMBER() OVER (ORDER BY v) AS n "
            "FROM t_account) t WHERE t.a = ?", [150], UnsupportedSQLError, "subquery"),
    refused("derived-expression-refused", "R", "SELECT * FROM (SELECT account_id + 0 AS a FROM t_account) t "
            "WHERE t.a = ?", [150], UnsupportedSQLError, "subquery"),
    refused("derived-other-group-key-refused", "R", "SELECT * FROM (SELECT account_id AS a, v FROM t_account GROUP BY v) t "
            "WHERE t.a = ?", [150], UnsupportedSQLError, "subquery"),
    refused("derived-outer-join-on-refused", "R", "SELECT * FROM t_country c LEFT JOIN (SELECT account_id AS a FROM "
            "t_account) t ON t.a = ?", [150], UnsupportedSQLError, "subquery"),
    refused("derived-unqualified-with-join-refused", "R", "SELECT * FROM (SELECT account_id AS a FROM t_account) t "
            "JOIN t_country c ON c.id = t.a WHERE a = ?", [150], UnsupportedSQLError, "subquery"),
]

# -- neighbours: NOT, rows, NULL, arithmetic, IN / OR / BETWEEN ----------------------------------------------

BELOW_1000 = [n for n in R_LOG if n.order[1] == 0]  # BOUNDARY_RANGE at 1000; MOD cannot narrow a range

NEIGHBOURS = [
    R("not-not-equal", "SELECT * FROM t_log WHERE NOT user_id <> ?", [5], users=[5], kind=SINGLE),
    R("not-of-or", "SELECT * FROM t_log WHERE NOT (user_id <> ? OR status <> ?)", [2000, 1], users=[2000]),
    R("not-greater", "SELECT * FROM t_log WHERE NOT user_id > ?", [999], nodes=BELOW_1000),
    R("not-of-and-is-any", "SELECT * FROM t_log WHERE NOT (user_id = ? AND status = ?)", [5, 1], nodes=R_LOG,
      kind=FULL),
    R("not-equal-is-any", "SELECT * FROM t_log WHERE user_id <> ?", [5], nodes=R_LOG, kind=FULL),
    R("not-in-is-any", "SELECT * FROM t_log WHERE user_id NOT IN (?, ?)", [5, 6], nodes=R_LOG, kind=FULL,
      unit_sql="SELECT * FROM {t_log} WHERE NOT user_id IN (?, ?)"),  # regenerated by sqlglot, same meaning
    R("double-not", "SELECT * FROM t_log WHERE NOT NOT user_id = ?", [7], users=[7]),
    A("not-between", "SELECT * FROM t_account WHERE NOT account_id BETWEEN ? AND ?", [100, 299],
      nodes=[r_account_node(0), r_account_node(300)]),  # < 100 or > 299
    A("not-at-least", "SELECT * FROM t_account WHERE NOT account_id >= ?", [200], accounts=[0, 199]),
    A("between-params", "SELECT * FROM t_account WHERE account_id BETWEEN ? AND ?", [120, 180], accounts=[150],
      kind=SINGLE),
    A("value-between-columns", "SELECT * FROM t_account WHERE ? BETWEEN account_id AND account_id", [250],
      accounts=[250]),
    R("row-equals", "SELECT * FROM t_log WHERE (user_id, status) = (?, ?)", [5, 1], users=[5], kind=SINGLE),
    R("row-equals-swapped", "SELECT * FROM t_log WHERE (status, user_id) = (?, ?)", [1, 2000], users=[2000]),
    R("row-in", "SELECT * FROM t_log WHERE (user_id, status) IN ((?, ?), (?, ?))", [5, 1, 2000, 2], users=[5, 2000],
      kind=MULTI),
    R("in-ignores-null", "SELECT * FROM t_log WHERE user_id IN (?, NULL)", [5], users=[5], kind=SINGLE),
    R("equals-null-no-row", "SELECT * FROM t_log WHERE user_id = NULL", nodes=R_LOG[:1]),
    R("in-only-null-no-row", "SELECT * FROM t_log WHERE user_id IN (NULL)", nodes=R_LOG[:1]),
    R("null-safe-null-any", "SELECT * FROM t_log WHERE user_id <=> NULL", nodes=R_LOG, kind=FULL),
    R("is-null-any", "SELECT * FROM t_log WHERE user_id IS NULL", nodes=R_LOG, kind=FULL,
      unit_sql="SELECT * FROM {t_log} WHERE user_id IS NULL"),
    R("folded-sum", "SELECT * FROM t_log WHERE user_id = 3 + 4", users=[7], kind=SINGLE),
    R("folded-nested", "SELECT * FROM t_log WHERE user_id = 2 * (1000 - 1)", users=[1998]),
    R("folded-in-list", "SELECT * FROM t_log WHERE user_id IN (1 + 1, 10 - 1)", users=[2, 9]),
    R("string-arithmetic-any", "SELECT * FROM t_log WHERE user_id = '3' + 4", nodes=R_LOG, kind=FULL),
    R("param-arithmetic-any", "SELECT * FROM t_log WHERE user_id = ? + 1", [4], nodes=R_LOG, kind=FULL),
    R("or-of-params", "SELECT * FROM t_log WHERE user_id = ? OR user_id = ?", [5, 2000], users=[5, 2000], kind=MULTI),
    R("in-params", "SELECT * FROM t_log WHERE user_id IN (?, ?)", [5, 9], users=[5, 9], kind=SINGLE),
    R("between-and-eq", "SELECT * FROM t_log WHERE user_id BETWEEN ? AND ? AND user_id = ?", [1, 10, 6], users=[6]),
]

CASES = HEX_AND_BITS + CASE_WHEN + DERIVED + NEIGHBOURS


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_conditions(case: Case) -> None:
    check(case)


_PLACEHOLDER = re.compile(r"%s|\?")


@pytest.mark.parametrize("case", [c for c in CASES if c.error is None], ids=ids([c for c in CASES if c.error is None]))
def test_every_unit_gets_the_params_its_sql_needs(case: Case) -> None:
    """Independent of the expected text: as many params as the unit's SQL has placeholders."""
    plan = router(case.config).route(case.sql, case.params)
    for unit in plan.units:
        # The suite's statements hold no '?' or '%s' inside string literals.
        assert len(_PLACEHOLDER.findall(unit.sql)) == len(unit.params), (case.id, unit.sql, unit.params)


def test_hex_shard_value_is_not_routed_as_a_guess() -> None:
    """Routing ``user_id = 0x0A`` by 10 would miss MariaDB's rows of a VARBINARY column (and vice versa)."""
    plan = router("R").route("SELECT * FROM t_log WHERE user_id = 0x0A")
    assert {u.data_source for u in plan.units} == {n.ds for n in R_LOG}
    assert plan.kind is FULL


# -- the oracle: sharded SQLite files / MariaDB databases against one unsharded table --------------------------

BIN_COLUMNS = ("id", "user_id", "flag", "status", "amount", "tag")
BIN_DDL = ("CREATE TABLE t_bin (id BIGINT NOT NULL PRIMARY KEY, user_id BIGINT NOT NULL, flag VARBINARY(4) NULL, "
           "status INT NULL, amount INT NULL, tag VARCHAR(8) NULL)")
BIN_USERS = (1, 2, 3, 4, 5, 7, 10, 11, 64, 100, 255, 1000, -7, 2**40 + 3)
FLAGS = (b"\x0a", b"\x01", b"1", b"\x0a\x0b", None)
STATUSES = (0, 1, 10, 2, None, 49, 5)
TAGS = ("ab", "ba", "abc", None, "x", "b")


def bin_rows() -> list[dict[str, Any]]:
    """Deterministic rows: every user has every kind of flag and status somewhere."""
    return [
        {"id": i + 1, "user_id": BIN_USERS[i % len(BIN_USERS)], "flag": FLAGS[i % len(FLAGS)],
         "status": STATUSES[i % len(STATUSES)], "amount": (i * 37) % 100, "tag": TAGS[i % len(TAGS)]}
        for i in range(180)
    ]


def bin_config(urls: dict[str, Any]) -> dict[str, Any]:
    """The oracle's configuration with ``t_bin`` sharded like its ``t_order``."""
    config = oracle_config(urls)
    config["tables"].append({**config["tables"][0], "logicTable": "t_bin"})
    return config


@pytest.fixture(scope="module")
def sqlite_bin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    base: Path = tmp_path_factory.mktemp("conditions")
    urls = {f"ds_{i}": f"sqlite:///{base / f'ds_{i}.db'}" for i in range(SHARDS)}
    executor = Executor(load_config(bin_config(urls)), timeout=20.0)
    backend = SQLiteBackend(executor, base / "ref.db")
    try:
        executor.execute(BIN_DDL).close()
        backend.conn.execute(BIN_DDL)
        backend.load("t_bin", BIN_COLUMNS, bin_rows())
        yield backend
        assert_no_leaks(executor)
    finally:
        executor.close()
        backend.conn.close()


@pytest.fixture(scope="module")
def mariadb_bin() -> Iterator[Backend]:
    with mariadb_oracle("ddm_cond", [f"ds_{i}" for i in range(SHARDS)], bin_config) as backend:
        backend.executor.execute(BIN_DDL).close()
        reference_runner(backend)(BIN_DDL)
        backend.load("t_bin", BIN_COLUMNS, bin_rows())
        yield backend


def Q(sql: str, params: Sequence[Any] = (), units: int | None = None, total: bool = True,
      only: str | None = None) -> tuple[Query, int | None, str | None]:
    """A query, the units it must route to (``None``: not checked), and the one backend it is for (``None``: both)."""
    return Query(sql, list(params), "total" if total else "multiset"), units, only


ORACLE = [
    # hex / bit literals beside a shard condition: one unit, the literal as written
    Q("SELECT id, user_id, status FROM t_bin WHERE user_id = %s AND flag = x'0A' ORDER BY id", [5], units=1),
    Q("SELECT id, user_id, status FROM t_bin WHERE user_id = %s AND status = 0x0A ORDER BY id", [3], units=1),
    Q("SELECT id, flag FROM t_bin WHERE user_id = %s AND flag IN (x'01', x'0A0B') ORDER BY id", [2], units=1),
    Q("SELECT id FROM t_bin WHERE user_id = %s AND status = b'1010' ORDER BY id", [3], units=1, only="mariadb"),
    Q("SELECT id FROM t_bin WHERE user_id = %s AND flag = b'1010' ORDER BY id", [10], units=1, only="mariadb"),
    # ... regenerated for several shards (0x stays 0x: MariaDB and SQLite read x'0A' differently)
    Q("SELECT id, user_id FROM t_bin WHERE user_id IN (%s, %s, %s) AND status = 0x0A ORDER BY id", [1, 3, 10]),
    Q("SELECT id, user_id FROM t_bin WHERE user_id IN (%s, %s, %s) AND flag = 0x0A ORDER BY id", [1, 3, 10]),
    Q("SELECT id, user_id FROM t_bin WHERE user_id IN (%s, %s, %s) AND flag = x'0A' ORDER BY id", [1, 3, 10]),
    Q("SELECT id FROM t_bin WHERE status = 0xA ORDER BY id LIMIT 7"),
    Q("SELECT id FROM t_bin WHERE status = 0b1010 ORDER BY id", only="mariadb"),
    Q("SELECT id, tag FROM t_bin WHERE user_id IN (%s, %s) AND tag REGEXP %s ORDER BY id", [1, 2, "^a"],
      only="mariadb"),
    # hex literal as the shard value: every node, the rows MariaDB / SQLite themselves match
    Q("SELECT id FROM t_bin WHERE user_id = 0x0A ORDER BY id", units=16),
    Q("SELECT id FROM t_bin WHERE user_id IN (x'0A', 3) ORDER BY id", units=16),
    # CASE WHEN ... ? in GROUP BY / ORDER BY
    Q("SELECT CASE WHEN amount > %s THEN 1 ELSE 0 END AS big, COUNT(*) AS n FROM t_bin "
      "GROUP BY CASE WHEN amount > %s THEN 1 ELSE 0 END ORDER BY big", [50, 50]),
    Q("SELECT id FROM t_bin WHERE user_id IN (%s, %s, %s) ORDER BY CASE WHEN status = %s THEN 0 ELSE 1 END, id "
      "LIMIT %s OFFSET %s", [1, 2, 3, 10, 6, 2]),
    Q("SELECT status, SUM(CASE WHEN amount > %s THEN amount ELSE 0 END) AS s FROM t_bin GROUP BY status "
      "ORDER BY status", [40]),
    Q("SELECT user_id, CASE WHEN status > %s THEN 1 ELSE 0 END AS hi, COUNT(*) AS n FROM t_bin "
      "GROUP BY user_id, CASE WHEN status > %s THEN 1 ELSE 0 END ORDER BY user_id, hi", [1, 1]),
    Q("SELECT id, amount FROM t_bin ORDER BY CASE WHEN amount BETWEEN %s AND %s THEN 0 ELSE 1 END, amount DESC, id "
      "LIMIT %s", [20, 60, 11]),
    Q("SELECT id FROM t_bin WHERE user_id = %s ORDER BY CASE WHEN status = %s THEN 0 ELSE 1 END, id", [4, 2], units=1),
    # derived tables pinned by the enclosing WHERE
    Q("SELECT t.u, t.id FROM (SELECT user_id AS u, id FROM t_bin) t WHERE t.u = %s ORDER BY t.id", [7], units=1),
    Q("SELECT * FROM (SELECT * FROM t_bin WHERE user_id = %s) t ORDER BY id", [11], units=1),
    Q("SELECT t.u, t.n FROM (SELECT user_id AS u, COUNT(*) AS n FROM t_bin GROUP BY user_id) t WHERE t.u = %s", [64],
      units=1),
    Q("SELECT o.a FROM (SELECT * FROM (SELECT user_id AS a, status FROM t_bin) i WHERE i.status = %s) o "
      "WHERE o.a = %s ORDER BY o.a", [10, 3], units=1, total=False),
    # neighbours
    Q("SELECT id FROM t_bin WHERE NOT user_id <> %s ORDER BY id", [100], units=1),
    Q("SELECT id FROM t_bin WHERE (user_id, status) = (%s, %s) ORDER BY id", [5, 49], units=1),
    Q("SELECT id FROM t_bin WHERE (user_id, status) IN ((%s, %s), (%s, %s)) ORDER BY id", [5, 49, 2, 0]),
    Q("SELECT id FROM t_bin WHERE user_id IN (%s, NULL) ORDER BY id", [255], units=1),
    Q("SELECT id FROM t_bin WHERE user_id = NULL", units=1),
    Q("SELECT id FROM t_bin WHERE user_id = 3 + 4 ORDER BY id", units=1),
    Q("SELECT id FROM t_bin WHERE user_id = %s + 1 ORDER BY id", [6], units=16),
    Q("SELECT id FROM t_bin WHERE user_id = %s OR user_id = %s ORDER BY id", [1000, -7]),
    Q("SELECT id FROM t_bin WHERE NOT (user_id <> %s OR status <> %s) ORDER BY id", [2, 10], units=1),
    Q("SELECT id FROM t_bin WHERE user_id BETWEEN %s AND %s ORDER BY id", [1, 5]),
    Q("SELECT id FROM t_bin WHERE NOT user_id BETWEEN %s AND %s ORDER BY id", [1, 5]),
]


#: (backend, query, units): b'..' / 0b.. and REGEXP are MySQL syntax SQLite does not have; MariaDB runs them.
ORACLE_RUNS = [(name, q, units) for q, units, only in ORACLE for name in ("sqlite", "mariadb") if only in (None, name)]


@pytest.mark.parametrize(("backend_name", "query", "units"), ORACLE_RUNS,
                         ids=[f"{name}-{q.sql[:70]}" for name, q, _ in ORACLE_RUNS])
def test_oracle(request: pytest.FixtureRequest, backend_name: str, query: Query, units: int | None) -> None:
    backend: Backend = request.getfixturevalue(f"{backend_name}_bin")
    if units is not None:
        plan = backend.executor.router.route(query.text(backend.placeholder), query.params)
        assert len(plan.units) == units, (query.sql, [u.data_source for u in plan.units])
    oracle_check(backend, query, stream=None)
