"""The ``ddm`` command: route previews, key explanations, config checks and DDL.

``ddm route``, ``ddm route --explain-key``, ``ddm config check`` and ``ddm ddl``
(see ``ddm --help``). Errors ddm-core raises on purpose (:class:`ddm_core.DdmError`)
print ``error: <message>`` on stderr and exit with status 2, never a traceback.
"""

from ddm_core.cli.app import cli, main

# The command modules add themselves to ``cli`` (they import ``cli.app``, never the other way):
from ddm_core.cli import config_cmd, ddl_cmd, demo, migrate_cmd, proxy_cmd, relay_cmd, route_cmd, xa_cmd  # noqa: F401, E402
from ddm_core.cli import verify_cmd  # noqa: F401, E402
from ddm_core.cli import health_cmd, lint_cmd, metrics_cmd  # noqa: F401, E402  # observability: docs/observability.md
from ddm_core.cli import config_center_cmd  # noqa: F401, E402  # ddm config push|history|rollback (Redis)
from ddm_core.cli import cutover_cmd  # noqa: F401, E402  # ddm cutover: docs/cutover.md
from ddm_core.cli import instances_cmd  # noqa: F401, E402  # ddm instances: docs/operations.md#instance-registry

__all__ = ["cli", "main"]
