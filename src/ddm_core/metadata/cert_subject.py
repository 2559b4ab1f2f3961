"""Certificate subjects: ``proxy.users[].requireCertSubject`` and a client certificate's subject.

A subject is written ``CN=app,O=Acme`` (a comma inside a value is ``\\,``) or in
MySQL's ``REQUIRE SUBJECT`` form ``/O=Acme/CN=app``. It matches a certificate
whose subject holds exactly those attributes with exactly those values: none
missing, none extra, values compared as written (case matters), the order not.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

__all__ = ["Subject", "parse_subject", "certificate_subject", "format_subject"]

#: A subject: its (attribute, value) pairs, sorted, attributes by their short names.
Subject = tuple[tuple[str, str], ...]

#: Short name -> the long name ``ssl.SSLSocket.getpeercert()`` reports.
_LONG = {
    "CN": "commonName", "O": "organizationName", "OU": "organizationalUnitName", "C": "countryName",
    "ST": "stateOrProvinceName", "L": "localityName", "emailAddress": "emailAddress", "DC": "domainComponent",
    "serialNumber": "serialNumber", "street": "streetAddress", "title": "title", "UID": "userId",
    "SN": "surname", "GN": "givenName",
}  # fmt: skip
_SHORT = {long: short for short, long in _LONG.items()}
#: Any case of a short or long name, and MySQL/OpenSSL's ``E`` for the e-mail address.
_ALIASES = {**{k.lower(): k for k in _LONG}, **{v.lower(): k for k, v in _LONG.items()}, "e": "emailAddress"}
_UNESCAPED_COMMA = re.compile(r"(?<!\\),")


def parse_subject(text: str) -> Subject:
    """The subject ``text`` names; ``ValueError`` saying what is wrong with it."""
    parts = text.split("/")[1:] if text.startswith("/") else _UNESCAPED_COMMA.split(text)
    pairs = []
    for part in parts:
        kind, sep, value = part.replace("\\,", ",").partition("=")
        short = _ALIASES.get(kind.strip().lower())
        if not sep or not value.strip():
            raise ValueError(f"{part.strip()!r} is not ATTRIBUTE=value")
        if short is None:
            raise ValueError(f"unknown attribute {kind.strip()!r} (known: {', '.join(_LONG)})")
        pairs.append((short, value.strip()))
    return tuple(sorted(pairs))


def certificate_subject(cert: Mapping[str, Any]) -> Subject:
    """The subject of a verified peer certificate as ``getpeercert()`` gives it."""
    return tuple(sorted((_SHORT.get(name, name), value) for rdn in cert.get("subject", ()) for name, value in rdn))


def format_subject(subject: Subject) -> str:
    """``CN=app,O=Acme``: for messages (a subject is not a secret)."""
    return ",".join(f"{k}={v.replace(',', chr(92) + ',')}" for k, v in subject)
