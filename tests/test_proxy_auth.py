"""``caching_sha2_password`` on the proxy: the scramble check, the wire exchange, real clients.

The vectors are computed here with hashlib from the formula of the MySQL
documentation (Scramble = XOR(SHA256(password), SHA256(SHA256(SHA256(password)) + Nonce))),
not with the proxy's code. One proxy subprocess for the module, with three
users: ``app`` has only a ``sha2Hash``, ``legacy`` only a ``passwordHash``,
``both`` has both.
"""

from __future__ import annotations

import hashlib
import os
import struct
import subprocess
from typing import Any, Iterator

import pytest

from services import fresh_mariadb_databases, require_module

require_module("mysql_mimic", "ddm proxy")
pymysql: Any = require_module("pymysql", "the proxy's client tests")

from ddm_core.proxy import native_password_hash, sha2_password_hash  # noqa: E402
from ddm_core.proxy.auth import sha2_scramble_matches  # noqa: E402
from raw_mysql import RawClient, sha2_scramble  # noqa: E402
from test_proxy_support import (  # noqa: E402
    PASSWORD,
    USER,
    ProxyProcess,
    connect,
    create_tables,
    mariadb_cli,
    proxy_config,
    write_config,
)

LEGACY, LEGACY_PASSWORD = "legacy", "old-Pw-1"
BOTH, BOTH_PASSWORD = "both", "two-Ways-2"
NONCE = b"0123456789abcdefghij"  # 20 bytes, as the handshake sends


#: What a MySQL 8 client sends: XOR(SHA256(pw), SHA256(SHA256(SHA256(pw)) + nonce)).
client_scramble = sha2_scramble


# -- the check, offline ---------------------------------------------------------------------------


def test_sha2_hash_is_double_sha256_in_hex() -> None:
    assert sha2_password_hash("s3cret") == hashlib.sha256(hashlib.sha256(b"s3cret").digest()).hexdigest()
    assert sha2_password_hash("") == "5df6e0e2761359d30a8275058e299fcc0381534545f55cf43e41983f5d4c9456"
    # the documented shell one-liner (docs/proxy.md#users-and-passwords) gives the same value
    shell = subprocess.run(["sh", "-c", "printf %s \"$PW\" | openssl dgst -sha256 -binary | sha256sum | cut -d' ' -f1"],
                           env={**os.environ, "PW": "s3cret"}, capture_output=True, text=True, check=True)  # fmt: skip
    assert shell.stdout.strip() == sha2_password_hash("s3cret")


def test_a_client_scramble_is_accepted_for_its_password_only() -> None:
    stored = hashlib.sha256(hashlib.sha256(b"s3cret").digest()).hexdigest()
    good = client_scramble("s3cret", NONCE)
    assert len(good) == 32
    assert sha2_scramble_matches(stored, good, NONCE)
    assert not sha2_scramble_matches(stored, client_scramble("s3cret!", NONCE), NONCE)
    assert not sha2_scramble_matches(stored, client_scramble("s3cret", NONCE[::-1]), NONCE), "another nonce"
    assert not sha2_scramble_matches(stored, good[:31], NONCE)
    assert not sha2_scramble_matches(stored, b"", NONCE)
    flipped = bytes([good[0] ^ 1]) + good[1:]
    assert not sha2_scramble_matches(stored, flipped, NONCE)
    # knowing the stored hash is not enough: sending it (or its hash) as the scramble fails
    assert not sha2_scramble_matches(stored, bytes.fromhex(stored), NONCE)


# -- on the wire ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyProcess]:
    with fresh_mariadb_databases(2) as databases:
        config = proxy_config(databases, users=[
            {"name": USER, "sha2Hash": sha2_password_hash(PASSWORD)},
            {"name": LEGACY, "passwordHash": native_password_hash(LEGACY_PASSWORD)},
            {"name": BOTH, "passwordHash": native_password_hash(BOTH_PASSWORD),
             "sha2Hash": sha2_password_hash(BOTH_PASSWORD)},
        ])  # fmt: skip
        create_tables(config)
        process = ProxyProcess(write_config(config, tmp_path_factory.mktemp("auth") / "proxy.yaml")).start()
        try:
            yield process
        finally:
            process.stop()


def _raw_login(port: int, user: str, password: str) -> list[bytes]:
    """A hand-written HandshakeResponse41 with a caching_sha2_password scramble; the packets answered."""
    with RawClient(port, timeout=10) as client:
        hello = client.greeting()
        assert hello.plugin == "caching_sha2_password" and len(hello.nonce) == 20
        caps = 0x200 | 0x8000 | 0x80000  # PROTOCOL_41, SECURE_CONNECTION, PLUGIN_AUTH
        scramble = client_scramble(password, hello.nonce)
        body = (struct.pack("<IIB", caps, 1 << 24, 45) + b"\x00" * 23 + user.encode() + b"\x00"
                + bytes([len(scramble)]) + scramble + b"caching_sha2_password\x00")  # fmt: skip
        client.send(body, seq=1)
        answers = []
        while True:
            payload = client.packet()
            answers.append(payload)
            if payload[0] in (0x00, 0xFF) or len(answers) > 3:
                return answers


