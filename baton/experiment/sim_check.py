"""The experiment's Baton strategy checked against the real protocol: one fault of each kind in the simulation.

The strategy experiment replays Baton as a fast model (`baton.experiment.strategies`). This module asks
the real code the same question for each of the model's six fault kinds: `baton sim` worlds (the real
coordinator, worker, SDK, gateway and agents on a virtual clock) with exactly one fault of that kind,
placed where the model places it. A fault-free run of the same seed first finds the worker's write
count and the message that carries the run's consequential mutation, so that e.g. a lost reply is lost
on the mutation itself, as in the model:

| model fault        | simulated fault                                                              |
|--------------------|------------------------------------------------------------------------------|
| crash              | `crash` at a random worker write (before or after its commit)                |
| ambiguous          | the mutation's request or its answer lost (`drop_request` / `drop_response`) |
| stale_wakes        | `stall` for 40 s (past the 6 s lease) at the write that claims the mutation  |
| reply_lost         | the mutation's answer lost after the target committed (`drop_response`)      |
| placement_lost     | a forced move (`handoff`: GPU reclaimed, region capacity lost, provider down) |
| evidence_changed   | a research run's worker crashes and a corpus document changes meanwhile      |

Both sides are judged outside the code under test: the simulated worlds by the targets' own effect
files (a run holding more than one effect for its one operation) and the simulation's oracles; the
model by its target ledger and evidence source. The check reports where they agree (the safety
verdicts) and how far the model's verified share is from the real code's.

The same check runs for the transcript-only controls (`strategy="naive"` or `"competent"`) and the six
baselines (`"restart"`, `"retry_same_placement"`, ...): the simulated side is then the control's own code
(`baton.sim.control_world`) or Baton's world under the baseline's recovery policy
(`baton.sim.baseline_world`), with each fault placed by a fault-free world of that strategy (its durable
writes and its mutation), and the model side is the experiment's model of that strategy. For Baton the
safety verdict is "both sides clean"; for any other strategy it is "both sides say the same": a second
effect on both sides or on neither, stale evidence on both or on neither.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from baton.chaos import ChaosReason
from baton.experiment.calibration import Calibration, load_calibration
from baton.experiment.engine import run_strategy
from baton.experiment.strategies import BY_ID
from baton.experiment.workload import FAULT_KINDS, Parameters, generate
from baton.models import RunKind
from baton.sim.baseline_world import SIM_STRATEGIES
from baton.sim.faults import Fault, FaultPlan
from baton.sim.oracles import MUTATION_PATHS, effects_by_target
from baton.sim.runner import invariants_of
from baton.sim.runner import config_for
from baton.sim.seal_writes import worker_writes
from baton.sim.world import SimRecords, run_world
from baton.targets.corpus_documents import INITIAL_DOCUMENTS

STALL_PAST_LEASE_S = "40.0"
MOVE_REASONS = (ChaosReason.GPU_RECLAIMED, ChaosReason.REGION_CAPACITY_LOST, ChaosReason.PROVIDER_UNHEALTHY)
MODEL_RUNS = 20_000


@dataclass(frozen=True)
class Baseline:
    """What a fault-free world of one seed did: its worker writes and the message of its run's mutation."""

    writes: int
    mutation_seq: int | None
    claim_write: int | None
    """The count of the last worker write before the mutation went out (the gateway's claim)."""


@dataclass
class SimSide:
    """The simulated worlds of one fault kind."""

    worlds: int = 0
    fired: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    runs_over_one_effect: int = 0
    violating_worlds: int = 0
    stale_worlds: int = 0
    """Worlds where the oracle of invariant 9 found a publication quoting a superseded document."""
    examples: list[str] = field(default_factory=list)

    @property
    def verified_share(self) -> float | None:
        runs = sum(self.statuses.values())
        return self.statuses["verified"] / runs if runs else None


@dataclass(frozen=True)
class ModelSide:
    """The model's Baton runs whose one fault was of this kind."""

    runs: int
    verified: int
    duplicates: int
    stale: int

    @property
    def verified_share(self) -> float | None:
        return self.verified / self.runs if self.runs else None


@dataclass(frozen=True)
class KindCheck:
    """One fault kind on both sides."""

    kind: str
    sim: SimSide
    model: ModelSide
    strategy: str = "baton"

    @property
    def safety_agrees(self) -> bool:
        """Baton: both sides clean (no run with a second effect, no stale evidence accepted, no oracle violated).
        A control: both sides give the same verdicts (a second effect on both or neither, stale evidence on both
        or neither)."""
        if self.strategy != "baton":
            return ((self.sim.runs_over_one_effect > 0) == (self.model.duplicates > 0)
                    and (self.sim.stale_worlds > 0) == (self.model.stale > 0))
        return (self.sim.runs_over_one_effect == 0 and self.sim.violating_worlds == 0
                and self.model.duplicates == 0 and self.model.stale == 0)

    def as_dict(self) -> dict[str, Any]:
        sim = asdict(self.sim) | {"statuses": dict(self.sim.statuses), "verified_share": self.sim.verified_share}
        model = asdict(self.model) | {"verified_share": self.model.verified_share}
        return {"kind": self.kind, "strategy": self.strategy, "sim": sim, "model": model,
                "safety_agrees": self.safety_agrees}


def run_kind_for(kind: str) -> RunKind:
    """Evidence changes under a research run (its corpus); every other fault strikes a deploy run."""
    return RunKind.RESEARCH if kind == "evidence_changed" else RunKind.DEPLOY


