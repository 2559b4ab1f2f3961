"""Gray cut-over of a logic table from a legacy database onto its shards, bucket by bucket (docs/cutover.md)."""

from ddm_core.cutover.cutover import ALLOWED, Cutover, CutoverStatus, next_state
from ddm_core.cutover.phases import CutoverPhase
from ddm_core.cutover.state import CutoverLog, CutoverState, Switch, Transition

__all__ = ["Cutover", "CutoverStatus", "CutoverPhase", "CutoverLog", "CutoverState", "Switch", "Transition",
           "ALLOWED", "next_state"]