def test_the_fast_auth_exchange_byte_by_byte(proxy: ProxyProcess) -> None:
    ok = _raw_login(proxy.port, USER, PASSWORD)
    assert ok[0] == b"\x01\x03", "AuthMoreData with fast_auth_success (0x03) comes before the OK packet"
    assert ok[1][0] == 0x00 and len(ok) == 2
    denied = _raw_login(proxy.port, USER, "wrong")
    assert len(denied) == 1 and denied[0][0] == 0xFF, "no full-authentication request (0x04): denied at once"
    assert int.from_bytes(denied[0][1:3], "little") == 1045
    unknown = _raw_login(proxy.port, "nobody", PASSWORD)
    assert unknown[0][:3] == denied[0][:3] and b"#28000" in unknown[0]


def test_pymysql_negotiates_caching_sha2_and_queries(proxy: ProxyProcess) -> None:
    conn = connect(proxy.port, autocommit=True)
    assert conn._auth_plugin_name == "caching_sha2_password"  # what the handshake named, and PyMySQL answered
    with conn.cursor() as cur:
        cur.execute("INSERT INTO t_order (order_id, user_id, amount) VALUES (1, 10, 5)")
        cur.execute("SELECT order_id, amount FROM t_order WHERE user_id = 10")
        assert cur.fetchall() == ((1, 5),)
        cur.execute("SELECT CURRENT_USER()")
        assert cur.fetchone()[0].startswith(f"{USER}@")
        cur.execute("DELETE FROM t_order WHERE user_id = 10")
    conn.close()


@pytest.mark.parametrize("user, password", [(USER, "wrong"), (USER, ""), ("nobody", PASSWORD), (BOTH, LEGACY_PASSWORD)])
def test_wrong_credentials_get_access_denied(proxy: ProxyProcess, user: str, password: str) -> None:
    with pytest.raises(pymysql.err.OperationalError) as info:
        connect(proxy.port, user=user, password=password)
    assert info.value.args[0] == 1045 and info.value.sqlstate == "28000"
    assert PASSWORD not in proxy.stderr


def test_native_only_and_dual_users_log_in(proxy: ProxyProcess) -> None:
    # legacy: PyMySQL answers the handshake with a sha2 scramble, the proxy switches it to native.
    for user, password in ((LEGACY, LEGACY_PASSWORD), (BOTH, BOTH_PASSWORD)):
        conn = connect(proxy.port, user=user, password=password)
        with conn.cursor() as cur:
            cur.execute("SELECT CURRENT_USER()")
            assert cur.fetchone()[0].startswith(f"{user}@")
        conn.close()


@pytest.mark.parametrize("plugin", ["mysql_native_password", "caching_sha2_password"])
def test_mysql_connector_with_either_plugin(proxy: ProxyProcess, plugin: str) -> None:
    connector = require_module("mysql.connector", "mysql-connector-python")
    # both: the client's own plugin is used; app (sha2 only) and legacy (native only): switched when they differ.
    for user, password in ((BOTH, BOTH_PASSWORD), (USER, PASSWORD), (LEGACY, LEGACY_PASSWORD)):
        conn = connector.connect(host="127.0.0.1", port=proxy.port, user=user, password=password,
                                 database="logic_db", auth_plugin=plugin, use_pure=True, ssl_disabled=True,
                                 connection_timeout=10)  # fmt: skip
        cur = conn.cursor()
        cur.execute("SELECT 1")
        assert cur.fetchall() == [(1,)]
        conn.close()
    with pytest.raises(connector.errors.ProgrammingError) as info:
        connector.connect(host="127.0.0.1", port=proxy.port, user=BOTH, password="nope", database="logic_db",
                          auth_plugin=plugin, use_pure=True, ssl_disabled=True, connection_timeout=10)  # fmt: skip
    assert info.value.errno == 1045


@pytest.mark.parametrize("default_auth", ["caching_sha2_password", "mysql_native_password"])
def test_mariadb_command_line_with_caching_sha2(proxy: ProxyProcess, default_auth: str) -> None:
    # libmariadb ships caching_sha2_password as a client plugin; answering with the native one first,
    # it is switched to caching_sha2_password for this sha2-only user.
    done = mariadb_cli(proxy.port, "SELECT 41 + 1 AS answer", tls=("--skip-ssl", f"--default-auth={default_auth}"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["answer", "42"]
    wrong = mariadb_cli(proxy.port, "SELECT 1", password="wrong", tls=("--skip-ssl", f"--default-auth={default_auth}"))
    assert wrong.returncode != 0 and "1045" in wrong.stderr
