"""The three strategies a case runs under: Baton, and the two transcript-only controls."""

from __future__ import annotations

from baton.faults.baton_side import BatonRun
from baton.faults.cases import CaseRun, FaultCase
from baton.faults.rig import Rig
from baton.faults.transcript_side import TranscriptRun

STRATEGIES: tuple[str, ...] = ("baton", "naive", "competent")
CONTROLS: tuple[str, ...] = ("naive", "competent")


def make_run(strategy: str, rig: Rig, case: FaultCase, store_url: str | None) -> CaseRun:
    """A fresh run of `case` under `strategy` in `rig` (Baton's store on `store_url` when given)."""
    if strategy == "baton":
        return BatonRun(rig, kind=case.kind, store_url=store_url, case_id=case.case_id, limits=case.limits,
                        task=case.task, constraints=case.constraints, lease_ttl_s=case.lease_ttl_s,
                        handoff_policy=case.handoff_policy, approval_ttl_s=case.approval_ttl_s)
    if strategy in CONTROLS:
        return TranscriptRun(rig, mode=strategy, kind=case.kind, case_id=case.case_id, limits=case.limits,
                        task=case.task, constraints=case.constraints)
    raise ValueError(f"unknown strategy {strategy!r}; known: {', '.join(STRATEGIES)}")