def baseline(seed: int, run_kind: RunKind, strategy: str = "baton") -> Baseline:
    """Run the seed's world without faults and read where its writes and its mutation fall."""
    seqs: list[int] = []

    def look(records: SimRecords) -> None:
        seqs.extend(m.seq for m in records.network.messages
                    if m.method == "POST" and m.path == MUTATION_PATHS.get(m.target))

    outcome = run_world(config_for(seed, 0, plan=FaultPlan(), kinds=(run_kind,), keep_trail=True, strategy=strategy),
                        before_check=look)
    trail = outcome.trail or []
    mutation = min(seqs) if seqs else None
    claim = None
    if mutation is not None:
        sent = next(n for n, line in enumerate(trail) if f" send {mutation} POST " in line)
        claim = len(worker_writes(trail[:sent])) or None
    return Baseline(len(worker_writes(trail)), mutation, claim)


def faults_for(kind: str, base: Baseline, rng: random.Random) -> tuple[Fault, ...]:
    """The simulated fault(s) standing for the model's `kind`; none when the world gives them nowhere to land."""
    write = rng.randint(1, max(1, base.writes))
    if kind == "crash":
        return (Fault("crash", write, rng.choice(("before", "after"))),)
    if kind == "placement_lost":
        return (Fault("handoff", write, rng.choice(MOVE_REASONS).value),)
    if kind == "evidence_changed":  # the model changes the evidence during the outage a fault causes
        return Fault("crash", write, "after"), Fault("doc_change", write, rng.choice(sorted(INITIAL_DOCUMENTS)))
    if kind not in FAULT_KINDS:
        raise ValueError(f"unknown fault kind {kind!r}; known: {', '.join(FAULT_KINDS)}")
    if base.mutation_seq is None or base.claim_write is None:
        return ()
    if kind == "stale_wakes":
        return (Fault("stall", base.claim_write, STALL_PAST_LEASE_S),)
    if kind == "ambiguous":
        return (Fault(rng.choice(("drop_request", "drop_response")), base.mutation_seq),)
    return (Fault("drop_response", base.mutation_seq),)  # reply_lost


def check_sim(kind: str, worlds: int, *, tick: Callable[[], None] | None = None, strategy: str = "baton",
              await_stalled: bool = False) -> SimSide:
    """`worlds` simulated worlds (seeds 0..worlds-1), each with the one fault standing for `kind`."""
    side = SimSide()
    run_kind = run_kind_for(kind)
    for seed in range(worlds):
        faults = faults_for(kind, baseline(seed, run_kind, strategy), random.Random(f"simcheck:{kind}:{seed}"))
        side.worlds += 1
        if faults:
            _run_one(side, seed, run_kind, faults, strategy, await_stalled)
        if tick is not None:
            tick()
    return side


def _run_one(side: SimSide, seed: int, run_kind: RunKind, faults: tuple[Fault, ...], strategy: str = "baton",
             await_stalled: bool = False) -> None:
    per_run: Counter[str] = Counter()

    def look(records: SimRecords) -> None:
        for effects in effects_by_target(records).values():
            per_run.update(str(effect.get("run_id", "")) for effect in effects)

    outcome = run_world(config_for(seed, 0, plan=FaultPlan(faults), kinds=(run_kind,), strategy=strategy,
                                   await_stalled=await_stalled), before_check=look)
    if not set(faults) <= set(outcome.fired):
        return
    side.fired += 1
    side.statuses.update(outcome.statuses.values())
    over = [run for run, count in per_run.items() if count > 1]
    side.runs_over_one_effect += len(over)
    side.violating_worlds += bool(outcome.violations)
    side.stale_worlds += "I9" in invariants_of(outcome)
    if (over or outcome.violations) and len(side.examples) < 3:
        described = " ".join(fault.describe() for fault in faults)
        side.examples.append(f"seed {seed} {described}: effects {dict(per_run)}, {outcome.violations[:2]}")


def check_model(seed: int = 7, runs: int = MODEL_RUNS, *, params: Parameters | None = None,
                calibration: Calibration | None = None, strategy: str = "baton") -> dict[str, ModelSide]:
    """The model's strategy (Baton by default) over one workload: per fault kind, its runs that met exactly that one
    fault."""
    params = params or Parameters()
    w = generate(seed, runs, params)
    result = run_strategy(BY_ID[strategy], w, params, calibration or load_calibration(), seed=seed,
                          with_metrics=False)
    sides = {}
    for kind in FAULT_KINDS:
        mask = (result.faults == 1) & (result.reasons == kind)
        sides[kind] = ModelSide(int(mask.sum()), int(result.verified[mask].sum()),
                                int(result.duplicates[mask].sum()), int(result.stale[mask].sum()))
    return sides


def check(worlds: int, *, seed: int = 7, model_runs: int = MODEL_RUNS, kinds: tuple[str, ...] = FAULT_KINDS,
          tick: Callable[[], None] | None = None, strategy: str = "baton", await_stalled: bool = False
          ) -> list[KindCheck]:
    """Every fault kind on both sides, for `strategy` (one of `SIM_STRATEGIES`)."""
    unknown = sorted(set(kinds) - set(FAULT_KINDS))
    if unknown:
        raise ValueError(f"unknown fault kind(s) {', '.join(unknown)}; known: {', '.join(FAULT_KINDS)}")
    if strategy not in SIM_STRATEGIES:
        raise ValueError(f"the simulation runs {', '.join(SIM_STRATEGIES)}, not {strategy!r}")
    model = check_model(seed, model_runs, strategy=strategy)
    return [KindCheck(kind, check_sim(kind, worlds, tick=tick, strategy=strategy, await_stalled=await_stalled),
                      model[kind], strategy) for kind in kinds]


def share_gap(row: KindCheck) -> float | None:
    """The model's verified share less the real code's (positive: the model is more optimistic)."""
    sim, model = row.sim.verified_share, row.model.verified_share
    return None if sim is None or model is None else round(model - sim, 4)
