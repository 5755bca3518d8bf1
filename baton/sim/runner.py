"""Many seeds, one summary; replaying one seed; shrinking a failing schedule to a minimal one."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

from baton.models import RunKind
from baton.sim.faults import FaultPlan, generate
from baton.sim.world import SimConfig, SimOutcome, run_world

DEFAULT_KINDS = (RunKind.DEPLOY,)


def config_for(seed: int, faults: int, *, ablate: Sequence[str] = (), plan: FaultPlan | None = None,
               kinds: tuple[RunKind, ...] = DEFAULT_KINDS, keep_trail: bool = False) -> SimConfig:
    """The world of `seed`: its fault schedule is drawn from the seed unless `plan` is given."""
    return SimConfig(seed=seed, plan=plan if plan is not None else generate(seed, faults), kinds=kinds,
                     ablate=tuple(ablate), keep_trail=keep_trail)


def run_seed(seed: int, faults: int, ablate: Sequence[str] = (), plan: FaultPlan | None = None,
             kinds: tuple[RunKind, ...] = DEFAULT_KINDS, keep_trail: bool = False) -> SimOutcome:
    return run_world(config_for(seed, faults, ablate=ablate, plan=plan, kinds=kinds, keep_trail=keep_trail))


def _run_one(args: tuple[int, int, tuple[str, ...], tuple[RunKind, ...]]) -> SimOutcome:
    seed, faults, ablate, kinds = args
    outcome = run_seed(seed, faults, ablate, kinds=kinds)
    outcome.trail = None
    return outcome


@dataclass
class Summary:
    """What a batch of seeds showed."""

    seeds: int = 0
    seconds: float = 0.0
    failing: list[SimOutcome] = field(default_factory=list)
    fault_counts: Counter[str] = field(default_factory=Counter)
    scheduled_counts: Counter[str] = field(default_factory=Counter)
    statuses: Counter[str] = field(default_factory=Counter)
    errors: int = 0
    steps: int = 0

    @property
    def seeds_per_s(self) -> float:
        return self.seeds / self.seconds if self.seconds > 0 else 0.0

    def add(self, outcome: SimOutcome) -> None:
        self.seeds += 1
        self.steps += outcome.steps
        self.fault_counts.update(f.kind for f in outcome.fired)
        self.scheduled_counts.update(f.kind for f in outcome.plan.faults)
        self.statuses.update(outcome.statuses.values())
        self.errors += bool(outcome.errors)
        if not outcome.ok:
            self.failing.append(outcome)


def run_many(seeds: Sequence[int], faults: int, *, ablate: Sequence[str] = (), jobs: int = 1,
             kinds: tuple[RunKind, ...] = DEFAULT_KINDS, stop_at_first_failure: bool = False,
             on_outcome: Callable[[SimOutcome], None] | None = None) -> Summary:
    """Run every seed (in `jobs` processes) and summarize."""
    summary = Summary()
    started = time.perf_counter()
    work = [(seed, faults, tuple(ablate), kinds) for seed in seeds]
    if jobs <= 1:
        results = map(_run_one, work)
        for outcome in results:
            summary.add(outcome)
            if on_outcome is not None:
                on_outcome(outcome)
            if stop_at_first_failure and not outcome.ok:
                break
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            for outcome in pool.map(_run_one, work, chunksize=8):
                summary.add(outcome)
                if on_outcome is not None:
                    on_outcome(outcome)
                if stop_at_first_failure and not outcome.ok:
                    break
    summary.seconds = time.perf_counter() - started
    return summary


def invariants_of(outcome: SimOutcome) -> frozenset[str]:
    """The invariant numbers an outcome violated (`I1`, `I4`...)."""
    return frozenset(v.split(":", 1)[0] for v in outcome.violations)


def shrink(seed: int, plan: FaultPlan, *, ablate: Sequence[str] = (), kinds: tuple[RunKind, ...] = DEFAULT_KINDS,
           budget: int = 64) -> tuple[FaultPlan, int]:
    """Delta debugging (ddmin): a smallest sub-schedule of `plan` that still violates the same invariants.

    Returns the shrunk plan and how many replays it took (at most `budget`).
    """
    target = invariants_of(run_seed(seed, 0, ablate, plan=plan, kinds=kinds))
    tries = 0

    def fails(candidate: FaultPlan) -> bool:
        nonlocal tries
        tries += 1
        return bool(target) and target <= invariants_of(run_seed(seed, 0, ablate, plan=candidate, kinds=kinds))

    if not target:
        return plan, tries
    if fails(FaultPlan()):
        return FaultPlan(), tries
    faults = list(plan.faults)
    n = 2
    while len(faults) >= 2 and tries < budget:
        size = -(-len(faults) // n)
        chunks = [faults[i:i + size] for i in range(0, len(faults), size)]
        reduced = False
        for index, chunk in enumerate(chunks):
            if tries >= budget:
                break
            if fails(FaultPlan(tuple(chunk))):
                faults, n, reduced = chunk, 2, True
                break
            complement = [f for j, c in enumerate(chunks) if j != index for f in c]
            if len(chunks) > 2 and fails(FaultPlan(tuple(complement))):
                faults, n, reduced = complement, max(n - 1, 2), True
                break
        if not reduced:
            if n >= len(faults):
                break
            n = min(len(faults), n * 2)
    return FaultPlan(tuple(faults)), tries
