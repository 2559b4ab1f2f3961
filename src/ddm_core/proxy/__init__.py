"""``ddm proxy``: a MySQL-protocol server in front of ddm-core's router and executor (docs/proxy.md).

Any MySQL client — the ``mysql`` / ``mariadb`` command line, PyMySQL,
SQLAlchemy, JDBC, Go — connects to it and writes SQL against the logic tables;
each statement is routed, run on the shared pools and merged exactly as the
library does it. Needs the ``proxy`` extra (``pip install 'ddm-core[proxy]'``,
which brings mysql-mimic).
"""

from __future__ import annotations

from ddm_core._extras import require_extra

# Every module of the package is imported through here: without mysql-mimic, importing any of
# them says which extra to install instead of failing inside one of them.
require_extra("proxy", needed_by=__name__)

from ddm_core.proxy import charsets

charsets.install()  # MariaDB's latin1 wherever mimic decodes or encodes latin1 (proxy/charsets.py)

from ddm_core.proxy.auth import native_password_hash, sha2_password_hash
from ddm_core.proxy.server import DEFAULT_PORT, Phase, ProxyServer

__all__ = ["ProxyServer", "Phase", "DEFAULT_PORT", "native_password_hash", "sha2_password_hash"]
