"""SQLAlchemy dialects over ddm-core: ``ddm+pymysql://`` (threads) and ``ddm+asyncmy://`` (asyncio).

Registered with SQLAlchemy by entry point (group ``sqlalchemy.dialects``), so
``create_engine("ddm+pymysql:///?config=orders.yaml")`` finds them once ddm-core
is installed; nothing here is imported until then. docs/sqlalchemy.md.
"""

from ddm_core._extras import require_extra

require_extra("sqlalchemy", needed_by="the ddm+pymysql and ddm+asyncmy SQLAlchemy dialects")
