"""``ddm proxy`` over TLS (``proxy.tls``): PyMySQL ``ssl=`` and the ``mariadb`` command line ``--ssl``.

A self-signed certificate is made for each run with the ``openssl`` command
line; the proxy requires TLS, so a plain client is refused with 3159 before its
credentials are looked at, and one holding the certificate as its CA verifies
the server. (PyMySQL switches to TLS by itself when the server offers it; the
plain client is asked for with ``ssl_disabled``.)

Client certificates (``tls.clientCa``, ``tls.clientCert``, a user's
``requireCertSubject``): a test CA signs client certificates, another CA signs
one the proxy must not trust; one proxy requires a certificate of every client,
another asks for one and checks the subject of the users that require it.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from services import fresh_mariadb_databases, require_module, require_service

require_module("mysql_mimic", "ddm proxy")
pymysql: Any = require_module("pymysql", "the proxy's client tests")

from ddm_core.proxy import native_password_hash, sha2_password_hash  # noqa: E402
from test_proxy_support import (  # noqa: E402
    PASSWORD, USER, ProxyProcess, connect, create_tables, mariadb_cli, proxy_config, write_config,
)  # fmt: skip


def _openssl(*args: str) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        require_service("the openssl command line", "not on PATH")
    subprocess.run([str(openssl), *args], check=True, capture_output=True, timeout=60)


def _self_signed(directory: Path, name: str = "proxy", subject: str = "/CN=127.0.0.1") -> tuple[Path, Path]:
    """A self-signed certificate and its key: the proxy's, or (any other subject) a CA."""
    cert, key = directory / f"{name}.crt", directory / f"{name}.key"
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", subject,
             "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert))  # fmt: skip
    return cert, key


def _signed(directory: Path, ca: tuple[Path, Path], name: str, subject: str) -> tuple[Path, Path]:
    """A client certificate with ``subject`` signed by ``ca`` (certificate, key), and its key."""
    cert, key, request = directory / f"{name}.crt", directory / f"{name}.key", directory / f"{name}.csr"
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", subject, "-keyout", str(key), "-out", str(request))
    _openssl("x509", "-req", "-in", str(request), "-CA", str(ca[0]), "-CAkey", str(ca[1]), "-CAcreateserial",
             "-days", "2", "-out", str(cert))  # fmt: skip
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


# -- client certificates -------------------------------------------------------------------------

SVC, SVC_PASSWORD, SVC_SUBJECT = "svc", "svc-Pw-2", "CN=svc-client,O=Acme"
SVC_SHA2 = "svc8"  # the same requirement, caching_sha2_password only


class ClientCerts:
    """The proxy's certificate, the client CA, and client certificates (certificate, key) by name."""

    def __init__(self, base: Path) -> None:
        self.server, self.server_key = _self_signed(base)
        self.ca = _self_signed(base, "client-ca", "/CN=ddm test client CA")
        self.other_ca = _self_signed(base, "other-ca", "/CN=another CA")
        self.app = _signed(base, self.ca, "app", "/CN=app-client/O=Acme")
        self.svc = _signed(base, self.ca, "svc", "/O=Acme/CN=svc-client")  # SVC_SUBJECT, the other order
        self.stranger = _signed(base, self.other_ca, "stranger", "/O=Acme/CN=svc-client")

    def ssl(self, client: tuple[Path, Path] | None = None) -> dict[str, str]:
        """PyMySQL's ``ssl=``: trust the proxy, and present ``client``."""
        return {"ca": str(self.server), **({"cert": str(client[0]), "key": str(client[1])} if client else {})}

    def tls(self, mode: str) -> dict[str, Any]:
        return {"cert": str(self.server), "key": str(self.server_key), "clientCa": str(self.ca[0]), "clientCert": mode}


@pytest.fixture(scope="module")
def client_certs(tmp_path_factory: pytest.TempPathFactory) -> ClientCerts:
    return ClientCerts(tmp_path_factory.mktemp("client-certs"))


def _proxy(certs: ClientCerts, mode: str, path: Path, databases: list[str]) -> ProxyProcess:
    users = [{"name": USER, "passwordHash": native_password_hash(PASSWORD)},
             {"name": SVC, "passwordHash": native_password_hash(SVC_PASSWORD), "requireCertSubject": SVC_SUBJECT},
             {"name": SVC_SHA2, "sha2Hash": sha2_password_hash(SVC_PASSWORD), "requireCertSubject": SVC_SUBJECT}]
    config = proxy_config(databases, tls=certs.tls(mode), users=users)  # fmt: skip
    return ProxyProcess(write_config(config, path)).start()


@pytest.fixture(scope="module")
def mtls_proxies(client_certs: ClientCerts,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ProxyProcess]]:  # fmt: skip
    """``clientCert: required`` and ``clientCert: optional`` proxies over the same databases."""
    base = tmp_path_factory.mktemp("mtls")
    with fresh_mariadb_databases(2) as databases:
        create_tables(proxy_config(databases))
        proxies: dict[str, ProxyProcess] = {}
        try:
            for mode in ("required", "optional"):
                proxies[mode] = _proxy(client_certs, mode, base / f"{mode}.yaml", databases)
            yield proxies
        finally:
            for proxy in proxies.values():
                proxy.stop()


def _wait_for(proxy: ProxyProcess, *parts: str) -> None:
    """A line of the proxy's log holds every one of ``parts`` (it is read by a thread: allow it a moment)."""
    deadline = time.monotonic() + 10  # a bound, not a measurement
    while not any(all(p in line for p in parts) for line in proxy.lines):
        assert time.monotonic() < deadline, f"no log line with {parts}:\n{proxy.stderr}"
        time.sleep(0.02)


