"""The Redis configuration source's former path, kept for code written against docs/configuration.md.

The source lives in :mod:`ddm_core.metadata.sources.redis`; import it from there.
"""

from ddm_core.metadata.sources.redis import DEFAULT_PREFIX, RedisSource, RedisVersion

__all__ = ["RedisSource", "RedisVersion", "DEFAULT_PREFIX"]
