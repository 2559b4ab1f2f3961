"""``ddm proxy --follow URL``: a proxy that follows a configuration center and registers as an instance.

A real Redis configuration center (127.0.0.1:6379, a key prefix of this test's own) and a real
``ddm proxy`` process. Version 1 refuses a statement without its shard key (``allowFullRoute:
false``); version 2, published while the proxy serves, allows it: the proxy takes it without a
restart. Meanwhile the proxy's record in the instance registry (``ddm instances``) names it a proxy
serving the version it took, and is gone once the proxy stops. The same for etcd through the
``etcd://`` form is covered by the executor tests of the source; this checks the command's wiring.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any, Callable, Iterator

import pytest
import yaml
from click.testing import CliRunner

from services import fresh_mariadb_databases, require_module
from test_proxy_support import ProxyProcess, connect, create_tables, proxy_config

require_module("mysql_mimic", "ddm proxy needs the proxy extra")
redis = pytest.importorskip("redis", reason="the Redis configuration center needs the redis extra")

from ddm_core.cli import cli  # noqa: E402
from ddm_core.metadata.sources.redis import RedisSource  # noqa: E402

URL = "redis://127.0.0.1:6379/0"
WAIT = 30.0  # a bound on convergence, not a measurement


def _wait_until(what: str, check: Callable[[], bool]) -> None:
    end = time.monotonic() + WAIT
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"not within {WAIT:g} s: {what}")
        time.sleep(0.1)


def _instances(prefix: str) -> dict[str, Any]:
    result = CliRunner().invoke(cli, ["instances", "--redis", URL, "--prefix", prefix, "--json"])
    assert result.exit_code == 0, result.output
    shown: dict[str, Any] = json.loads(result.output)
    return shown


@pytest.fixture()
def center() -> Iterator[tuple[RedisSource, str, dict[str, Any]]]:
    prefix = f"ddm:test:{uuid.uuid4().hex[:10]}"
    source = RedisSource(redis.Redis.from_url(URL, socket_timeout=5), prefix=prefix)
    with fresh_mariadb_databases(2) as databases:
        # A proxy reports a version it took once the statement deadline has passed (statements begun under the
        # old one are over by then): the product's 3 s, within WAIT.
        config = proxy_config(databases, statementTimeoutMs=3000)
        create_tables(config)
        try:
            yield source, prefix, config
        finally:
            keys = list(source.client.scan_iter(match=prefix + ":*"))
            if keys:
                source.client.delete(*keys)


def _full_count(port: int) -> Any:
    conn = connect(port)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM t_order")  # no shard key: every table
            return cur.fetchall()
    finally:
        conn.close()


def test_a_proxy_follows_a_center_takes_a_new_version_and_registers(center: tuple[RedisSource, str, dict[str, Any]],
                                                                      tmp_path: Any) -> None:  # fmt: skip
    source, prefix, config = center
    assert source.publish(yaml.safe_dump(config, sort_keys=False)) == 1
    snapshot = tmp_path / "snapshot.json"
    proxy = ProxyProcess(None, "--follow", URL, "--prefix", prefix, "--snapshot", str(snapshot)).start()
    try:
        conn = connect(proxy.port)
        with conn.cursor() as cur:
            cur.execute("INSERT INTO t_order (order_id, user_id, amount) VALUES (1, 7, 10), (2, 8, 20)")
            conn.commit()
            with pytest.raises(Exception, match="allow_full_route is false"):
                cur.execute("SELECT COUNT(*) FROM t_order")  # version 1: refused without the shard key
        conn.close()

        _wait_until("the proxy registers", lambda: len(_instances(prefix)["instances"]) == 1)
        (record,) = _instances(prefix)["instances"]
        assert (record["role"], record["pid"], record["version"]) == ("proxy", proxy.proc.pid, 1)  # type: ignore[union-attr]

        allowed = {**config, "runtime": {**config["runtime"], "allowFullRoute": True}}
        assert source.publish(yaml.safe_dump(allowed, sort_keys=False)) == 2
        _wait_until("the proxy takes version 2", lambda: _instances(prefix)["instances"][0]["version"] == 2)
        assert _full_count(proxy.port) == ((2,),)  # version 2 serves the statement, no restart
        assert snapshot.exists()  # the last version taken, kept for a start while the center is down
        assert proxy.terminate() == 0
        _wait_until("a stopped proxy's record is removed", lambda: _instances(prefix)["instances"] == [])
    finally:
        proxy.stop()


@pytest.mark.parametrize("args, fragment", [
    ([], "one of the two"),
    (["--follow", URL, "-c", "x.yaml"], "one of the two"),
    (["--prefix", "p"], "one of the two"),
    (["--follow", "zookeeper://127.0.0.1:2181/ddm"], "zookeeper"),
])  # fmt: skip
def test_the_configuration_is_a_file_or_a_center(args: list[str], fragment: str, tmp_path: Any) -> None:
    if "x.yaml" in args:
        (tmp_path / "x.yaml").write_text("dataSources: {}\n")
        args = [a if a != "x.yaml" else str(tmp_path / "x.yaml") for a in args]
    result = CliRunner().invoke(cli, ["proxy", *args, "--port", "0"])
    assert result.exit_code != 0
    assert fragment in result.output + str(result.exception or "")
