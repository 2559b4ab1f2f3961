"""Database backends: one :class:`Dialect` per backend, asked instead of testing names.

* :data:`INPUT` — the dialect statements are written in (MySQL, whatever the backend).
* :func:`dialect_for` — ``dialect_for("sqlite")``, ``dialect_for("jdbc:mysql://h/db")``.
* :func:`titles` — the backends with a feature, for messages (``"MySQL or MariaDB"``).
* :class:`Dialect` — the questions (see :mod:`ddm_core.dialects.base`); the answers live
  in :mod:`~ddm_core.dialects.mysql` (MySQL, MariaDB), :mod:`~ddm_core.dialects.sqlite`
  and :mod:`~ddm_core.dialects.postgresql`.
"""

from ddm_core.dialects.base import EXACT, INPUT, Dialect
from ddm_core.dialects.registry import DIALECTS, KINDS, ddl_kinds, dialect_for, dialect_of_error, find_dialect, titles

__all__ = ["INPUT", "EXACT", "Dialect", "DIALECTS", "KINDS", "dialect_for", "find_dialect", "dialect_of_error",
           "ddl_kinds", "input_dialect", "titles"]


def input_dialect() -> Dialect:
    """The :class:`Dialect` of :data:`INPUT`."""
    return dialect_for(INPUT)
