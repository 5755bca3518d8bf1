"""The nine recovery strategies, and one run of a strategy over its slice of the workload.

A strategy is data: where it resumes from, where it waits for a placement, how it treats an
outcome it did not see (the protocol) and what it pays per boundary. The baselines are defined as
the simulation runs them (`baton.sim.baseline_world`): retry on the same placement is Baton's
checkpoint, reconciliation and revalidation without the move; a restart from the last deterministic
step keeps only deterministic state, so it gathers its evidence (an observation) again. The protocols mirror what
`baton faults` measured (docs/fault-matrix.md): the naive transcript control re-sends an ambiguous
side effect under a fresh key and resumes on recorded evidence; the competent control re-sends
under the same key (the target replays it), reports a lost reply as failure, and resumes on
recorded evidence too; Baton reconciles against the target, fences the old epoch and revalidates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from baton.experiment.calibration import Calibration
from baton.experiment.events import BEHAVIORAL, COMMITTED, NOT_COMMITTED, PHYSICAL, SCHEMA_FAILED, UNKNOWN, Recorder
from baton.experiment.oracle import EvidenceSource, TargetLedger
from baton.experiment.workload import AGENT_KINDS, FAULT_KINDS, MAX_FAULTS, Parameters, Workload
from baton.models.events import EventType as E

CRASH, AMBIGUOUS, STALE_WAKES, REPLY_LOST, PLACEMENT_LOST, EVIDENCE_CHANGED = range(len(FAULT_KINDS))
EFFECT_FAULTS = (AMBIGUOUS, STALE_WAKES, REPLY_LOST)


@dataclass(frozen=True)
class Strategy:
    """One recovery strategy."""

    id: str
    label: str
    resume: str      # checkpoint | coarse | transcript | beginning | deterministic
    placement: str   # any | pool | same
    protocol: str    # baton | naive | competent | keyed | human
    boundary: str    # seal | transcript | none
    moves: bool      # recovers by a handoff to another worker (emits handoff events)


STRATEGIES: tuple[Strategy, ...] = (
    Strategy("baton", "Baton safe handoff", "checkpoint", "any", "baton", "seal", True),
    Strategy("naive", "naive transcript checkpoint", "transcript", "any", "naive", "transcript", True),
    Strategy("competent", "competent transcript-only control", "transcript", "any", "competent", "transcript", True),
    Strategy("restart", "restart from the beginning", "beginning", "any", "keyed", "none", False),
    Strategy("restart_last_step", "restart from the last deterministic step", "deterministic", "any", "keyed",
             "none", False),
    Strategy("retry_same_placement", "retry on the same placement", "checkpoint", "same", "baton", "seal", False),
    Strategy("wait_same_pool", "wait for the same resource pool", "checkpoint", "pool", "baton", "seal", True),
    Strategy("coarse_checkpoints", "coarse checkpoints only", "coarse", "any", "baton", "seal", True),
    Strategy("human_assisted", "human-assisted recovery", "transcript", "any", "human", "transcript", True),
)
BY_ID = {strategy.id: strategy for strategy in STRATEGIES}
ORDER = tuple(strategy.id for strategy in STRATEGIES)
"""The strategies' ids in the engine's order (the sweep gives a tied cell to the first)."""


def interventions_for(strategy_id: str, faults: int) -> int | None:
    """A run's human interventions as `RunSimulation` counts them: one per fault under the human protocol
    (every version of the engine), none under the others; None for a strategy this engine does not know."""
    strategy = BY_ID.get(strategy_id)
    if strategy is None:
        return None
    return faults if strategy.protocol == "human" else 0


@dataclass
class Outcome:
    """What one run of one strategy cost and how it ended (the strategy's own report; the oracle judges)."""

    reported: str = "verified"   # verified | failed | escalated
    faults: int = 0
    executed: int = 0
    cost_usd: float = 0.0
    compute_s: float = 0.0
    completion_s: float = 0.0
    handoffs: int = 0
    interventions: int = 0
    quoted: int | None = None    # evidence version the final candidate quotes
    reason: str = "none"          # the first fault the run recovered from (FAULT_KINDS), "none" if none struck
    migration_class: str = "none"  # PHYSICAL | BEHAVIORAL: the class of the run's first move, "none" if it never moved


class RunSimulation:
    """One strategy over one run: steps execute in segments between the faults of the schedule."""

    def __init__(self, strategy: Strategy, w: Workload, i: int, params: Parameters, cal: Calibration,
                 ledger: TargetLedger, evidence: EvidenceSource, rec: Recorder) -> None:
        self.s, self.w, self.i, self.p, self.cal = strategy, w, i, params, cal
        self.ledger, self.evidence, self.rec = ledger, evidence, rec
        self.n = int(w.steps[i])
        self.step_s, self.step_usd = float(w.step_s[i]), float(w.step_usd[i])
        self.effect_step = int(w.effect_step[i])
        self.evidence_steps = int(w.evidence_steps[i])
        self.out = Outcome()
        self.t = 0.0
        self.pos = 0
        self.effect_done = False
        self.attempt = 0
        self.held: int | None = None   # oldest evidence version the run holds

    # -- mechanics ---------------------------------------------------------------------------
    def _key(self) -> str:
        return f"r{self.i}:effect" if self.s.protocol != "naive" else f"r{self.i}:effect:{self.attempt}"

    def _execute(self, start: int, stop: int) -> None:
        """Steps [start, stop) complete; the effect step inside sends its request; evidence is gathered."""
        count = stop - start
        if count <= 0:
            return
        if start < self.evidence_steps:
            current = self.evidence.current(self.i)
            self.held = current if start == 0 or self.held is None else min(self.held, current)
        if start <= self.effect_step < stop and not self.effect_done:
            self.ledger.request(self.i, "effect", self._key())
            self.effect_done = True
        if self.s.boundary != "none":
            every = self.p.coarse_every if self.s.resume == "coarse" else 1
            marks = stop // every - start // every
            first = (start // every + 1) * every - 1   # the first step after which a boundary seals
            self.rec.checkpoints(self.i, self.t + (first - start + 1 - every) * self.step_s, self.step_s * every,
                                 marks)
        self._spend(count)

    def _spend(self, steps: int) -> None:
        self.out.executed += steps
        self.out.cost_usd += steps * self.step_usd
        self.out.compute_s += steps * self.step_s
        self.t += steps * self.step_s

    def _wait(self, seconds: float) -> None:
        self.t += seconds

    def _resume_point(self, strike: int) -> int:
        resume = self.s.resume
        if resume == "beginning":
            return 0
        if resume == "deterministic":
            return (strike // self.p.deterministic_every) * self.p.deterministic_every
        if resume == "coarse":
            return (strike // self.p.coarse_every) * self.p.coarse_every
        return strike

    # -- one run --------------------------------------------------------------------------------
    def run(self) -> Outcome:
        w, i = self.w, self.i
        self.rec.emit(i, E.RUN_CREATED, 0.0, reason=AGENT_KINDS[int(w.kind[i])])
        self.rec.emit(i, E.LEASE_ACQUIRED, 0.0)
        executed_since = 0
        k = 0
        due = int(w.gap[i, 0])
        limit = self.p.attempt_limit * self.n
        while self.pos < self.n:
            if self.out.executed > limit:
                return self._finish("escalated")
            kind = int(w.fault_kind[i, k]) if k < MAX_FAULTS else -1
            strike = self.pos + (due - executed_since) if k < MAX_FAULTS else self.n
            at_effect = (kind in EFFECT_FAULTS and not self.effect_done and self.effect_step >= self.pos
                         and self.effect_step >= strike)
            if at_effect:
                strike = self.effect_step
            if strike >= self.n:
                self._execute(self.pos, self.n)
                self.pos = self.n
                break
            self._execute(self.pos, strike)
            self._spend(1)  # the step in progress is paid for and lost
            executed_since = 0
            self.out.faults += 1
            struck = kind if (at_effect or kind not in EFFECT_FAULTS) else CRASH
            if self.out.faults == 1:
                self.out.reason = FAULT_KINDS[struck]
            ended = self._recover(k, strike, struck, at_effect)
            if ended is not None:
                return self._finish(ended)
            k += 1
            due = int(w.gap[i, k]) if k < MAX_FAULTS else 0
        return self._finish("verified")

    def _finish(self, status: str) -> Outcome:
        self.out.reported = status
        self.out.quoted = self.held
        self.out.completion_s = self.t
        self.rec.emit(self.i, E.RUN_FINISHED, self.t, reason=status)
        return self.out

    def _recover(self, k: int, strike: int, kind: int, at_effect: bool) -> str | None:
        """Handle the fault that struck during step `strike`; a status ends the run, None carries on."""
        w, i, s = self.w, self.i, self.s
        key = self._key()
        if at_effect:
            # The request went out; the target committed it (always when only the reply was lost).
            if kind == REPLY_LOST or bool(w.committed[i, k]):
                self.ledger.request(i, "effect", key)
        if kind == EVIDENCE_CHANGED:
            self.evidence.change(i)   # the world changes during the outage, whoever recovers
        if kind == REPLY_LOST and at_effect:
            return self._reply_lost(k, strike, key)
        # The worker is gone: wait for somewhere to resume.
        wait = {"any": float(w.any_wait_s[i, k]), "pool": float(w.pool_wait_s[i, k]),
                "same": float(w.same_wait_s[i, k])}[s.placement]
        if s.protocol == "human":
            self.out.interventions += 1
            self.out.cost_usd += self.p.human_cost_usd
            wait += self.p.human_delay_s
        self._wait(wait)
        if s.moves:
            self._handoff(k, kind)
        else:
            self.rec.emit(i, E.LEASE_ACQUIRED, self.t)
        resume_at = self._resume_point(strike)
        if at_effect:
            self._effect_after_crash(kind, key)
        if s.protocol in ("baton", "human") and self.held is not None and resume_at > 0:
            self._revalidate()
        elif s.resume == "deterministic" and self.held is not None and resume_at > 0:
            self._read_evidence_again()
        if self.effect_step >= 0 and resume_at <= self.effect_step and s.protocol == "keyed":
            self.effect_done = False   # it will execute the effect step again, under the same key
        if s.resume == "beginning":
            self.held = None
        self.pos = resume_at if not (at_effect and self.effect_done and resume_at == strike) else strike + 1
        if s.moves:
            self.rec.emit(i, E.RESUME_STARTED, self.t)
            self.rec.emit(i, E.RESUME_VERIFIED, self.t + self.step_s)
        return None

    def _reply_lost(self, k: int, strike: int, key: str) -> str | None:
        """The target committed and died before replying; the worker is alive."""
        i, s = self.i, self.s
        self._wait(float(self.w.any_wait_s[i, k]))   # the target comes back
        if s.protocol in ("naive", "competent"):
            return "failed"   # both reported failure with the effect in place (fault matrix: unknown_hidden)
        if s.protocol == "human":
            self.out.interventions += 1
            self.out.cost_usd += self.p.human_cost_usd
            self._wait(self.p.human_delay_s)
        if s.protocol == "baton":
            self.rec.emit(i, E.OPERATION_RECONCILED, self.t, COMMITTED if self.ledger.committed(i, key) else
                          NOT_COMMITTED)
        else:
            self.ledger.request(i, "effect", key)   # keyed retry: the target replays it
        self.effect_done = True
        self.pos = strike + 1
        return None

    def _effect_after_crash(self, kind: int, key: str) -> None:
        """The worker died awaiting the effect's reply: what each protocol does about it."""
        i, s = self.i, self.s
        if kind == STALE_WAKES:
            # The old worker wakes later and sends its pending request under its own key.
            if s.protocol == "baton":
                self.rec.emit(i, E.STALE_WORKER_REJECTED, self.t)
            else:
                self.ledger.request(i, "effect", key)
        if s.protocol in ("baton", "human"):
            committed = self.ledger.committed(i, key)
            if s.protocol == "baton":
                self.rec.emit(i, E.OPERATION_RECONCILED, self.t, COMMITTED if committed else NOT_COMMITTED)
            self.effect_done = committed
        elif s.protocol == "naive":
            self.attempt += 1          # a fresh key: the transcript never saw the reply
            self.effect_done = False
        elif s.protocol == "competent":
            self.rec.emit(i, E.OPERATION_RECONCILED, self.t, UNKNOWN)
            self.ledger.request(i, "effect", key)   # same key: the target replays it
            self.effect_done = True
        else:
            self.effect_done = False   # keyed strategies re-send under the same key when they get there

    def _revalidate(self) -> None:
        """REVALIDATE_LIVE_STATE on resume; a changed source means refreshing the evidence phase."""
        i = self.i
        if self.s.protocol == "baton":
            self.rec.emit(i, E.REVALIDATION_STARTED, self.t)
        if self.held is not None and self.held < self.evidence.current(i):
            self._spend(self.evidence_steps)
            self.held = self.evidence.current(i)

    def _read_evidence_again(self) -> None:
        """A restart from a deterministic step keeps only deterministic state: the evidence is an observation, so
        it is gathered again, changed or not (no revalidation tells it whether the source moved)."""
        self._spend(self.evidence_steps)
        self.held = self.evidence.current(self.i)

    def _handoff(self, k: int, kind: int) -> None:
        w, i, s = self.w, self.i, self.s
        self.out.handoffs += 1
        migration = BEHAVIORAL if kind == PLACEMENT_LOST and s.placement == "any" else PHYSICAL
        if self.out.handoffs == 1:
            self.out.migration_class = "BEHAVIORAL" if migration == BEHAVIORAL else "PHYSICAL"
        self.rec.emit(i, E.HANDOFF_REQUESTED, self.t)
        if s.protocol == "baton":
            handoff_s = float(self.cal.handoff_ms[int(w.seal_draw[i, k] * self.cal.handoff_ms.size)]) / 1000.0
            self.rec.emit(i, E.SOURCE_FENCED, self.t)
            if bool(w.incompatible[i, k]):
                self.rec.emit(i, E.COMPATIBILITY_FAILED, self.t, SCHEMA_FAILED)
                self.rec.emit(i, E.HANDOFF_ABORTED, self.t)
                self._wait(float(w.any_wait_s[i, (k + 1) % MAX_FAULTS]))
                self.rec.emit(i, E.HANDOFF_REQUESTED, self.t)
            self.rec.emit(i, E.COMPATIBILITY_PASSED, self.t, migration)
            self.out.compute_s += handoff_s
            self._wait(handoff_s)
            self.rec.emit(i, E.OWNERSHIP_TRANSFERRED, self.t)
            if bool(w.downgrade[i, k]):
                self.rec.emit(i, E.AUTHORITY_DOWNGRADED, self.t)
        else:
            self.rec.emit(i, E.OWNERSHIP_TRANSFERRED, self.t)
        self.rec.emit(i, E.STATE_RESTORED, self.t)


def boundary_ms(strategy: Strategy, cal: Calibration) -> float | None:
    """Fixed per-boundary latency, or None to draw from the measured seal samples."""
    return cal.transcript_write_ms if strategy.boundary == "transcript" else None


def gateway_overhead_s(strategy: Strategy, w: Workload, cal: Calibration) -> np.ndarray:
    """Per run: the gateway's measured cost on the consequential mutation, paid only under Baton's protocol."""
    has_effect = w.effect_step >= 0
    return np.where(has_effect & (strategy.protocol == "baton"), cal.gateway_ms / 1000.0, 0.0)
