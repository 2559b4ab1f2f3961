"""The ``proxy:`` configuration section: users with native and caching_sha2 hashes, limits, refusals."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
from pathlib import Path
from typing import Iterator

import pytest

from ddm_core import load_config
from ddm_core.errors import ConfigValidationError, ProxyError
from ddm_core.execute.slow_sql import SlowSqlLog
from ddm_core.metadata.dump import dump_native
from ddm_core.metadata.model import ProxySettings, ShardingConfig

from services import require_module

require_module("mysql_mimic", "ddm proxy")

from ddm_core.proxy import ProxyServer, native_password_hash, sha2_password_hash  # noqa: E402
from ddm_core.proxy.audit import AuditLog  # noqa: E402

BASE = """
dataSources:
  ds_0: {url: "mysql://127.0.0.1:3306/nowhere", username: root}
"""
HASH = native_password_hash("s3cret")


def test_native_password_hash_is_mysqls_stored_form() -> None:
    # MySQL: PASSWORD(p) = '*' + upper(hex(SHA1(SHA1(p)))), e.g. PASSWORD('root') below.
    assert native_password_hash("root") == "*81F5E21E35407D884A6CD4A731AEBFB6AF209E1B"
    expected = "*" + hashlib.sha1(hashlib.sha1(b"s3cret").digest()).hexdigest().upper()
    assert HASH == expected


def test_users_and_limits_are_read() -> None:
    config = load_config(BASE + f"""
proxy:
  workers: 4
  batchRows: 50
  shutdownGraceMs: 2000
  users:
    - {{name: app, passwordHash: "{HASH}"}}
    - {{name: report, passwordHash: "{HASH.lower()}"}}
""")
    proxy = config.proxy
    assert [u.name for u in proxy.users] == ["app", "report"]
    assert proxy.users[1].password_hash == HASH  # stored upper case
    assert (proxy.workers, proxy.batch_rows, proxy.shutdown_grace_ms) == (4, 50, 2000)
    assert HASH not in repr(proxy), "a password hash does not belong in a repr (logs)"


def test_defaults_without_a_section() -> None:
    assert load_config(BASE).proxy == ProxySettings()


def test_a_plain_password_is_refused_and_not_echoed() -> None:
    with pytest.raises(ConfigValidationError) as info:
        load_config(BASE + "proxy: {users: [{name: app, passwordHash: hunter2}]}\n")
    text = str(info.value)
    assert "proxy.users[0].passwordHash" in text and "mysql_native_password" in text
    assert "hunter2" not in text


def test_duplicate_user_missing_fields_and_unknown_fields_are_named() -> None:
    with pytest.raises(ConfigValidationError) as info:
        load_config(BASE + f"""
proxy:
  users:
    - {{name: app, passwordHash: "{HASH}"}}
    - {{name: app, passwordHash: "{HASH}"}}
    - {{name: nopass}}
    - {{name: x, passwordHash: "{HASH}", password: plain}}
  threads: 3
""")
    paths = {p.path for p in info.value.problems}
    assert "proxy.users[1]" in paths
    assert any(p.startswith("proxy.users[2]") for p in paths)
    assert any(p.startswith("proxy.users[3]") for p in paths)
    assert any(p.startswith("proxy.threads") or p == "proxy" for p in paths)
    assert "plain" not in str(info.value)


@pytest.mark.parametrize("field, value", [("workers", 0), ("workers", 1001), ("batchRows", 0), ("shutdownGraceMs", -1)])
def test_numbers_out_of_range_are_refused(field: str, value: int) -> None:
    with pytest.raises(ConfigValidationError, match=f"proxy.{field}"):
        load_config(BASE + f"proxy: {{{field}: {value}}}\n")


def test_the_section_survives_a_dump_and_reload() -> None:
    config = load_config(BASE + f"proxy: {{workers: 3, users: [{{name: app, passwordHash: '{HASH}'}}]}}\n")
    again = load_config(dump_native(config))
    assert again.proxy == config.proxy


def test_a_proxy_without_users_is_refused_before_anything_opens() -> None:
    with pytest.raises(ProxyError, match="proxy.users"):
        ProxyServer(load_config(BASE))


def test_tls_and_inline_statements_are_read_dumped_and_reloaded() -> None:
    config = load_config(BASE + f"""
