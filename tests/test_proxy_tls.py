"""``ddm proxy`` over TLS (``proxy.tls``): PyMySQL ``ssl=`` and the ``mariadb`` command line ``--ssl``.

A self-signed certificate is made for each run with the ``openssl`` command
line; the proxy requires TLS, so a plain client is refused with 3159 before its
credentials are looked at, and one holding the certificate as its CA verifies
the server. (PyMySQL switches to TLS by itself when the server offers it; the
plain client is asked for with ``ssl_disabled``.)
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any, Iterator

import pytest

from services import fresh_mariadb_databases, require_module, require_service

require_module("mysql_mimic", "ddm proxy")
pymysql: Any = require_module("pymysql", "the proxy's client tests")

from test_proxy_support import ProxyProcess, connect, create_tables, mariadb_cli, proxy_config, write_config  # noqa: E402


def _self_signed(directory: Path) -> tuple[Path, Path]:
    openssl = shutil.which("openssl")
    if openssl is None:
        require_service("the openssl command line", "not on PATH")
    cert, key = directory / "proxy.crt", directory / "proxy.key"
    subprocess.run(
        [str(openssl), "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert, key


@pytest.fixture(scope="module")
def tls_proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ProxyProcess, Path]]:
    base = tmp_path_factory.mktemp("tls")
    cert, key = _self_signed(base)
    with fresh_mariadb_databases(2) as databases:
        config = proxy_config(databases, tls={"cert": str(cert), "key": str(key), "required": True})
        create_tables(config)
        proxy = ProxyProcess(write_config(config, base / "proxy.yaml")).start()
        try:
            yield proxy, cert
        finally:
            proxy.stop()


def test_pymysql_over_tls_verifies_the_certificate(tls_proxy: tuple[ProxyProcess, Path]) -> None:
    proxy, cert = tls_proxy
    conn = connect(proxy.port, autocommit=True, ssl={"ca": str(cert)})
    with conn.cursor() as cur:
        cur.execute("INSERT INTO t_order (order_id, user_id, amount) VALUES (1, 5, 3)")
        cur.execute("SELECT order_id, amount FROM t_order WHERE user_id = 5")
        assert cur.fetchall() == ((1, 3),)
        cur.execute("SHOW STATUS LIKE 'Ssl_cipher'")  # answered empty by the proxy; the socket tells
    assert conn._sock.version() in ("TLSv1.2", "TLSv1.3")  # PyMySQL's socket is the TLS one
    conn.close()


def test_a_client_without_tls_is_refused(tls_proxy: tuple[ProxyProcess, Path]) -> None:
    with pytest.raises(pymysql.err.OperationalError) as info:
        connect(tls_proxy[0].port, ssl_disabled=True)  # PyMySQL 1.1+ would switch to TLS when offered
    assert info.value.args[0] == 3159 and "requires TLS" in info.value.args[1]


def test_a_client_that_does_not_trust_the_certificate_fails(tls_proxy: tuple[ProxyProcess, Path], tmp_path: Path) -> None:
    other, _ = _self_signed(tmp_path)  # another self-signed certificate: not the proxy's CA
    with pytest.raises(pymysql.err.OperationalError):
        connect(tls_proxy[0].port, ssl={"ca": str(other)})


def test_mariadb_command_line_with_ssl(tls_proxy: tuple[ProxyProcess, Path]) -> None:
    proxy, cert = tls_proxy
    done = mariadb_cli(proxy.port, "SELECT COUNT(*) AS n FROM t_order WHERE user_id = 99; SHOW DATABASES",
                       tls=("--ssl", f"--ssl-ca={cert}", "--ssl-verify-server-cert"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["n", "0", "Database", "logic_db"]
    plain = mariadb_cli(proxy.port, "SELECT 1")
    assert plain.returncode == 1 and "ERROR 3159" in plain.stderr


def test_unreadable_certificate_stops_the_proxy_at_start(tmp_path: Path) -> None:
    config = proxy_config(["unused_a", "unused_b"], tls={"cert": str(tmp_path / "missing.crt"), "key": str(tmp_path / "k")})
    with pytest.raises(AssertionError) as info:  # ProxyProcess.start: it never listened
        ProxyProcess(write_config(config, tmp_path / "proxy.yaml")).start()
    assert "proxy.tls" in str(info.value) and "missing.crt" in str(info.value)
