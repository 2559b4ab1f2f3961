"""Governance of ``ddm proxy``: rate limits, masking, the slow-SQL audit log.

The token buckets and masks are checked directly with a stepped clock (no
sleeping); then a real proxy subprocess shows each on the wire to PyMySQL.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pytest

from services import fresh_mariadb_databases, mariadb_rows, require_module

require_module("mysql_mimic", "ddm proxy")
pymysql: Any = require_module("pymysql", "the proxy's client tests")

from ddm_core.errors import RateLimitedError  # noqa: E402
from ddm_core.metadata.model import MaskRule  # noqa: E402
from ddm_core.proxy import native_password_hash  # noqa: E402
from ddm_core.proxy.audit import AuditLog  # noqa: E402
from ddm_core.proxy.masking import Masker, mask_value  # noqa: E402
from ddm_core.proxy.ratelimit import RateLimiter  # noqa: E402
from test_proxy_support import PASSWORD, SMALL, USER, ProxyProcess, connect, create_tables, proxy_config, write_config  # noqa: E402


class SteppedClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# -- token buckets --------------------------------------------------------------------------------------


def test_a_users_bucket_refills_with_the_clock() -> None:
    clock = SteppedClock()
    limiter = RateLimiter({"app": 2, "free": 0}, {}, clock)
    limiter.admit("app", [])
    limiter.admit("app", [])
    with pytest.raises(RateLimitedError) as info:
        limiter.admit("app", [])
    assert info.value.user == "app" and info.value.limit == 2 and "rateLimit" in info.value.message
    clock.now += 0.5  # one token back
    limiter.admit("app", [])
    with pytest.raises(RateLimitedError):
        limiter.admit("app", [])
    clock.now += 60  # never more than one second's worth saved up
    limiter.admit("app", [])
    limiter.admit("app", [])
    with pytest.raises(RateLimitedError):
        limiter.admit("app", [])
    for _ in range(100):
        limiter.admit("free", [])  # 0: not limited
        limiter.admit(None, [])


def test_a_table_refusal_takes_no_token_from_the_user() -> None:
    clock = SteppedClock()
    limiter = RateLimiter({"app": 2}, {"T_Order": 1}, clock)
    limiter.admit("app", ["t_order", "t_order"])  # one token per table, however often named
    with pytest.raises(RateLimitedError) as info:
        limiter.admit("app", ["t_order"])
    assert info.value.table == "T_Order" and info.value.user == "app"
    limiter.admit("app", ["t_dict"])  # the user still had its second token
    with pytest.raises(RateLimitedError) as user_refusal:
        limiter.admit("app", ["t_dict"])
    assert user_refusal.value.table is None


# -- masks ----------------------------------------------------------------------------------------------


def test_mask_kinds() -> None:
    assert mask_value("phone", "13812341234") == "138****1234"
    assert mask_value("phone", 13812341234) == "138****1234"
    assert mask_value("phone", "12345") == "*****"
    assert mask_value("email", "alice@example.com") == "a***@example.com"
    assert mask_value("email", "not-an-email") == "****"
    assert mask_value("full", b"secret") == "****"
    assert mask_value("phone", None) is None


def test_rules_match_columns_and_tables() -> None:
    masker = Masker([MaskRule("phone", "phone", "t_user"), MaskRule("EMAIL", "email")])
    assert masker.columns(["id", "Phone", "email"], ["T_USER"]) == {1: "phone", 2: "email"}
    assert masker.columns(["id", "phone", "email"], ["t_order"]) == {2: "email"}
    assert Masker.apply([(1, "13812341234", "a@b.c")], {1: "phone"}) == [(1, "138****1234", "a@b.c")]


def test_audit_log_threshold_and_record(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.jsonl", threshold_ms=100)
    assert not log.record(user="app", client="127.0.0.1", sql="SELECT 1", units=[("ds_0", "SELECT 1")], rows=1, ms=99.9)
    assert log.record(user="app", client="127.0.0.1", sql="SELECT\n  2", units=[("ds_0", "SELECT 2")], rows=1, ms=150)
    log.close()
    lines = (tmp_path / "audit.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1
    entry = json.loads(lines[0])
    assert entry["sql"] == "SELECT 2" and entry["physical"] == [{"data_source": "ds_0", "sql": "SELECT 2"}]
    assert (entry["user"], entry["client"], entry["rows"], entry["ms"]) == ("app", "127.0.0.1", 1, 150)


# -- on the wire ------------------------------------------------------------------------------------------

ADMIN = "admin"


@pytest.fixture(scope="module")
def governed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ProxyProcess, dict[str, Any], Path]]:
    base = tmp_path_factory.mktemp("governed")
    audit = base / "audit.jsonl"
    with fresh_mariadb_databases(2) as databases:
        config = proxy_config(
            databases,
            tableRateLimits={SMALL: 1},
            masks=[{"column": "note", "mask": "phone", "table": "t_order"}, {"column": "name", "mask": "full"}],
            auditAll=True,
            auditLog=str(audit),
        )
        config["proxy"]["users"].append({"name": ADMIN, "passwordHash": native_password_hash(PASSWORD), "unmask": True})
        create_tables(config)
        proxy = ProxyProcess(write_config(config, base / "proxy.yaml")).start()
        try:
            yield proxy, config, audit
        finally:
            proxy.stop()


def test_masked_for_users_without_unmask(governed: tuple[ProxyProcess, dict[str, Any], Path]) -> None:
    proxy = governed[0]
    app = connect(proxy.port, autocommit=True)
    admin = connect(proxy.port, autocommit=True, user=ADMIN)
    with app.cursor() as cur:
        cur.execute("INSERT INTO t_order (order_id, user_id, note) VALUES (1, 7, '13812341234')")
        cur.execute("INSERT INTO t_dict (id, name) VALUES (1, 'internal name')")
        cur.execute("SELECT order_id, note FROM t_order WHERE user_id = 7")
        assert cur.fetchall() == ((1, "138****1234"),)
        cur.execute("SELECT id, name FROM t_dict")
        assert cur.fetchall() == ((1, "****"),)
    with admin.cursor() as cur:
        cur.execute("SELECT order_id, note FROM t_order WHERE user_id = 7")
        assert cur.fetchall() == ((1, "13812341234"),)
        cur.execute("SELECT id, name FROM t_dict")
        assert cur.fetchall() == ((1, "internal name"),)
    app.close()
    admin.close()


def test_a_table_over_its_rate_limit_is_refused_with_1226(governed: tuple[ProxyProcess, dict[str, Any], Path]) -> None:
    proxy, config = governed[0], governed[1]
    conn = connect(proxy.port, autocommit=True)
    done, refused = 0, None
    with conn.cursor() as cur:
        # 1 statement a second on t_small: back-to-back inserts meet a refusal long before the 50th.
        for i in range(1, 51):
            try:
                cur.execute(f"INSERT INTO {SMALL} (order_id, user_id) VALUES (%s, %s)", (i, i))
                done += 1
            except pymysql.err.MySQLError as exc:
                refused = exc
                break
        assert refused is not None and refused.args[0] == 1226 and SMALL in refused.args[1]
        cur.execute("SELECT COUNT(*) FROM t_order WHERE user_id = 1")  # other tables are not limited; the session goes on
    conn.close()
    databases = [str(config["dataSources"][ds]["url"]).rsplit("/", 1)[-1] for ds in ("ds_0", "ds_1")]
    stored = sum(len(mariadb_rows(db, f"SELECT order_id FROM {SMALL}")) for db in databases)
    assert stored == done  # the refused INSERT never reached a data source


def test_every_statement_is_audited_as_a_json_line(governed: tuple[ProxyProcess, dict[str, Any], Path]) -> None:
    proxy, _, audit = governed
    conn = connect(proxy.port, autocommit=True)
    with conn.cursor() as cur:
        cur.execute("SELECT order_id FROM t_order WHERE user_id IN (1, 2, 3) /* audited */")
        cur.fetchall()
        with pytest.raises(pymysql.err.ProgrammingError):
            cur.execute("SELECT * FROM no_such_table /* failed */")
    conn.close()
    entries = [json.loads(line) for line in audit.read_text(encoding="utf-8").splitlines()]
    mine = [e for e in entries if "/* audited */" in e["sql"]]
    assert len(mine) == 1
    entry = mine[0]
    assert entry["user"] == USER and entry["client"] == "127.0.0.1" and entry["rows"] == 0
    assert entry["physical"] and all(p["data_source"] in ("ds_0", "ds_1") and "t_order_" in p["sql"]
                                     for p in entry["physical"])  # fmt: skip
    assert isinstance(entry["ms"], (int, float)) and entry["ms"] >= 0
    failed = [e for e in entries if "/* failed */" in e["sql"]]
    assert len(failed) == 1 and "1146" in failed[0]["error"] and failed[0]["rows"] == 0
    assert PASSWORD not in audit.read_text(encoding="utf-8")


def test_masks_follow_the_projection() -> None:
    from ddm_core.proxy.masking import projection_masks

    masker = Masker([MaskRule("phone", "phone", "t_user"), MaskRule("email", "email")])

    def plan(sql: str) -> tuple[dict[int, str], dict[str, str], str | None]:
        found = projection_masks(masker, sql, ["t_user"])
        return dict(found.positions), dict(found.by_name), found.refusal

    assert plan("SELECT id, phone AS p FROM t_user WHERE id = ?") == ({1: "phone"}, {}, None)
    assert plan("SELECT u.phone, o.phone FROM t_user u JOIN t_order o ON u.id = o.id") == ({0: "phone"}, {}, None)
    # an expression over a masked column is masked whole: a part could show hidden digits
    assert plan("SELECT CONCAT(phone, ''), UPPER(email) AS e, SUBSTR(phone, 1, 8), MAX(phone) FROM t_user")[0] == {
        0: "full", 1: "full", 2: "full", 3: "full"}
    assert plan("SELECT COUNT(phone), COUNT(DISTINCT email) FROM t_user") == ({}, {}, None)  # counts show no value
    assert plan("SELECT * FROM t_user") == ({}, {"phone": "phone", "email": "email"}, None)
    assert plan("SELECT u.* FROM t_user u") == ({}, {"phone": "phone", "email": "email"}, None)
    assert plan("SELECT p FROM (SELECT phone AS p FROM t_user) d") == ({0: "phone"}, {}, None)
    assert plan("SELECT * FROM (SELECT phone AS p FROM t_user) d")[1] == {"p": "phone"}
    assert plan("WITH c AS (SELECT phone AS k FROM t_user) SELECT k FROM c") == ({0: "phone"}, {}, None)
    assert plan("SELECT id FROM t_order UNION ALL SELECT phone FROM t_user") == ({0: "phone"}, {}, None)
    assert plan("SELECT email FROM t_user UNION SELECT phone FROM t_user") == ({0: "full"}, {}, None)  # kinds differ
    assert plan("SELECT (SELECT phone FROM t_user LIMIT 1) AS s FROM t_order") == ({0: "full"}, {}, None)
    assert plan("SELECT phone FROM t_order") == ({}, {}, None)  # the rule is t_user's
    refusal = plan("SELECT *, phone AS x FROM t_user")[2]
    assert refusal is not None and "*" in refusal


def test_masks_on_the_wire_by_projection(governed: tuple[ProxyProcess, dict[str, Any], Path]) -> None:
    proxy = governed[0]
    app = connect(proxy.port, autocommit=True)
    admin = connect(proxy.port, autocommit=True, user=ADMIN)
    with app.cursor() as cur:
        cur.execute("INSERT INTO t_order (order_id, user_id, note) VALUES (2, 8, '13912345678')")
        cur.execute("SELECT note AS n, o.note FROM t_order o WHERE o.user_id = 8")
        assert cur.fetchall() == (("139****5678", "139****5678"),)
        assert cur.description[0][0] == "n"
        cur.execute("SELECT CONCAT(note, ''), SUBSTR(note, 1, 8), UPPER(note) FROM t_order WHERE user_id = 8")
        assert cur.fetchall() == (("****", "****", "****"),)
        cur.execute("SELECT COUNT(note) FROM t_order WHERE user_id = 8")
        assert cur.fetchall() == ((1,),)
        with pytest.raises(pymysql.err.MySQLError) as info:
            cur.execute("SELECT *, note AS x FROM t_order WHERE user_id = 8")
        assert info.value.args[0] == 1235 and "masked" in info.value.args[1] and "*" in info.value.args[1]
        cur.execute("SELECT order_id, note FROM t_order WHERE user_id = 8")  # the session goes on
        assert cur.fetchall() == ((2, "139****5678"),)
    with admin.cursor() as cur:
        cur.execute("SELECT note AS n, CONCAT(note, '') FROM t_order WHERE user_id = 8")
        assert cur.fetchall() == (("13912345678", "13912345678"),)
        cur.execute("SELECT *, note AS x FROM t_order WHERE user_id = 8")  # unmask: nothing to refuse
        assert cur.fetchall()[0][-1] == "13912345678"
    app.close()
    admin.close()
