"""ShardingSphere's transaction rule → the transaction mode of ddm-core's proxy (``proxy.transactionMode``).

Written as ``- !TRANSACTION`` under ``rules`` (5.0–5.2) or as a top-level
``transaction:`` block (5.3+), with ``defaultType`` and ``providerType``:

* ``LOCAL`` → ``local``: ddm-core's best-effort local transactions (a
  transaction writes one data source; docs/proxy.md#xa-transactions).
* ``XA`` → ``xa``: ddm-core's own two-phase commit (docs/xa.md). The provider
  names a Java transaction manager (Atomikos, Narayana, Bitronix) whose part
  ddm-core's coordinator plays, so any of them is accepted; their ``props``
  configure that Java library and are left unread, with a warning (ddm-core's
  own ``xa:`` settings are native-format fields).
* ``BASE`` (Seata AT) and any other type or provider are refused by name:
  ddm-core has no saga or AT-mode coordinator, and loading such a file as
  ``local`` would silently drop the guarantee it asks for.
"""

from __future__ import annotations

from typing import Any

from ddm_core.metadata.build import Context
from ddm_core.metadata.fields import Section

__all__ = ["read_transaction", "XA_PROVIDERS"]

#: ShardingSphere's XA transaction manager providers (its ``XATransactionManagerProvider`` SPI types).
XA_PROVIDERS = ("Atomikos", "Narayana", "Bitronix")
_MODES = {"LOCAL": "local", "XA": "xa"}


def read_transaction(value: Any, path: str, ctx: Context) -> str | None:
    """The proxy's transaction mode (``"local"`` / ``"xa"``) the rule at ``path`` asks for; ``None``
    when it cannot be honoured (its problems are recorded in ``ctx``)."""
    sec = Section(value, path, ctx.problems)
    kind = sec.str("defaultType", default="LOCAL")
    provider = sec.str("providerType")
    props = sec.mapping("props")
    sec.finish()
    if kind is None:
        return None  # blank: Section recorded it
    mode = _MODES.get(str(kind).upper())
    if mode is None:
        why = ("BASE (Seata AT) transactions have no coordinator in ddm-core"
               if str(kind).upper() == "BASE" else "it is not a ShardingSphere transaction type")  # fmt: skip
        ctx.problems.add(
            sec.field_path("defaultType"),
            f"defaultType {kind!r} is not supported ({why}); use LOCAL (one data source per transaction) "
            "or XA (ddm-core's two-phase commit)",
            kind,
        )
        return None
    if provider is not None and mode == "xa" and str(provider).lower() not in {p.lower() for p in XA_PROVIDERS}:
        ctx.problems.add(
            sec.field_path("providerType"),
            f"providerType {provider!r} is not an XA transaction manager ShardingSphere knows "
            f"({', '.join(XA_PROVIDERS)}); ddm-core's own two-phase commit stands in for any of them",
            provider,
        )
        return None
    if provider is not None and mode == "local":
        ctx.warn(sec.field_path("providerType"), f"ignored: a LOCAL transaction has no provider ({provider!r})")
    if props:
        ctx.warn(
            sec.field_path("props"),
            f"not read ({', '.join(map(str, props))}): they configure ShardingSphere's Java transaction "
            "manager; ddm-core's XA settings are the native format's xa: block (docs/xa.md)",
        )
    return mode
