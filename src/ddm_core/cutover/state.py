"""The ``ddm_cutover`` table: every step of a cut-over as a row, so a killed process resumes.

It has the layout of ``ddm_migration`` (:mod:`ddm_core.migrate.state`) and the
same guarantees: append-only, one numbered row per step, a second process
working on the same cut-over fails at its first write. Besides the phase rows
and the scan rows (copy high-water marks, binlog positions, publication marks)
it holds the bucket transitions:

==================  ==============================================================
event               meaning
==================  ==============================================================
``transition``      buckets start changing state (``detail``: ``id``, ``buckets``,
                    ``to``); until it is done their writes are paused where the
                    change moves authority between the legacy table and the shards
``transition_done`` the change took effect everywhere (``detail``: ``id`` and, when
                    authority moved, the binlog ``positions`` of every server at the
                    switch: the sync directions apply a bucket's changes only from
                    the side that was authoritative at the change's position)
``finding``         a sampled comparison's result (``detail``: keys compared, rows
                    that differ, each with key, column, legacy and shard value)
==================  ==============================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ddm_core.cutover.phases import CutoverPhase, may_enter
from ddm_core.metadata.cutover import L_AUTHORITATIVE, BucketState
from ddm_core.migrate.state import Event, PhaseTrack, ScanProgress, WorkflowLog, fold_scans

__all__ = ["CutoverLog", "CutoverState", "Transition", "Switch", "DEFAULT_TABLE", "authority_of"]

DEFAULT_TABLE = "ddm_cutover"
#: Findings the state keeps (the newest): a sync running for months records one per scheduled comparison.
KEPT_FINDINGS = 20

def authority_of(state: BucketState) -> str:
    """``"legacy"`` or ``"shards"``: where a bucket in ``state`` takes its writes."""
    return "legacy" if state in L_AUTHORITATIVE else "shards"


@dataclass(frozen=True, slots=True)
class Transition:
    """Buckets changing to ``to`` (``id``: the transition's number, 1, 2, ...)."""

    id: int
    buckets: tuple[int, ...]
    to: BucketState

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "buckets": list(self.buckets), "to": self.to.value}


@dataclass(frozen=True, slots=True)
class Switch:
    """Authority over ``buckets`` moved to ``to`` (``shards`` / ``legacy``) at these binlog positions.

    ``legacy``: the legacy server's position, which the forward replay filters by;
    ``shards``: each shard server's, which the reverse sync filters by (one
    server may be both, at two positions).
    """

    buckets: frozenset[int]
    to: str
    legacy: Mapping[str, tuple[Any, ...]]
    shards: Mapping[str, tuple[Any, ...]]


@dataclass(frozen=True, slots=True)
class CutoverState:
    """A cut-over as its rows say.

    Attributes:
        name: The cut-over.
        phase / completed / stopped / seq / history: As for a migration.
        plan: What ``prepare`` recorded (table, legacy, bucket count).
        states: Each bucket's state after every finished transition.
        pending: A transition started and not finished (resumed by the next step).
        switches: Every authority change, in order.
        findings: The last :data:`KEPT_FINDINGS` sampled comparisons' results, in order.
        scans: Scan rows (copy, binlog positions, marks) by name.
    """

    name: str
    phase: CutoverPhase | None = None
    completed: bool = False
    stopped: Any = None
    seq: int = 0
    plan: Mapping[str, Any] = field(default_factory=dict)
    states: tuple[BucketState, ...] = ()
    pending: Transition | None = None
    switches: tuple[Switch, ...] = ()
    findings: tuple[Mapping[str, Any], ...] = ()
    history: tuple[Event, ...] = ()
    scans: Mapping[str, ScanProgress] = field(default_factory=dict)

    @property
    def buckets(self) -> int:
        return len(self.states)

    def in_state(self, state: BucketState) -> tuple[int, ...]:
        return tuple(b for b, s in enumerate(self.states) if s is state)

    @property
    def next_transition(self) -> int:
        done = [e for e in self.history if e.event in ("transition", "transition_done")]
        return 1 + max((int(e.detail["id"]) for e in done), default=0)