proxy:
  users: [{{name: app, passwordHash: '{HASH}'}}]
  inlineStatements: false
  tls: {{cert: /etc/ddm/proxy.crt, key: /etc/ddm/proxy.key, required: true}}
""")
    tls = config.proxy.tls
    assert tls is not None and (tls.cert, tls.key, tls.required) == ("/etc/ddm/proxy.crt", "/etc/ddm/proxy.key", True)
    assert config.proxy.inline_statements is False
    assert load_config(dump_native(config)).proxy == config.proxy
    assert load_config(BASE).proxy.tls is None and load_config(BASE).proxy.inline_statements is True


def test_tls_without_a_key_or_with_unknown_fields_is_named() -> None:
    with pytest.raises(ConfigValidationError) as info:
        load_config(BASE + "proxy: {tls: {cert: a.crt, requird: true}}\n")
    text = str(info.value)
    assert "proxy.tls.key" in text and "requird" in text


def test_client_certificates_are_read_dumped_and_reloaded() -> None:
    config = load_config(BASE + f"""
proxy:
  users:
    - {{name: app, passwordHash: '{HASH}'}}
    - {{name: svc, passwordHash: '{HASH}', requireCertSubject: 'CN=svc,O=Acme\\, Inc.'}}
  tls: {{cert: p.crt, key: p.key, clientCa: /etc/ddm/clients.pem, clientCert: REQUIRED}}
""")
    tls = config.proxy.tls
    assert tls is not None and (tls.client_ca, tls.client_cert) == ("/etc/ddm/clients.pem", "required")
    assert [u.require_cert_subject for u in config.proxy.users] == [None, "CN=svc,O=Acme\\, Inc."]
    assert load_config(dump_native(config)).proxy == config.proxy
    # clientCa alone asks for a certificate (optional), and the dump keeps that
    alone = load_config(BASE + "proxy: {tls: {cert: p.crt, key: p.key, clientCa: ca.pem}}\n")
    assert alone.proxy.tls is not None and alone.proxy.tls.client_cert == "optional"
    assert load_config(dump_native(alone)).proxy.tls == alone.proxy.tls
    plain = load_config(BASE + "proxy: {tls: {cert: p.crt, key: p.key}}\n").proxy.tls
    assert plain is not None and (plain.client_ca, plain.client_cert) == (None, "none")


@pytest.mark.parametrize(
    "proxy, field, words",
    [
        ("{tls: {cert: p.crt, key: p.key, clientCa: ca.pem, clientCert: always}}", "proxy.tls.clientCert",
         "none, optional, required"),
        ("{tls: {cert: p.crt, key: p.key, clientCert: required}}", "proxy.tls.clientCa", "is required"),
        (f"{{users: [{{name: svc, passwordHash: '{HASH}', requireCertSubject: 'CN=svc,XY=1'}}], "
         "tls: {cert: p.crt, key: p.key, clientCa: ca.pem}}", "proxy.users[0].requireCertSubject", "unknown attribute 'XY'"),
        (f"{{users: [{{name: svc, passwordHash: '{HASH}', requireCertSubject: 'svc'}}], "
         "tls: {cert: p.crt, key: p.key, clientCa: ca.pem}}", "proxy.users[0].requireCertSubject", "ATTRIBUTE=value"),
        (f"{{users: [{{name: svc, passwordHash: '{HASH}', requireCertSubject: 'CN=svc'}}], "
         "tls: {cert: p.crt, key: p.key}}", "proxy.users[0].requireCertSubject", "clientCert is not optional"),
        (f"{{users: [{{name: svc, passwordHash: '{HASH}', requireCertSubject: 'CN=svc'}}]}}",
         "proxy.users[0].requireCertSubject", "clientCert is not optional"),
    ],
)  # fmt: skip
def test_bad_client_certificate_settings_are_named(proxy: str, field: str, words: str) -> None:
    with pytest.raises(ConfigValidationError) as info:
        load_config(BASE + f"proxy: {proxy}\n")
    text = str(info.value)
    assert field in text and words in text, text


def test_cert_subjects_match_exactly_in_any_order() -> None:
    from ddm_core.metadata.cert_subject import certificate_subject, format_subject, parse_subject

    # getpeercert()'s form: relative distinguished names of (long name, value)
    cert = {"subject": ((("organizationName", "Acme, Inc."),), (("commonName", "svc"),))}
    assert parse_subject("CN=svc,O=Acme\\, Inc.") == certificate_subject(cert)
    assert parse_subject("/O=Acme, Inc./CN=svc") == certificate_subject(cert)  # MySQL's REQUIRE SUBJECT form
    assert parse_subject(" cn = svc , o=Acme\\, Inc.") == certificate_subject(cert)
    assert parse_subject("CN=svc") != certificate_subject(cert)  # an attribute missing
    assert parse_subject("CN=SVC,O=Acme\\, Inc.") != certificate_subject(cert)  # values keep their case
    assert format_subject(certificate_subject(cert)) == "CN=svc,O=Acme\\, Inc."
    with pytest.raises(ValueError, match="is not ATTRIBUTE=value"):
        parse_subject("/")


SHA2 = sha2_password_hash("s3cret")


def test_sha2_hashes_are_read_with_or_instead_of_native_ones() -> None:
    config = load_config(BASE + f"""
