"""Who may log in to the proxy: the ``proxy.users`` of the configuration (docs/proxy.md#users-and-passwords).

Two plugins, both by scramble, so no password crosses the wire or reaches a log:

* ``mysql_native_password``: the configuration holds ``*`` + SHA1(SHA1(password))
  in hex (``passwordHash``, what ``SELECT PASSWORD('...')`` prints).
* ``caching_sha2_password`` (MySQL 8's default), its fast-auth path: the
  configuration holds SHA256(SHA256(password)) in hex (``sha2Hash``), which is
  exactly the entry MySQL keeps in its in-memory cache. The client sends
  XOR(SHA256(password), SHA256(SHA256(SHA256(password)) + nonce)); the server
  XORs SHA256(stored + nonce) off it, hashes the result and compares with the
  stored value, then answers the fast-auth-success byte 0x03 and an OK packet.
  Since the stored value *is* the cache entry, the cache is never cold: full
  authentication (the plain password over TLS, or RSA-encrypted) could only
  check the same value, so a scramble that does not match is refused at once
  (1045) rather than asking for the password.

A user with both hashes logs in with whichever plugin its client speaks. An
unknown user name is refused like a wrong password (1045), so the answer does
not tell which names exist. The user table is replaced whole on a reload
(:meth:`ProxyUsers.replace`); each connection looks users up when it
authenticates, so new connections see the new table at once.

A user with ``requireCertSubject`` (MySQL's ``REQUIRE SUBJECT``) must also have
sent a client certificate, verified in the TLS handshake against
``proxy.tls.clientCa``, with exactly that subject. As in MySQL both checks must
pass: the password first, then the certificate; either failing is the same 1045,
and the certificate's reason goes to the log at INFO (user, connection, the
subjects: no secrets).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from typing import Any, Callable, Mapping, Optional, Sequence

from mysql_mimic import AuthPlugin, IdentityProvider, NativePasswordAuthPlugin, NoLoginAuthPlugin, User
from mysql_mimic import packets, utils
from mysql_mimic.auth import AuthInfo, AuthState, Forbidden, Success

from ddm_core.metadata.cert_subject import certificate_subject, format_subject, parse_subject
from ddm_core.metadata.model import ProxyUser
from ddm_core.proxy.tls import peer_certificate

__all__ = [
    "exchange",
    "ProxyUsers",
    "ConnectionIdentity",
    "NativePlugin",
    "CachingSha2Plugin",
    "native_password_hash",
    "sha2_password_hash",
    "sha2_scramble_matches",
    "NATIVE",
    "SHA2",
    "FAST_AUTH_SUCCESS",
]

NATIVE = "mysql_native_password"
SHA2 = "caching_sha2_password"
#: The "fast" authentication result byte of caching_sha2_password that means success (0x04 would ask
#: for full authentication, which this proxy never needs: see the module docstring).
FAST_AUTH_SUCCESS = b"\x03"

log = logging.getLogger("ddm_core.proxy")

#: Whether the user of this name may log in on this connection besides its password (its certificate).
Gate = Callable[[str], bool]


def native_password_hash(password: str) -> str:
    """``*`` + 40 upper-case hex digits: the ``mysql_native_password`` stored form of ``password``."""
    return "*" + str(NativePasswordAuthPlugin.create_auth_string(password)).upper()


def sha2_password_hash(password: str) -> str:
    """64 lower-case hex digits, SHA256(SHA256(password)): the ``sha2Hash`` of ``password``."""
    return hashlib.sha256(hashlib.sha256(password.encode("utf-8")).digest()).hexdigest()


def sha2_scramble_matches(stored_hex: str, scramble: bytes, nonce: bytes) -> bool:
    """``scramble`` is what a client knowing the password of ``stored_hex`` sends for ``nonce``.

    ``stored_hex`` is SHA256(SHA256(password)); the scramble is
    XOR(SHA256(password), SHA256(SHA256(SHA256(password)) + nonce)).
    """
    stored = bytes.fromhex(stored_hex)
    if len(scramble) != len(stored):  # also the empty answer of a client without a password
        return False
    mix = hashlib.sha256(stored + nonce).digest()
    candidate = bytes(a ^ b for a, b in zip(scramble, mix))  # SHA256(password) if the password is right
    return hmac.compare_digest(hashlib.sha256(candidate).digest(), stored)


def _nonce(auth_info: Optional[AuthInfo]) -> bytes | None:
    """The handshake's nonce when the client's answer is a scramble of it, else ``None`` (switch first).

    mimic starts a plugin with the client's answer only when the client already speaks
    that plugin: its answer then scrambles the handshake's nonce, whichever plugin the
    handshake named.
    """
    if auth_info is None or not auth_info.handshake_auth_data:
        return None
    return bytes(auth_info.handshake_auth_data).rstrip(b"\x00")  # mimic's nonces hold no NUL


class NativePlugin(NativePasswordAuthPlugin):  # type: ignore[misc]  # mimic ships no types
    """mimic's ``mysql_native_password``, also when the handshake named ``caching_sha2_password``.

    mimic's own plugin reuses the handshake's nonce only when the handshake named it, and
    otherwise sends a fresh one as "more data", which a native client does not expect.

    Args:
        gate: Asked once the password is right (the user's client certificate).
    """

    def __init__(self, gate: Gate) -> None:
        self._gate = gate

    async def auth(self, auth_info: Optional[AuthInfo] = None) -> AuthState:
        nonce = _nonce(auth_info)
        if nonce is None or auth_info is None:
            nonce = utils.nonce(20)
            auth_info = yield nonce + b"\x00"  # some clients expect the terminating NUL
        if self.verify_scramble(auth_info.user.auth_string, auth_info.data, nonce) and self._gate(auth_info.user.name):
            yield Success(auth_info.user.name)
        else:
            yield Forbidden()


class CachingSha2Plugin(AuthPlugin):  # type: ignore[misc]  # mimic ships no types
    """``caching_sha2_password``, fast authentication against the stored SHA256(SHA256(password)).

    Args:
        connection: The client's connection: the fast-auth-success byte is written to its
            stream before the OK packet. (mimic's exchange knows "send more data, read the
            answer" only; after 0x03 the client reads the OK packet and sends nothing.)
        gate: Asked once the password is right, before the fast-auth-success byte.
    """

    name = SHA2
    client_plugin_name = SHA2

    def __init__(self, connection: Any, gate: Gate) -> None:
        self._connection = connection
        self._gate = gate

    async def auth(self, auth_info: Optional[AuthInfo] = None) -> AuthState:
        nonce = _nonce(auth_info)
        if nonce is None or auth_info is None:
            nonce = utils.nonce(20)
            auth_info = yield nonce + b"\x00"
        if sha2_scramble_matches(auth_info.user.auth_string or "", auth_info.data, nonce) and self._gate(
            auth_info.user.name
        ):
            await self._connection.stream.write(packets.make_auth_more_data(FAST_AUTH_SUCCESS))
            yield Success(auth_info.user.name)
        else:
            yield Forbidden()


#: Extra round trips a plugin may ask of a client before its login is refused.
_MORE_DATA_ROUNDS = 3


async def exchange(
    connection: Any,
    username: str,
    auth_response: bytes,
    client_plugin_name: str | None,
    connect_attrs: dict[str, str],
    auth_state: AuthState | None = None,
    server_plugin: AuthPlugin | None = None,
) -> str | None:
    """The authentication exchange of one login: the name logged in as, or ``None`` (refused).

    mimic's, without its last step: mimic writes the OK or error packet itself and,
    after an error, carried on into the command phase, so a refused client could
    run statements. Here the caller writes the answer and ends a refused
    connection. Plugin switches and "more data" rounds are read as mimic does,
    with the rounds bounded.
    """
    identity = connection.identity_provider
    stream = connection.stream
    user = await identity.get_user(username)  # an unknown name gets a user no password matches
    user_plugin = identity.get_plugin(user.auth_plugin or "") or identity.get_default_plugin()
    auth_info = AuthInfo(username=username, data=auth_response, connect_attrs=connect_attrs, user=user,
                         client_plugin_name=client_plugin_name, handshake_auth_data=connection.handshake_auth_data,
                         handshake_plugin_name=connection.handshake_auth_plugin)  # fmt: skip
    speaks = user_plugin.client_plugin_name is None or user_plugin.client_plugin_name == client_plugin_name
    if (server_plugin is not None and auth_state is not None and server_plugin.name == user_plugin.name
            and server_plugin.client_plugin_name in (None, client_plugin_name)):  # fmt: skip
        decision = await auth_state.asend(auth_info)  # the handshake's plugin was the user's: its answer is in
    elif speaks:
        decision, auth_state = await user_plugin.start(auth_info)
    else:  # the user's plugin is another: switch the client to it
        decision, auth_state = await user_plugin.start()
        if user_plugin.client_plugin_name and isinstance(decision, bytes):
            await stream.write(packets.make_auth_switch_request(server_charset=connection.server_charset,
                                                                plugin_name=user_plugin.client_plugin_name,
                                                                plugin_provided_data=decision))  # fmt: skip
            auth_info = auth_info.copy(await stream.read())
            decision = await auth_state.asend(auth_info)
    rounds = 0
    while not isinstance(decision, (Success, Forbidden)):
        rounds += 1
        if rounds > _MORE_DATA_ROUNDS or auth_state is None:
            return None
        await stream.write(packets.make_auth_more_data(decision))
        auth_info = auth_info.copy(await stream.read())
        decision = await auth_state.asend(auth_info)
    return str(decision.authenticated_as) if isinstance(decision, Success) else None


class ProxyUsers:
    """The users of one proxy (``proxy.users``), replaced whole by a reload."""

    def __init__(self, users: Sequence[ProxyUser]) -> None:
        self._users: Mapping[str, ProxyUser] = {}
        self.replace(users)

    def replace(self, users: Sequence[ProxyUser]) -> None:
        """The new table (one assignment: a connection authenticating meanwhile sees one or the other)."""
        self._users = {u.name: u for u in users}

    def get(self, name: str) -> ProxyUser | None:
        return self._users.get(name)

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self._users)

    @property
    def handshake_plugin(self) -> str:
        """The plugin the handshake names: ``caching_sha2_password`` when any user has a ``sha2Hash``.

        Clients answer the handshake with their scramble for that plugin; a user without its
        hash is switched to the other (one more round trip). With native users only, the
        handshake stays ``mysql_native_password``, as before ``sha2Hash`` existed.
        """
        return SHA2 if any(u.sha2_hash is not None for u in self._users.values()) else NATIVE

    def for_connection(self) -> ConnectionIdentity:
        """The view one connection authenticates with (:meth:`ConnectionIdentity.bind` it)."""
        return ConnectionIdentity(self)


class ConnectionIdentity(IdentityProvider):  # type: ignore[misc]  # mimic ships no types
    """One connection's identity provider: the plugins, bound to its stream, over the shared user table."""

    def __init__(self, users: ProxyUsers) -> None:
        self._users = users
        self._connection: Any = None
        self._plugins: list[AuthPlugin] = []

    def bind(self, connection: Any) -> None:
        """Attach the connection (its stream carries the fast-auth result; its client plugin picks the user's)."""
        self._connection = connection
        native, sha2 = NativePlugin(self.certificate_allows), CachingSha2Plugin(connection, self.certificate_allows)
        first, second = (sha2, native) if self._users.handshake_plugin == SHA2 else (native, sha2)
        self._plugins = [first, second, NoLoginAuthPlugin()]

    def certificate_allows(self, name: str) -> bool:
        """The user's ``requireCertSubject`` is met by the connection's verified client certificate (or unset)."""
        user = self._users.get(name)
        required = user.require_cert_subject if user is not None else None
        if required is None:
            return True
        connection_id = getattr(self._connection, "connection_id", None)
        cert = peer_certificate(self._connection.stream.writer)
        if cert is None:
            log.info("ddm proxy: connection %s: user %r refused: it requires a client certificate with subject "
                     "%s and the client sent none", connection_id, name, required)  # fmt: skip
            return False
        subject = certificate_subject(cert)
        if subject != parse_subject(required):
            log.info("ddm proxy: connection %s: user %r refused: its client certificate's subject %s is not the "
                     "required %s", connection_id, name, format_subject(subject), required)  # fmt: skip
            return False
        return True

    def get_plugins(self) -> Sequence[AuthPlugin]:
        return self._plugins

    async def get_user(self, username: str) -> User:
        user = self._users.get(username)
        if user is None:
            return User(name=username, auth_plugin=NoLoginAuthPlugin.name)
        stored = {SHA2: user.sha2_hash, NATIVE: user.password_hash[1:].lower() if user.password_hash else None}
        available = [name for name in (self._plugins[0].name, self._plugins[1].name) if stored[name] is not None]
        # The client's own plugin when the user has its hash (no switch), else the handshake's, else the other.
        client = str(getattr(self._connection, "client_plugin_name", None))
        plugin = client if client in available else available[0]
        return User(name=username, auth_string=stored[plugin], auth_plugin=plugin)
