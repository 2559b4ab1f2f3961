"""Cross-node statements: read each part, copy it to the gathering node, run the statement there.

The router decides (:mod:`ddm_core.route.crossnode`); this package runs its
plans, for every runner: :mod:`.copy` says what to do without doing I/O,
:mod:`.threads` does it with blocking calls. Importing the package registers
its runners with the execute layer (``ddm_core/__init__.py`` does).
"""

from __future__ import annotations

from ddm_core.crossnode.threads import run_threads
from ddm_core.execute.cross_node import register_runner

__all__ = ["run_threads"]

register_runner("threads", run_threads)
