"""The ``ddm`` command: route previews, key explanations, config checks and DDL.

``ddm route``, ``ddm route --explain-key``, ``ddm config check`` and ``ddm ddl``
(see ``ddm --help``). Errors ddm-core raises on purpose (:class:`ddm_core.DdmError`)
print ``error: <message>`` on stderr and exit with status 2, never a traceback.
"""

from ddm_core.cli.app import cli, main

__all__ = ["cli", "main"]