proxy:
  users:
    - {{name: new, sha2Hash: "{SHA2.upper()}"}}
    - {{name: dual, passwordHash: "{HASH}", sha2Hash: "{SHA2}"}}
    - {{name: old, passwordHash: "{HASH}"}}
""")
    new, dual, old = config.proxy.users
    assert (new.password_hash, new.sha2_hash) == (None, SHA2)  # stored lower case
    assert (dual.password_hash, dual.sha2_hash) == (HASH, SHA2)
    assert (old.password_hash, old.sha2_hash) == (HASH, None)
    assert SHA2 not in repr(config.proxy) and SHA2.upper() not in repr(config.proxy)
    assert load_config(dump_native(config)).proxy == config.proxy


@pytest.mark.parametrize("value, also", [
    ("hunter2", ""),
    ("ab" * 31, ""),                    # 62 digits
    ("zz" * 32, ""),                    # 64, not hex
    ("$A$005$" + "x" * 63, "$A$"),      # MySQL's own authentication_string
])  # fmt: skip
def test_a_malformed_sha2_hash_names_the_user_and_field_and_is_not_echoed(value: str, also: str) -> None:
    with pytest.raises(ConfigValidationError) as info:
        load_config(BASE + f"proxy: {{users: [{{name: carol, sha2Hash: '{value}'}}]}}\n")
    text = str(info.value)
    assert "proxy.users[0].sha2Hash" in text and "'carol'" in text and "SHA256(SHA256(password))" in text
    assert value not in text
    assert also in text


def test_a_user_without_any_hash_is_refused() -> None:
    with pytest.raises(ConfigValidationError) as info:
        load_config(BASE + "proxy: {users: [{name: dave}]}\n")
    text = str(info.value)
    assert "proxy.users[0]" in text and "'dave'" in text and "passwordHash" in text and "sha2Hash" in text


# -- slowSqlMs: 0 is off, in the library and in the proxy -----------------------------------------------------------


def _with_slow_sql_ms(config: ShardingConfig, slow_sql_ms: int) -> ShardingConfig:
    """``config`` with both ``runtime.slowSqlMs`` and ``proxy.slowSqlMs`` set, as an application builds one in code."""
    return dataclasses.replace(config, runtime=dataclasses.replace(config.runtime, slow_sql_ms=slow_sql_ms),
                               proxy=dataclasses.replace(config.proxy, slow_sql_ms=slow_sql_ms))  # fmt: skip


@contextlib.contextmanager
def _audit_log_of(config: ShardingConfig) -> Iterator[AuditLog]:
    """The audit log a proxy over ``config`` writes to (the server is built as ``ddm proxy`` builds it, not started)."""
    server = ProxyServer(config)
    try:
        audit = server.runtime.audit
        assert audit is not None
        yield audit
    finally:
        server.executor.close()
        if server.runtime.audit is not None:
            server.runtime.audit.close()


def _record(audit: AuditLog, ms: float) -> bool:
    return audit.record(user="app", client="127.0.0.1", sql="SELECT 1", units=[], rows=1, ms=ms)


@pytest.mark.parametrize("slow_sql_ms", [0, 1, 200, 3_600_000])
def test_slow_sql_ms_means_the_same_in_the_library_and_the_proxy(tmp_path: Path, slow_sql_ms: int) -> None:
    # One word, one meaning: the statements the library's slow-SQL log takes are the ones the
    # proxy's audit log takes, and 0 is off in both (a statement of two hours is in neither).
    audit_file = tmp_path / "audit.jsonl"
    loaded = load_config(BASE + f"proxy: {{auditLog: '{audit_file}', users: [{{name: app, passwordHash: '{HASH}'}}]}}\n")
    config = _with_slow_sql_ms(loaded, slow_sql_ms)
    library = SlowSqlLog(lambda: config).threshold(0.0)  # seconds, as the executor compares them
    taken = []
    with _audit_log_of(config) as audit:
        for elapsed_ms in sorted({0.0, 0.5, max(slow_sql_ms - 1, 0), slow_sql_ms, slow_sql_ms + 0.5, 7_200_000.0}):
            audited = _record(audit, elapsed_ms)
            assert audited == (elapsed_ms / 1000 >= library), (slow_sql_ms, elapsed_ms)
            taken += [elapsed_ms] if audited else []
    assert len(audit_file.read_text().splitlines()) == len(taken)
    assert (taken == []) == (slow_sql_ms == 0)


def test_audit_log_with_slow_sql_ms_0_is_refused_and_names_audit_all() -> None:
    # slowSqlMs: 0 once audited every statement here; read as off, such a file would silently stop auditing.
    user = f"users: [{{name: app, passwordHash: '{HASH}'}}]"
    with pytest.raises(ConfigValidationError) as info:
        load_config(BASE + f"proxy: {{auditLog: audit.jsonl, slowSqlMs: 0, {user}}}\n")
    assert [p.path for p in info.value.problems] == ["proxy.slowSqlMs"]
    assert "auditAll: true" in str(info.value) and "turns the audit log off" in str(info.value)
    with pytest.raises(ConfigValidationError) as info:
        load_config(BASE + f"proxy: {{auditAll: true, {user}}}\n")
    assert [p.path for p in info.value.problems] == ["proxy.auditAll"]
    assert "needs auditLog" in str(info.value)
    assert load_config(BASE + f"proxy: {{slowSqlMs: 0, {user}}}\n").proxy.audit_threshold_ms == math.inf


def test_audit_all_writes_every_statement_and_survives_a_dump(tmp_path: Path) -> None:
    audit_file = tmp_path / "audit.jsonl"
    config = load_config(BASE + f"proxy: {{auditLog: '{audit_file}', auditAll: true, slowSqlMs: 0,"
                                f" users: [{{name: app, passwordHash: '{HASH}'}}]}}\n")  # fmt: skip
    assert config.proxy.audit_all is True
    assert load_config(dump_native(config)).proxy == config.proxy
    with _audit_log_of(config) as audit:
        assert _record(audit, 0.0)
    assert json.loads(audit_file.read_text())["sql"] == "SELECT 1"
