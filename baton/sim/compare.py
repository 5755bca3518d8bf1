"""Baton, the transcript-only controls and the baselines on the same seeds, faults and oracles: one table.

    python -m baton.sim.compare OUT.json [--seeds 200] [--faults 5] [--jobs 1]

Each strategy is run twice: as `baton sim` runs it (a world ends once every run
ended) and with `await_stalled` (it runs on until every stalled worker woke and
finished what it was doing, so a zombie's late acts are judged too).

Each strategy (`baton`, `naive`, `competent`, and the baselines run by Baton's
machinery under another recovery policy, `retry_same_placement`, `wait_same_pool`,
`restart`, `restart_last_step`, `coarse_checkpoints` and `human_assisted`: `baton.sim.baseline_world`) runs seeds 0..N-1 with deploy and research runs
(`baton sim --strategy S` for one); the figures are counted from the
oracles' violations (`baton.sim.oracles`), the runs' reported statuses and the
faults that fired. Invariant 4 has two parts that mean different things for a
control, so they are counted apart: `I4 retry without asking` (a mutation whose
answer was lost sent again under the same key without asking the target first: a
protocol rule, harmless where the target deduplicates) and `I4 verified without
exactly one effect` (a run reported verified while its target recorded no side
effect or several of them: harm seen by the target's own records). `bill` (the
provider billed a run for more model calls than it accounted for) and `hidden` (a
run reported failed while its target holds its side effect) are oracles, counted
with the invariants.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from typing import Any

from baton.models import RunKind
from baton.sim.baseline_world import SIM_STRATEGIES
from baton.sim.runner import run_many
from baton.sim.world import SimOutcome

KINDS = (RunKind.DEPLOY, RunKind.RESEARCH)


def label(violation: str) -> str:
    """A violation's invariant, with invariant 4's two parts apart."""
    head = violation.split(":", 1)[0]
    if head == "I4":
        return "I4 verified without exactly one effect" if "reported verified" in violation else \
            "I4 retry without asking"
    return head


def compare(seeds: int, faults: int, *, jobs: int = 1, strategies: tuple[str, ...] = SIM_STRATEGIES,
            await_stalled: bool = False) -> dict[str, Any]:
    """Per strategy: seconds, run statuses, violations and violating seeds per oracle, faults scheduled and fired."""
    report: dict[str, Any] = {"seeds": seeds, "faults_per_seed": faults, "runs": [k.value for k in KINDS],
                              "await_stalled": await_stalled, "strategies": {}}
    for strategy in strategies:
        violations: Counter[str] = Counter()
        seeds_hit: Counter[str] = Counter()
        examples: dict[str, str] = {}

        def note(outcome: SimOutcome, violations: Counter[str] = violations, seeds_hit: Counter[str] = seeds_hit,
                 examples: dict[str, str] = examples) -> None:
            labels = [label(v) for v in outcome.violations]
            violations.update(labels)
            seeds_hit.update(set(labels))
            for name, text in zip(labels, outcome.violations, strict=True):
                examples.setdefault(name, f"seed {outcome.seed}: {text}")

        summary = run_many(range(seeds), faults, jobs=jobs, kinds=KINDS, on_outcome=note, strategy=strategy,
                           await_stalled=await_stalled)
        report["strategies"][strategy] = {
            "seconds": round(summary.seconds, 2), "seeds_per_s": round(summary.seeds_per_s, 2),
            "run_statuses": dict(sorted(summary.statuses.items())),
            "violations": dict(sorted(violations.items())), "violating_seeds": dict(sorted(seeds_hit.items())),
            "seeds_with_any_violation": len(summary.failing), "seeds_with_actor_errors": summary.errors,
            "faults_scheduled": dict(sorted(summary.scheduled_counts.items())),
            "faults_fired": dict(sorted(summary.fault_counts.items())),
            "faults_without_counterpart": dict(sorted(summary.skipped_counts.items())),
            "human_interventions": summary.interventions,
            "example": dict(sorted(examples.items())),
        }
    return report


if __name__ == "__main__":
    args = sys.argv[2:]

    def _option(name: str, default: int) -> int:
        return int(args[args.index(name) + 1]) if name in args else default

    result = {"ends_when_runs_end": compare(_option("--seeds", 200), _option("--faults", 5), jobs=_option("--jobs", 1)),
              "await_stalled": compare(_option("--seeds", 200), _option("--faults", 5), jobs=_option("--jobs", 1),
                                       await_stalled=True)}
    with open(sys.argv[1], "w", encoding="utf-8") as handle:
        json.dump(result, handle, indent=1, sort_keys=True)
    print(json.dumps(result, indent=1, sort_keys=True))
