"""Many seeds, one summary; replaying one seed; shrinking a failing schedule to a minimal one."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

from baton.models import RunKind
from baton.sim.faults import FaultPlan
from baton.sim.oracles import outside_of
from baton.sim.scenarios import mixed
from baton.sim.world import SimConfig, SimOutcome, run_world

DEFAULT_KINDS = (RunKind.DEPLOY,)


def config_for(seed: int, faults: int, *, ablate: Sequence[str] = (), plan: FaultPlan | None = None,
               kinds: tuple[RunKind, ...] = DEFAULT_KINDS, keep_trail: bool = False,
               strategy: str = "baton", await_stalled: bool = False) -> SimConfig:
    """The world of `seed`: its fault schedule is drawn from the seed (random faults, sometimes a named scenario,
    `baton.sim.scenarios`) unless `plan` is given. The schedule depends on the seed and the run kinds only, never
    on `strategy` (`baton`, `naive`, `competent`): every strategy faces the same faults (`baton.sim.control_world`
    says how each reaches a control)."""
    if strategy != "baton" and ablate:
        raise ValueError("ablations switch off Baton's protections: a control strategy has none to switch off")
    return SimConfig(seed=seed, plan=plan if plan is not None else mixed(seed, faults, kinds), kinds=kinds,
                     ablate=tuple(ablate), keep_trail=keep_trail, strategy=strategy, await_stalled=await_stalled)


def run_seed(seed: int, faults: int, ablate: Sequence[str] = (), plan: FaultPlan | None = None,
             kinds: tuple[RunKind, ...] = DEFAULT_KINDS, keep_trail: bool = False, strategy: str = "baton",
             await_stalled: bool = False) -> SimOutcome:
    return run_world(config_for(seed, faults, ablate=ablate, plan=plan, kinds=kinds, keep_trail=keep_trail,
                                strategy=strategy, await_stalled=await_stalled))


def _run_one(args: tuple[int, int, tuple[str, ...], tuple[RunKind, ...], str, bool]) -> SimOutcome:
    seed, faults, ablate, kinds, strategy, await_stalled = args
    outcome = run_seed(seed, faults, ablate, kinds=kinds, strategy=strategy, await_stalled=await_stalled)
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
    violations_by_oracle: Counter[str] = field(default_factory=Counter)
    """Invariant (`I1`...) -> violations of it found, over every seed."""
    seeds_by_oracle: Counter[str] = field(default_factory=Counter)
    """Invariant -> seeds with at least one violation of it."""
    skipped_counts: Counter[str] = field(default_factory=Counter)
    """Fault kind -> scheduled faults with no counterpart for the strategy (they never fire)."""
    errors: int = 0
    steps: int = 0
    interventions: int = 0
    """Human interventions over every seed (`human_assisted` only)."""

    @property
    def seeds_per_s(self) -> float:
        return self.seeds / self.seconds if self.seconds > 0 else 0.0

    def add(self, outcome: SimOutcome) -> None:
        self.seeds += 1
        self.steps += outcome.steps
        self.fault_counts.update(f.kind for f in outcome.fired)
        self.scheduled_counts.update(f.kind for f in outcome.plan.faults)
        self.statuses.update(outcome.statuses.values())
        self.violations_by_oracle.update(v.split(":", 1)[0] for v in outcome.violations)
        self.seeds_by_oracle.update(invariants_of(outcome))
        self.skipped_counts.update(f.kind for f in outcome.skipped)
        self.errors += bool(outcome.errors)
        self.interventions += outcome.interventions
        if not outcome.ok:
            self.failing.append(outcome)


def run_many(seeds: Sequence[int], faults: int, *, ablate: Sequence[str] = (), jobs: int = 1,
             kinds: tuple[RunKind, ...] = DEFAULT_KINDS, stop_at_first_failure: bool = False,
             on_outcome: Callable[[SimOutcome], None] | None = None, strategy: str = "baton",
             await_stalled: bool = False) -> Summary:
    """Run every seed (in `jobs` processes) and summarize."""
    summary = Summary()
    started = time.perf_counter()
    work = [(seed, faults, tuple(ablate), kinds, strategy, await_stalled) for seed in seeds]
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
           budget: int = 64, strategy: str = "baton", await_stalled: bool = False) -> tuple[FaultPlan, int]:
    """Delta debugging (ddmin): a smallest sub-schedule of `plan` that still violates the same invariants.

    Returns the shrunk plan and how many replays it took (at most `budget`).
    """
    target = invariants_of(run_seed(seed, 0, ablate, plan=plan, kinds=kinds, strategy=strategy,
                                    await_stalled=await_stalled))
    tries = 0

    def fails(candidate: FaultPlan) -> bool:
        nonlocal tries
        tries += 1
        return bool(target) and target <= invariants_of(run_seed(seed, 0, ablate, plan=candidate, kinds=kinds,
                                                                 strategy=strategy, await_stalled=await_stalled))

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


def attribute(seed: int, plan: FaultPlan, off: Sequence[str], others: Sequence[str], *,
              kinds: tuple[RunKind, ...] = DEFAULT_KINDS) -> dict[str, object]:
    """A violating seed judged: its schedule shrunk with `off` switched off, the shrunk schedule replayed twice
    with `off` (the trail hashes), once with every protection on and once with only `others` (the companions)
    off. `attributable` says whether the ablated switch is what the oracles caught: the shrunk schedule passes
    every check with everything on, and with `off` it violates an oracle from outside that the companions alone
    do not (`caught_by`; `baton.sim.oracles.OWN_RECORDS` checks still count in `ok`, but Baton's own rows
    disagreeing with themselves is no outside evidence for a switch)."""
    shrunk, _tries = shrink(seed, plan, ablate=off, kinds=kinds)
    replays = [run_seed(seed, 0, off, plan=shrunk, kinds=kinds) for _ in range(2)]
    protected = run_seed(seed, 0, plan=shrunk, kinds=kinds)
    companions_only = run_seed(seed, 0, tuple(others), plan=shrunk, kinds=kinds) if others else protected
    caught_by = outside_of(replays[0].violations) - outside_of(companions_only.violations)
    return {"first_seed": seed, "violations": sorted(invariants_of(replays[0])),
            "evidence": replays[0].violations[:2], "shrunk_schedule": [f.as_dict() for f in shrunk.faults],
            "replay_identical": replays[0].trail_hash == replays[1].trail_hash,
            "trail_hashes": [r.trail_hash for r in replays], "protected_ok": protected.ok,
            "companions_only_ok": companions_only.ok,
            "companions_only_violations": sorted(invariants_of(companions_only)), "caught_by": sorted(caught_by),
            "attributable": protected.ok and bool(caught_by)}


def ablation_sweep(names: Sequence[str], seeds: int, faults: int, *, kinds: tuple[RunKind, ...] = DEFAULT_KINDS,
                   jobs: int = 1, companions: Mapping[str, tuple[str, ...]] | None = None,
                   on_result: Callable[[dict[str, object]], None] | None = None,
                   judge: Callable[..., dict[str, object]] | None = None) -> list[dict[str, object]]:
    """Each ablation in turn over seeds 0..seeds-1 (what `baton sim --ablate NAME` does for one), up to its first
    attributable violating seed: a violating seed's schedule is shrunk, the shrunk schedule replayed twice with
    the ablation (the trail hashes) and once with every protection on (a schedule that fails then too is no
    evidence for the ablation).

    `companions` (ablation -> the other protections stacked against the same fault, as the live matrix switches
    them off with it: `baton.faults.matrix.companions_of`) are switched off with the ablation; the shrunk schedule
    must then break an oracle from outside that it does not break with only the companions off, so the ablated
    switch is what the oracle caught (`attribute`). A violating seed that is not attributable (its shrunk schedule
    fails with every protection on, or the companions alone break every outside oracle it breaks) does not end
    the sweep: it is counted (`skipped`, `skipped_seeds`) and the sweep goes on to
    the next seed. The result describes the first attributable seed, or else the last violating one."""
    judge = judge or attribute
    results = []
    for name in names:
        others = tuple((companions or {}).get(name, ()))
        off = (name, *others)
        result: dict[str, object] = {"ablation": name, "companions": list(others), "seeds_run": 0,
                                     "caught": False, "first_seed": None, "violations": None,
                                     "shrunk_schedule": None, "replay_identical": None, "trail_hashes": None,
                                     "protected_ok": None, "companions_only_ok": None,
                                     "companions_only_violations": None, "caught_by": None, "skipped": 0,
                                     "skipped_seeds": []}
        seconds, start = 0.0, 0
        while start < seeds:
            summary = run_many(range(start, seeds), faults, ablate=off, jobs=jobs, kinds=kinds,
                               stop_at_first_failure=True)
            seconds += summary.seconds
            result["seeds_run"] = start + summary.seeds
            if not summary.failing:
                break
            first = summary.failing[0]
            verdict = judge(first.seed, first.plan, off, others, kinds=kinds)
            result.update({k: v for k, v in verdict.items() if k != "attributable"})
            if verdict["attributable"]:
                result["caught"] = True
                break
            result["skipped"] = int(result["skipped"]) + 1  # type: ignore[call-overload]
            result["skipped_seeds"] = [*result["skipped_seeds"], first.seed]  # type: ignore[misc]
            start = first.seed + 1
        result["seconds"] = round(seconds, 1)
        results.append(result)
        if on_result is not None:
            on_result(result)
    return results


if __name__ == "__main__":  # python -m baton.sim.runner OUT.json [--seeds N] [--jobs J] [--alone] [NAME...] (docs/benchmarks.md §7.2)
    import json
    import sys

    from baton.faults.ablations import ABLATIONS
    from baton.faults.matrix import companions_of

    args = sys.argv[2:]
    count = int(args[args.index("--seeds") + 1]) if "--seeds" in args else 100
    alone = "--alone" in args
    chosen = [a for i, a in enumerate(args) if not a.startswith("--") and (i == 0 or args[i - 1] not in ("--seeds", "--jobs"))]
    out, chosen = sys.argv[1], chosen or list(ABLATIONS)
    done: list[dict[str, object]] = []

    def _save(result: dict[str, object]) -> None:
        done.append(result)
        print(json.dumps(result, sort_keys=True), flush=True)
        with open(out, "w", encoding="utf-8") as handle:
            json.dump(done, handle, indent=1, sort_keys=True)

    jobs = int(args[args.index("--jobs") + 1]) if "--jobs" in args else 2
    ablation_sweep(chosen, count, 5, kinds=(RunKind.DEPLOY, RunKind.RESEARCH), jobs=jobs, on_result=_save,
                   companions=None if alone else {name: companions_of(name) for name in chosen})
