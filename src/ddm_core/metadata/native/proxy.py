"""The ``proxy`` section of ddm-core's own format (docs/proxy.md): users with their password hashes,
privileges and certificate subjects, TLS, connection limits, rate limits, masks, the audit log."""

from __future__ import annotations

import re
from typing import Any

from ddm_core.metadata.build import Context
from ddm_core.metadata.cert_subject import parse_subject
from ddm_core.metadata.fields import Section
from ddm_core.metadata.limits import PROXY_LIMIT_FIELDS, RANGES
from ddm_core.metadata.model import (
    CLIENT_CERT_MODES,
    MASK_KINDS,
    PROXY_PRIVILEGES,
    MaskRule,
    ProxySettings,
    ProxyTls,
    ProxyUser,
    freeze,
)
from ddm_core.metadata.problems import join_path

__all__ = ["read_proxy"]


#: ``*`` and 40 hex digits: what ``SELECT PASSWORD('...')`` shows for ``mysql_native_password``.
_NATIVE_HASH = re.compile(r"\*[0-9A-Fa-f]{40}")
#: 64 hex digits: SHA256(SHA256(password)), what ``caching_sha2_password`` verifies a scramble against.
_SHA2_HASH = re.compile(r"[0-9A-Fa-f]{64}")


def read_proxy(sec: Section, ctx: Context) -> ProxySettings:
    """The ``proxy:`` section (docs/proxy.md): users with their password hashes, limits."""
    d = ProxySettings()
    users: list[ProxyUser] = []
    seen: set[str] = set()
    upath = sec.field_path("users")
    tls = _proxy_tls(sec.section("tls")) if sec.has("tls") else None
    for i, item in enumerate(sec.list("users")):
        user = _proxy_user(Section(item, join_path(upath, i), ctx.problems), ctx)
        if user is None:
            continue
        no_certificates = tls.client_cert == "none" if tls is not None else not sec.has("tls")  # (a bad tls: named)
        if user.require_cert_subject is not None and no_certificates:
            # No certificate is ever asked for: the user could never log in.
            ctx.problems.add(join_path(join_path(upath, i), "requireCertSubject"), f"proxy user {user.name!r} "
                             "requires a client certificate, but proxy.tls.clientCert is not optional or required",
                             user.require_cert_subject)  # fmt: skip
            continue
        if user.name in seen:
            ctx.problems.add(join_path(upath, i), f"proxy user {user.name!r} is listed twice", user.name)
            continue
        seen.add(user.name)
        users.append(user)
    limits: dict[str, int] = {}
    lpath = sec.field_path("tableRateLimits")
    for table, value in sec.mapping("tableRateLimits").items():
        bounds = RANGES["proxy.tableRateLimits"]
        problem = bounds.problem(value) if isinstance(value, int) and not isinstance(value, bool) else (
            f"must be {bounds.describe()}, not {value!r}")  # fmt: skip
        if problem is not None:
            ctx.problems.add(join_path(lpath, str(table)), problem, value)
            continue
        limits[str(table)] = value
    masks: list[MaskRule] = []
    mpath = sec.field_path("masks")
    for i, item in enumerate(sec.list("masks")):
        rule = Section(item, join_path(mpath, i), ctx.problems)
        column, kind, table = rule.str("column", required=True), rule.str("mask", required=True), rule.str("table")
        rule.finish()
        if column is None or kind is None:
            continue
        if kind not in MASK_KINDS:
            ctx.problems.add(join_path(join_path(mpath, i), "mask"), f"must be one of {', '.join(MASK_KINDS)}, not {kind!r}", kind)
            continue
        masks.append(MaskRule(column=column, mask=kind, table=table))
    settings = ProxySettings(
        users=tuple(users),
        table_rate_limits=freeze(limits),
        masks=tuple(masks),
        slow_sql_ms=sec.int("slowSqlMs", default=d.slow_sql_ms, bounds=RANGES["proxy.slowSqlMs"]),
        audit_log=sec.str("auditLog"),
        audit_all=sec.bool("auditAll", default=d.audit_all),
        workers=sec.int("workers", default=d.workers, bounds=RANGES["proxy.workers"]),
        batch_rows=sec.int("batchRows", default=d.batch_rows, bounds=RANGES["proxy.batchRows"]),
        shutdown_grace_ms=sec.int(
            "shutdownGraceMs", default=d.shutdown_grace_ms, bounds=RANGES["proxy.shutdownGraceMs"]
        ),
        inline_statements=sec.bool("inlineStatements", default=d.inline_statements),
        relay=sec.bool("relay", default=d.relay),
        link_idle_ms=sec.int("linkIdleMs", default=d.link_idle_ms, bounds=RANGES["proxy.linkIdleMs"]),
        statement_timeout_ms=sec.int("statementTimeoutMs", default=d.statement_timeout_ms,
                                     bounds=RANGES["proxy.statementTimeoutMs"]),
        tls=tls,
        transaction_mode=_proxy_transaction_mode(sec, d.transaction_mode),
        **_proxy_limits(sec, d),
    )
    _check_audit(sec, settings)
    sec.finish()
    return settings


def _proxy_limits(sec: Section, d: ProxySettings) -> dict[str, Any]:
    return {attr: sec.int(name, default=getattr(d, attr), bounds=RANGES[f"proxy.{name}"])
            for attr, name in PROXY_LIMIT_FIELDS.items()}  # fmt: skip


