"""The slot→node map (pre-sharded slots, seed 000 §2.4). See ``_fast/slots.pyi``."""

from ddm_core._fast import SELECTED as _impl

__all__ = ["SlotMap"]

SlotMap = _impl.slots.SlotMap