def _positions(raw: Any) -> dict[str, tuple[Any, ...]]:
    """``server -> (file, pos)``, followed by the GTID position and ``@@server_id`` where they were recorded."""
    return {str(k): (str(v[0]), int(v[1]), *v[2:]) for k, v in (raw or {}).items()}


def _fold(name: str, events: Sequence[Event]) -> CutoverState:
    phase: CutoverPhase | None = None
    plan: dict[str, Any] = {}
    states: list[BucketState] = []
    pending: Transition | None = None
    switches: list[Switch] = []
    findings: list[Mapping[str, Any]] = []
    track = PhaseTrack()
    for ev in events:
        phase = ev.phase
        if track.see(ev):
            if ev.event == "enter" and ev.phase is CutoverPhase.PREPARE and isinstance(ev.detail, dict):
                plan = dict(ev.detail)
                states = [BucketState.NORMAL] * int(plan["buckets"])
        elif ev.event == "transition":
            track.history.append(ev)
            d = ev.detail
            pending = Transition(int(d["id"]), tuple(int(b) for b in d["buckets"]), BucketState(d["to"]))
        elif ev.event == "transition_done" and pending is not None:
            track.history.append(ev)
            positions = ev.detail.get("positions") or {}
            if positions:
                switches.append(Switch(frozenset(pending.buckets), authority_of(pending.to),
                                       _positions(positions.get("legacy")), _positions(positions.get("shards"))))
            for b in pending.buckets:
                states[b] = pending.to
            pending = None
        elif ev.event == "finding":
            findings.append(ev.detail)
            del findings[:-KEPT_FINDINGS]
    return CutoverState(name, phase, track.completed, track.stopped, events[-1].seq if events else 0, plan,
                        tuple(states), pending, tuple(switches), tuple(findings), tuple(track.history),
                        fold_scans(events))


class CutoverLog(WorkflowLog[CutoverState]):
    """The rows of one cut-over in its state table."""

    phases = CutoverPhase
    kind = "cut-over"
    actor = "cut-over process"
    default_table = DEFAULT_TABLE

    @staticmethod
    def may_enter(current: Any, completed: bool, target: Any) -> str | None:
        return may_enter(current, completed, target)

    def fold(self, events: Sequence[Event]) -> CutoverState:
        return _fold(self.name, events)

    def keep(self, events: Sequence[Event]) -> list[Event]:
        """Besides the phase and scan rows: every transition row and the last findings."""
        transitions = [ev for ev in events if ev.event in ("transition", "transition_done")]
        findings = [ev for ev in events if ev.event == "finding"][-KEPT_FINDINGS:]
        return super().keep(events) + transitions + findings

    def begin_transition(self, transition: Transition) -> CutoverState:
        """Record that ``transition`` starts (in the live phase)."""
        now = self._in(CutoverPhase.LIVE, "change bucket states")
        self._append(now, Event(0, "transition", CutoverPhase.LIVE, detail=transition.to_json()))
        return self.state()

    def end_transition(self, transition: Transition, positions: Mapping[str, Any] | None) -> CutoverState:
        """Record that ``transition`` took effect (``positions``: ``{"legacy": {server: [file, pos]},
        "shards": {...}}`` where authority moved, if it did)."""
        now = self._in(CutoverPhase.LIVE, "change bucket states")
        detail = {"id": transition.id, "positions": dict(positions or {})}
        self._append(now, Event(0, "transition_done", CutoverPhase.LIVE, detail=detail))
        return self.state()

    def record_finding(self, finding: Mapping[str, Any]) -> CutoverState:
        """Record a sampled comparison's result."""
        now = self._in(CutoverPhase.LIVE, "record a comparison")
        self._append(now, Event(0, "finding", CutoverPhase.LIVE, detail=dict(finding)))
        return self.state()
