"""Who may log in to the proxy: the ``proxy.users`` of the configuration, ``mysql_native_password``.

The configuration holds only the stored form of each password (``*`` +
SHA1(SHA1(password)) in hex, what ``SELECT PASSWORD('...')`` prints); the
client proves it knows the password by a scramble of the server's nonce, so
no password crosses the wire or reaches a log. An unknown user name is
refused like a wrong password (1045), so the answer does not tell which names
exist.
"""

from __future__ import annotations

from typing import Sequence

from mysql_mimic import AuthPlugin, IdentityProvider, NativePasswordAuthPlugin, NoLoginAuthPlugin, User

from ddm_core.metadata.model import ProxyUser

__all__ = ["ConfigIdentityProvider", "native_password_hash"]


def native_password_hash(password: str) -> str:
    """``*`` + 40 upper-case hex digits: the ``mysql_native_password`` stored form of ``password``."""
    return "*" + str(NativePasswordAuthPlugin.create_auth_string(password)).upper()


class ConfigIdentityProvider(IdentityProvider):  # type: ignore[misc]  # mimic ships no types
    """Users from the configuration; every other name gets the no-login plugin (access denied)."""

    def __init__(self, users: Sequence[ProxyUser]) -> None:
        # mimic compares the hex of SHA1(SHA1(password)), without the leading '*'
        self._hashes = {u.name: u.password_hash[1:].lower() for u in users}
        self._plugins: list[AuthPlugin] = [NativePasswordAuthPlugin(), NoLoginAuthPlugin()]

    def get_plugins(self) -> Sequence[AuthPlugin]:
        return self._plugins

    async def get_user(self, username: str) -> User:
        stored = self._hashes.get(username)
        if stored is None:
            return User(name=username, auth_plugin=NoLoginAuthPlugin.name)
        return User(name=username, auth_string=stored, auth_plugin=NativePasswordAuthPlugin.name)
