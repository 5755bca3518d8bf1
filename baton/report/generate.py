"""Run (or read) every experiment the claims need, judge the claims, and write the report."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable
from pathlib import Path

from rich.progress import Progress

from baton.report.claims import ClaimFinding, judge
from baton.report.evidence import ExperimentResult
from baton.report.experiments import run_experiment
from baton.report.plan import ReportPlan, load_plan
from baton.report.provenance import Provenance, collect
from baton.report.render import render


def gather(plan: ReportPlan, repo: Path, *, skip: Iterable[str] = (), only: Iterable[str] | None = None,
           progress: Progress | None = None) -> dict[str, ExperimentResult]:
    skipped, chosen = set(skip), set(only) if only is not None else None
    results: dict[str, ExperimentResult] = {}
    task = progress.add_task("experiments", total=len(plan.experiments)) if progress else None
    for spec in plan.experiments:
        if progress and task is not None:
            progress.update(task, description=f"experiment {spec.id}")
        off = spec.id in skipped or (chosen is not None and spec.id not in chosen)
        results[spec.id] = run_experiment(spec, repo=repo, skip=off)
        if progress and task is not None:
            progress.advance(task)
    return results


def write_report(*, repo: Path, spec: Path, out: Path, evidence: Path | None = None, skip: Iterable[str] = (),
                 only: Iterable[str] | None = None, today: dt.date | None = None,
                 progress: Progress | None = None) -> list[ClaimFinding]:
    """Generate the report at `out`; returns the findings (one per claim)."""
    plan = load_plan(evidence or repo / "docs" / "evidence")
    provenance = collect(spec, repo, today=today)
    results = gather(plan, repo, skip=skip, only=only, progress=progress)
    findings = [judge(claim, results[claim.experiment]) for claim in plan.claims]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(plan, results, findings, provenance), encoding="utf-8")
    out.with_suffix(".json").write_text(json.dumps(findings_json(findings, results, provenance), indent=2) + "\n",
                                        encoding="utf-8")
    return findings


def findings_json(findings: list[ClaimFinding], results: dict[str, ExperimentResult],
                  provenance: Provenance) -> dict[str, object]:
    """The claim audit as data (what the dashboard's claims page reads)."""
    return {
        "spec_sha256": provenance.spec_sha256,
        "commit": provenance.commit,
        "generated_on": provenance.generated_on.isoformat(),
        "claims": [
            {"id": f.claim.id, "claim": f.claim.claim, "where": f.claim.where, "priority": f.claim.priority,
             "verdict": f.verdict.value, "measured": list(f.measured), "explanation": f.explanation,
             "experiment": f.claim.experiment, "command": results[f.claim.experiment].command,
             "seed": results[f.claim.experiment].seed, "ran": results[f.claim.experiment].ran,
             "provenance": results[f.claim.experiment].provenance or results[f.claim.experiment].reason}
            for f in findings
        ],
    }
