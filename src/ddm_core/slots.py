"""The slot→node map (pre-sharded slots). See ``_fast/slots.pyi``."""

from typing import TYPE_CHECKING

from ddm_core._fast import SELECTED as _impl

__all__ = ["SlotMap"]

if TYPE_CHECKING:
    # Type checkers read the compiled unit's stub (slots.pyi); at run time the
    # selected twin is exported.
    from ddm_core._fast.slots import SlotMap
else:
    SlotMap = _impl.slots.SlotMap
