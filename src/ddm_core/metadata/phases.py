"""The phases of a resharding migration: one enum for the migrator, the configuration and the router.

The migrator (:mod:`ddm_core.migrate`) walks through them and records each in
its state table; a configuration version it publishes carries the phase in its
``migration:`` block (:mod:`ddm_core.metadata.migration`); the router follows
that block by phase (:mod:`ddm_core.route.follow`). The enum lives here, below
all three, so none of them spells a phase out as a string of its own.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["Phase", "ROUTED"]


class Phase(str, Enum):
    """Where a migration is."""

    #: Target tables created from the logic table's DDL; every physical table's schema checked.
    PREPARE = "prepare"
    #: Writes to a moving slot go to the old location, then to the new; reads stay old.
    DUAL_WRITE = "dual_write"
    #: Moving slots copied in primary-key order, batch by batch, each batch checked.
    BACKFILL = "backfill"
    #: Changes the dual write missed applied from the binlog; the gate is a lag under 1 s.
    CATCH_UP = "catch_up"
    #: The consistency checker compares old and new locations of every moving slot.
    VERIFY = "verify"
    #: Reads of moving slots shifted 1 % -> 10 % -> 50 % -> 100 % by a stable hash of the key.
    SHIFT_READS = "shift_reads"
    #: Writes go to the new location only; the router refuses writes to the old slots.
    CUTOVER = "cutover"
    #: After the observation period the old rows are dropped or archived; the migration is over.
    FINISH = "finish"
    #: Every read and write returned to the old location in one config version; over.
    ROLLED_BACK = "rolled_back"

    def __str__(self) -> str:
        return self.value


#: Phases a published configuration version may carry, in order: the ones in which routers do
#: something. Before dual write nothing is published; a rollback publishes the plain old configuration.
ROUTED: tuple[Phase, ...] = tuple(phase for phase in Phase if phase not in (Phase.PREPARE, Phase.ROLLED_BACK))