def _check_audit(sec: Section, settings: ProxySettings) -> None:
    """``auditLog`` with ``slowSqlMs: 0`` (off) would audit nothing; ``auditAll`` without ``auditLog`` has no file."""
    if settings.audit_log is not None and settings.slow_sql_ms == 0 and not settings.audit_all:
        sec.problems.add(sec.field_path("slowSqlMs"), "is 0, which turns the audit log off (as runtime.slowSqlMs: "
                         "0 turns the slow-SQL log off), yet auditLog is set; write auditAll: true to audit every "
                         "statement (what slowSqlMs: 0 meant here before), or remove auditLog", 0)  # fmt: skip
    if settings.audit_all and settings.audit_log is None:
        sec.problems.add(sec.field_path("auditAll"), "needs auditLog, the file every statement is written to", True)


def _proxy_transaction_mode(sec: Section, default: str) -> str:
    """``proxy.transactionMode``: ``local`` or ``xa`` (the proxy's own field; docs/proxy.md#xa-transactions)."""
    mode = sec.str("transactionMode", default=default)
    if not isinstance(mode, str) or mode.lower() not in ("local", "xa"):
        sec.problems.add(sec.field_path("transactionMode"), f"must be local or xa, not {mode!r}", mode)
        return default
    return mode.lower()


def _proxy_user(user: Section, ctx: Context) -> ProxyUser | None:
    """One ``proxy.users`` entry: a name and at least one of ``passwordHash`` / ``sha2Hash``.

    A malformed hash is named with its user and field but never echoed: it may be a
    password pasted by mistake.
    """
    name = user.str("name", required=True)
    native = user.str("passwordHash")
    sha2 = user.str("sha2Hash")
    rate_limit = user.int("rateLimit", default=0, bounds=RANGES["proxy.users.rateLimit"])
    unmask = user.bool("unmask", default=False)
    subject = user.str("requireCertSubject")
    allow = _proxy_allow(user)
    user.finish()
    if name is None or allow is None:
        return None
    ok = True
    if subject is not None:
        try:
            parse_subject(subject)
        except ValueError as exc:
            ctx.problems.add(user.field_path("requireCertSubject"), f"proxy user {name!r}: requireCertSubject "
                             f"{subject!r} is not a certificate subject like 'CN=app,O=Acme': {exc}",
                             subject)  # fmt: skip
            ok = False
    if native is None and sha2 is None:
        ctx.problems.add(user.path, f"proxy user {name!r} has no password hash: give passwordHash "
                         "(mysql_native_password) or sha2Hash (caching_sha2_password), or both", None)  # fmt: skip
        ok = False
    if native is not None and not _NATIVE_HASH.fullmatch(native):
        ctx.problems.add(user.field_path("passwordHash"), f"proxy user {name!r}: passwordHash must be a "
                         "mysql_native_password hash, '*' and 40 hex digits (SELECT PASSWORD('...'))",
                         None)  # fmt: skip
        ok = False
    if sha2 is not None and not _SHA2_HASH.fullmatch(sha2):
        # MySQL's own caching_sha2_password authentication_string ($A$005$...) is a salted,
        # iterated crypt: no scramble can be checked against it.
        mysql_form = " (MySQL's $A$... authentication_string cannot be used)" if sha2.startswith("$A$") else ""
        ctx.problems.add(user.field_path("sha2Hash"), f"proxy user {name!r}: sha2Hash must be 64 hex digits, "
                         f"SHA256(SHA256(password)){mysql_form}; docs/proxy.md#users-and-passwords", None)  # fmt: skip
        ok = False
    if not ok:
        return None
    return ProxyUser(name=name, password_hash=native.upper() if native is not None else None, rate_limit=rate_limit,
                     unmask=unmask, sha2_hash=sha2.lower() if sha2 is not None else None,
                     require_cert_subject=subject, allow=allow)  # fmt: skip


def _proxy_allow(user: Section) -> tuple[str, ...] | None:
    """``proxy.users[].allow``: privileges from ``PROXY_PRIVILEGES`` (docs/proxy.md#privileges); ``None``: refused."""
    allowed: set[str] = set()
    for value in user.list("allow"):
        name = value.strip().lower() if isinstance(value, str) else value
        if name not in PROXY_PRIVILEGES:
            user.problems.add(user.field_path("allow"), f"must list privileges among {', '.join(PROXY_PRIVILEGES)}, "
                              f"not {value!r}", value)  # fmt: skip
            return None
        allowed.add(name)
    return tuple(sorted(allowed))


def _proxy_tls(sec: Section) -> ProxyTls | None:
    """``proxy.tls``: the certificate and key files (read when the proxy starts), whether TLS is required,
    and client certificates: the CA that signs them and whether one is asked for (``clientCert``; given
    ``clientCa`` alone, ``optional``)."""
    cert, key = sec.str("cert", required=True), sec.str("key", required=True)
    required = sec.bool("required", default=False)
    client_ca = sec.str("clientCa")
    client_cert = sec.str("clientCert", default="optional" if client_ca is not None else "none")
    sec.finish()
    ok = True
    if not isinstance(client_cert, str) or client_cert.lower() not in CLIENT_CERT_MODES:
        sec.problems.add(sec.field_path("clientCert"), f"must be one of {', '.join(CLIENT_CERT_MODES)}, "
                         f"not {client_cert!r}", client_cert)  # fmt: skip
        ok = False
    elif client_cert.lower() != "none" and client_ca is None:
        sec.problems.add(sec.field_path("clientCa"), f"is required with clientCert: {client_cert.lower()} "
                         "(the CA bundle that signs client certificates)", None)  # fmt: skip
        ok = False
    if cert is None or key is None or not ok:
        return None
    return ProxyTls(cert=cert, key=key, required=required, client_ca=client_ca, client_cert=client_cert.lower())