def _logs_in(port: int, **options: Any) -> str:
    conn = connect(port, **options)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM t_order WHERE user_id = 7")
            assert cur.fetchall() == ((0,),)
        return str(conn._sock.version())
    finally:
        conn.close()


def test_a_client_certificate_signed_by_the_ca_logs_in(mtls_proxies: dict[str, ProxyProcess],
                                                       client_certs: ClientCerts) -> None:  # fmt: skip
    for proxy in mtls_proxies.values():
        assert _logs_in(proxy.port, ssl=client_certs.ssl(client_certs.app)) in ("TLSv1.2", "TLSv1.3")


def test_required_refuses_a_client_without_a_certificate(mtls_proxies: dict[str, ProxyProcess],
                                                         client_certs: ClientCerts) -> None:  # fmt: skip
    port = mtls_proxies["required"].port
    with pytest.raises(pymysql.err.OperationalError) as info:  # the server ends the TLS handshake
        connect(port, ssl=client_certs.ssl())
    assert info.value.args[0] == 2013  # "Lost connection": the proxy's log says why
    _wait_for(mtls_proxies["required"], "TLS handshake with 127.0.0.1:", "failed: PEER_DID_NOT_RETURN_A_CERTIFICATE")
    with pytest.raises(pymysql.err.OperationalError) as plain:  # and clientCert: required implies TLS
        connect(port, ssl_disabled=True)
    assert plain.value.args[0] == 3159
    assert _logs_in(mtls_proxies["optional"].port, ssl=client_certs.ssl())  # optional: no certificate is fine


def test_a_certificate_of_another_ca_is_refused(mtls_proxies: dict[str, ProxyProcess],
                                                client_certs: ClientCerts) -> None:  # fmt: skip
    for proxy in mtls_proxies.values():  # optional too: a certificate sent must verify
        with pytest.raises(pymysql.err.OperationalError) as info:
            connect(proxy.port, ssl=client_certs.ssl(client_certs.stranger))
        assert info.value.args[0] == 2013
        _wait_for(proxy, "TLS handshake with 127.0.0.1:", "failed: CERTIFICATE_VERIFY_FAILED")


def test_require_cert_subject(mtls_proxies: dict[str, ProxyProcess], client_certs: ClientCerts) -> None:
    proxy = mtls_proxies["optional"]
    svc = {"user": SVC, "password": SVC_PASSWORD}
    assert _logs_in(proxy.port, ssl=client_certs.ssl(client_certs.svc), **svc)  # the subject, in another order
    refusals = {
        "another subject": client_certs.ssl(client_certs.app),
        "no certificate": client_certs.ssl(),
    }
    for why, ssl in refusals.items():
        with pytest.raises(pymysql.err.OperationalError) as info:
            connect(proxy.port, ssl=ssl, **svc)
        assert info.value.args[0] == 1045, why
    # caching_sha2_password: the subject is checked before the fast-auth success is sent
    assert _logs_in(proxy.port, ssl=client_certs.ssl(client_certs.svc), user=SVC_SHA2, password=SVC_PASSWORD)
    with pytest.raises(pymysql.err.OperationalError) as sha2:
        connect(proxy.port, ssl=client_certs.ssl(client_certs.app), user=SVC_SHA2, password=SVC_PASSWORD)
    assert sha2.value.args[0] == 1045
    with pytest.raises(pymysql.err.OperationalError) as wrong:  # both must pass: the right certificate is not enough
        connect(proxy.port, ssl=client_certs.ssl(client_certs.svc), user=SVC, password="wrong")
    assert wrong.value.args[0] == 1045
    _wait_for(proxy, f"user '{SVC}' refused: its client certificate's subject CN=app-client,O=Acme is not the "
              f"required {SVC_SUBJECT}")  # fmt: skip
    _wait_for(proxy, f"user '{SVC}' refused: it requires a client certificate with subject {SVC_SUBJECT} and the "
              "client sent none")  # fmt: skip
    assert SVC_PASSWORD not in proxy.stderr and "wrong" not in proxy.stderr


def test_mariadb_command_line_with_a_client_certificate(mtls_proxies: dict[str, ProxyProcess],
                                                        client_certs: ClientCerts) -> None:  # fmt: skip
    proxy = mtls_proxies["required"]
    server = ("--ssl", f"--ssl-ca={client_certs.server}", "--ssl-verify-server-cert")
    cert, key = client_certs.app
    done = mariadb_cli(proxy.port, "SELECT COUNT(*) AS n FROM t_order WHERE user_id = 98",
                       tls=(*server, f"--ssl-cert={cert}", f"--ssl-key={key}"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["n", "0"]
    without = mariadb_cli(proxy.port, "SELECT 1", tls=server)
    assert without.returncode == 1 and "ERROR 2026" in without.stderr, without.stderr  # a TLS error, 2026


def test_unreadable_client_ca_stops_the_proxy_at_start(client_certs: ClientCerts, tmp_path: Path) -> None:
    tls = {**client_certs.tls("required"), "clientCa": str(tmp_path / "missing-ca.pem")}
    config = proxy_config(["unused_a", "unused_b"], tls=tls)
    with pytest.raises(AssertionError) as info:  # ProxyProcess.start: it never listened
        ProxyProcess(write_config(config, tmp_path / "proxy.yaml")).start()
    assert "proxy.tls.clientCa" in str(info.value) and "missing-ca.pem" in str(info.value)
