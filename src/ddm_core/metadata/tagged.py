"""A value under a YAML tag that is not standard YAML (ShardingSphere's ``!SHARDING``, a Java class tag).

The YAML reader (:mod:`~ddm_core.metadata.yaml_tags`) makes them, the document
bounds (:mod:`~ddm_core.metadata.bounds`) walk into them, the ShardingSphere
reader dispatches on them and the writer (:mod:`~ddm_core.metadata.dump`) keeps
those found in free-form props; nothing is ever instantiated from a tag.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Tagged"]


@dataclass(frozen=True, slots=True)
class Tagged:
    """A YAML value carrying a non-standard tag.

    Attributes:
        tag: The tag as written: ``"!SHARDING"``, or ``"!!org.apache...Foo"`` for
            a class tag.
        value: The plain value under the tag (mapping, list, scalar or ``None``).
        line: 1-based line of the tag in the source (for messages; not part of equality).
    """

    tag: str
    value: Any
    line: int = field(default=0, compare=False)

    @property
    def name(self) -> str:
        """The tag without its leading ``!``/``!!`` (``"SHARDING"``)."""
        return self.tag.lstrip("!")
