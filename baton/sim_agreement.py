"""Live against simulation, case by case: one sec.-27 case run live and as its named sim plan, one verdict each.

Both sides reduce to the same verdict, read from the targets' own record files and each side's
own oracles (never from what the run says of itself):

* `status`: how the run ended (the live run's report; the sim's runs table);
* `effects`: how many side effects each target recorded (deploy `deployments.jsonl`, corpus
  `publications.jsonl`, git `pushes.jsonl`, webapp `submissions.jsonl`);
* `stale_accepted`: a target applied a request from a fenced-off epoch (live oracle `stale_owner`,
  sim invariant I2);
* `violated`: any oracle said yes (the live matrix's questions, the sim's invariants).

Usage: `python -m baton.sim_agreement [CASE,...] [--json PATH] [--ablations]`
or `baton sim --agree CASE[,CASE]` (exit 1 when some case disagrees).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from baton.ablation import ablation_env
from baton.faults.cases import CASES
from baton.faults.matrix import isolated_companions, run_case
from baton.faults.oracles import Question
from baton.sim.oracles import effects_under
from baton.sim.runner import config_for
from baton.sim.sec27_plans import PLANS, Sec27Plan
from baton.sim.world import SimRecords, run_world

FIELDS = ("status", "effects", "stale_accepted", "violated")


@dataclass(frozen=True)
class Verdict:
    """One side's reduction of a case."""

    status: str
    effects: dict[str, int]
    stale_accepted: bool
    violated: bool
    evidence: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def same(self, other: Verdict) -> dict[str, bool]:
        """Which verdict fields agree with `other`."""
        return {name: getattr(self, name) == getattr(other, name) for name in FIELDS}


def count_effects(targets_root: Path) -> dict[str, int]:
    """Lines in each target's own effect file under `targets_root` (targets with none left out)."""
    return {target: len(rows) for target, rows in effects_under(targets_root).items() if rows}


def live_verdict(case_id: str, root: Path, ablation: str | None = None, seed: int = 0) -> Verdict:
    """Run `case_id` live under Baton (real processes and services) and reduce it."""

    case = CASES[case_id]
    names = (ablation, *isolated_companions(case, (ablation,))) if ablation else ()
    started = time.monotonic()
    with ablation_env(*names):
        result = run_case(case, "baton", seed, root)
    home = root / f"{case_id}-baton" / "home" / "targets"
    evidence = [f"{q.value}: {e[0]}" for q, e in result.answers.items() if e] + ([result.error] if result.error else [])
    return Verdict(status=str(result.status), effects=count_effects(home),
                   stale_accepted=bool(result.answers.get(Question.STALE_OWNER)), violated=bool(evidence),
                   evidence=evidence, seconds=round(time.monotonic() - started, 1))


def sim_verdict(named: Sec27Plan, ablation: str | None = None) -> Verdict:
    """Replay the case's named plan in the simulation and reduce it; raises if a planned fault never fired."""
    names = (ablation, *isolated_companions(CASES[named.case_id], (ablation,))) if ablation else ()
    effects: dict[str, int] = {}

    def look(records: SimRecords) -> None:
        effects.update(count_effects(records.root))

    started = time.monotonic()
    outcome = run_world(config_for(named.seed, 0, plan=named.plan, kinds=named.kinds, ablate=names), before_check=look)
    missing = set(named.plan.faults) - set(outcome.fired)
    if missing:
        raise RuntimeError(f"{named.case_id}: planned faults never fired: {sorted(f.describe() for f in missing)}")
    return Verdict(status=",".join(sorted(set(outcome.statuses.values()))), effects=effects,
                   stale_accepted=any(v.startswith("I2:") for v in outcome.violations),  # the targets' view only
                   violated=bool(outcome.violations), evidence=[*outcome.violations, *outcome.errors],
                   seconds=round(time.monotonic() - started, 2))


def compare(case_id: str, root: Path, ablation: str | None = None) -> dict[str, Any]:
    """One case live and in the sim (optionally both with `ablation` off): both verdicts and what agrees."""
    sim = sim_verdict(PLANS[case_id], ablation)
    live = live_verdict(case_id, root, ablation)
    same = live.same(sim)
    return {"case": case_id, "ablation": ablation, "plan": PLANS[case_id].plan.to_json(),
            "kinds": [k.value for k in PLANS[case_id].kinds], "live": asdict(live), "sim": asdict(sim),
            "same": same, "agree": all(same.values())}


def _cell(verdict: dict[str, Any]) -> str:
    effects = ",".join(f"{t}={n}" for t, n in sorted(verdict["effects"].items())) or "none"
    return f"{verdict['status']}; {effects}; stale={'yes' if verdict['stale_accepted'] else 'no'}; " \
           f"violations={'yes' if verdict['violated'] else 'no'}"


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """The comparison as a Markdown table, one row per (case, ablation)."""
    lines = ["| case | ablation | live (status; effects; stale accepted; violations) | sim | agree |",
             "|---|---|---|---|---|"]
    for row in rows:
        differ = [name for name, ok in row["same"].items() if not ok]
        agree = "yes" if row["agree"] else "no: " + ", ".join(differ)
        lines.append(f"| `{row['case']}` | {row['ablation'] or '-'} | {_cell(row['live'])} | {_cell(row['sim'])} "
                     f"| {agree} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    from rich.progress import Progress

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="?", default=",".join(PLANS))
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--ablations", action="store_true", help="also run each case with its named ablation off")
    args = parser.parse_args(argv)
    chosen = [c for c in args.cases.split(",") if c]
    jobs = [(c, None) for c in chosen] + ([(c, PLANS[c].ablation) for c in chosen if PLANS[c].ablation]
                                          if args.ablations else [])
    rows = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="baton-agree-") as scratch, Progress() as progress:
        task = progress.add_task("live vs sim", total=len(jobs))
        for case_id, ablation in jobs:
            progress.update(task, description=f"{case_id} {ablation or ''}")
            rows.append(compare(case_id, Path(scratch), ablation))
            progress.advance(task)
    print(markdown_table(rows))
    if args.json is not None:
        args.json.write_text(json.dumps({"seconds": round(time.monotonic() - started, 1), "rows": rows},
                                        indent=1, sort_keys=True) + "\n")
    return rows


if __name__ == "__main__":
    main()
