"""Ablation runs: the matrix under Baton with one protection switched off, and which cases' oracles notice.

`CATCHING_CASE` is the table the CI test runs: for each ablation, the
smallest case (one case, Baton only) whose oracles caught it in a full
`baton faults --ablate all` run (docs/fault-matrix.md). An ablation mapped to
None was caught by no case in that run: a finding, listed as such.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from baton.ablation import GATE_PREFIX, Ablation
from baton.compat import GateReason
from baton.faults.cases import CASE_LIST, CASES
from baton.faults.matrix import run_matrix

ABLATIONS: tuple[str, ...] = tuple(a.value for a in Ablation) + tuple(GATE_PREFIX + reason.value for reason in GateReason)
"""Every protection `--ablate all` switches off in turn: the named switches, then each reason of the gate."""

_CAUGHT_BY: dict[str, str] = {
    "budget-carry-over": "killed-after-seal",  # also corpus-changed, killed-awaiting-reply, stale-worker-wakes,
    # coding-killed-after-push (budget, from the patch model provider's own call record)
    "reconcile-before-retry": "killed-awaiting-reply",
    "gate:release_incompatible": "release-withdrawn",
    "freshness": "corpus-changed-while-paused",
    "secret-scan": "secret-in-tool-result",
    "gate:region_not_allowed": "placement-left-region",
    "gate:provider_not_allowed": "placement-changed-provider",
    "schema-gate": "placement-lost-schema",
    "gate:state_schema_incompatible": "placement-lost-schema",
    "verifier-gate": "placement-lost-verifier",
    "gate:verifier_unavailable": "placement-lost-verifier",
    "gate:tool_contract_unavailable": "placement-lost-tools",
    "gate:authority_downgrade_forbidden": "placement-ceiling-lowered",
    # each epoch layer alone (the case switches the other two off with it: FaultCase.companions)
    "gateway-epoch": "stale-capability-after-move",
    "store-claim-epoch": "stale-capability-after-move",
    "target-fence": "stale-capability-after-move",
    "idempotency": "killed-awaiting-reply",  # with reconcile-before-retry switched off with it
    # portability constraints and behavioral migration (baton/faults/cases_gates2.py, oracles_gates.py)
    "gate:non_exportable_state": "non-exportable-state-moved",
    "gate:hardware_attestation_missing": "attestation-required-moved",
    "gate:data_scope_unavailable": "data-scope-required-moved",
    "gate:migration_unsafe": "unsafe-state-moved",  # with the two per-target findings switched off with it
    "gate:behavioral_migration_approved": "behavioral-move",  # with gate:runtime_changed switched off with it
    "gate:runtime_changed": "behavioral-move",  # with gate:behavioral_migration_approved switched off with it
    # the two checks against a capability that ran out in the worker's hand, each with the other as companion
    "capability-check": "capability-expired-in-hand",
    "store-claim-expiry": "capability-expired-in-hand",
    # a move the policy allows, downgraded, to a placement whose ceiling was lowered under its standing worker
    "authority-downgrade": "ceiling-lowered-downgrade-allowed",
    "gate:authority_downgraded": "ceiling-lowered-downgrade-allowed",  # with authority-downgrade as companion
    "gateway-ceiling": "ceiling-lowered-downgrade-allowed",  # with authority-downgrade as companion
    "authority-ceiling": "ceiling-lowered-downgrade-allowed",  # with authority-downgrade and gateway-ceiling
    "approval-check": "approval-expired-in-hand",  # the approval ran out between the SDK's check and the authority's
    # the handoff policy's own rules, under a case's policy (baton/faults/cases_policy.py)
    "gate:region_change_forbidden": "region-change-forbidden-moved",
    "gate:provider_change_forbidden": "provider-change-forbidden-moved",
    "gate:behavioral_migration_unapproved": "behavioral-move-unapproved",
    "lease-cas": "stale-claim-after-move",  # with target-fence switched off with it (a claim on a stale read regresses
    # the epoch; the gateway and the store claim compare with the regressed epoch and are blind to it)
    # a VERIFIED checkpoint over a re-planned spec (second writer), moved: with gate:runtime_changed as companion
    "evidence-binding": "replanned-after-verify",
    # a run an older Baton sealed at schema 2, imported and moved to a schema-3-only placement (cases_schema.py)
    "gate:schema_transform_forbidden": "schema-transform-forbidden-moved",
    "gate:schema_transform_required": "schema-transform-moved",  # the same run, the transform allowed
    # the gate's informational reasons and the resume's own checks, each with the other as companion (cases_resume.py)
    "gate:environment_changed": "corpus-changed",
    "resume-environment-check": "corpus-changed",
    "gate:unresolved_operations": "killed-awaiting-reply",
    "resume-open-operations": "killed-awaiting-reply",
    # an ended run moved before its end was recorded, the target made unfit before it adopts (cases_resume.py)
    "gate:checkpoint_not_resumable": "ended-run-moved-to-unfit",  # with resume-terminal-guard as companion
    "resume-terminal-guard": "ended-run-moved-to-unfit",  # with gate:checkpoint_not_resumable as companion
}
CATCHING_CASE: dict[str, str | None] = {name: _CAUGHT_BY.get(name) for name in ABLATIONS}
"""Ablation -> the one case the CI test runs to catch it (None: nothing caught it; a finding).

From the runs recorded in docs/fault-matrix.md. A case may name companions for an ablation
(`FaultCase.companions`): redundant layers against the same fault (the three epoch checks; the
target's idempotency behind reconciliation), switched off with it so that it alone stands between
the fault and the oracles. Every None is a finding, with its reason in docs/fault-matrix.md: no
case of the reference agents produces the fault only that protection answers, a gate reason no
deployment path can raise (the same-region and same-provider rules and an unapproved behavioral
migration are reached only under a case's own policy, `FaultCase.handoff_policy`)."""


class AblationResult(BaseModel):
    """One ablation: which cases' oracles said yes (or crashed) with that protection off."""

    model_config = ConfigDict(frozen=True)

    name: str
    caught: dict[str, list[str]] = Field(default_factory=dict)
    """case id -> the questions its oracles answered yes."""
    errors: dict[str, str] = Field(default_factory=dict)
    """case id -> why the case crashed (never counted as caught: a crash is no oracle)."""
    evidence: dict[str, list[str]] = Field(default_factory=dict)
    seconds: float = 0.0


def run_ablation(name: str, *, seed: int = 0, root: Path | None = None, store_url: str | None = None,
                 cases: list[str] | None = None) -> AblationResult:
    """The matrix (Baton only) with `name` switched off; the cases whose oracles caught it."""
    report = run_matrix(seed, cases=cases, root=None if root is None else root / name.replace(":", "-"),
                        store_url=store_url, ablations=(name,))
    caught: dict[str, list[str]] = {}
    evidence: dict[str, list[str]] = {}
    errors: dict[str, str] = {}
    for result in report.of("baton"):
        if result.violated:
            caught[result.case_id] = [q.value for q in result.violated]
            evidence[result.case_id] = [line for q in result.violated for line in result.answers[q]]
        if result.error:
            errors[result.case_id] = result.error.splitlines()[0]
    return AblationResult(name=name, caught=caught, evidence=evidence, errors=errors, seconds=report.seconds)


def run_ablations(names: list[str], *, seed: int = 0, root: Path | None = None, store_url: str | None = None,
                  cases: list[str] | None = None) -> list[AblationResult]:
    """Each ablation in turn over `cases` (default every case).

    A gate reason is switched off only in the cases whose handoffs raised it in an unablated
    baseline run (Baton only, run first), or that declare they exercise it: elsewhere the gate never weighs it, so switching it
    off changes nothing. A reason no case raises is reported uncaught, as the finding it is.
    """
    chosen = cases or [case.case_id for case in CASE_LIST]
    raised: dict[str, list[str]] = {}
    if any(name.startswith(GATE_PREFIX) for name in names):
        baseline = run_matrix(seed, cases=chosen, strategies=("baton",), store_url=store_url,
                              root=None if root is None else root / "baseline")
        for result in baseline.of("baton"):
            for reason in result.gate_reasons:
                raised.setdefault(GATE_PREFIX + reason, []).append(result.case_id)
        for case_id in chosen:
            for reason in CASES[case_id].exercises:
                if case_id not in raised.setdefault(GATE_PREFIX + reason, []):
                    raised[GATE_PREFIX + reason].append(case_id)
    results = []
    for name in names:
        subset = raised.get(name, []) if name.startswith(GATE_PREFIX) else chosen
        if not subset:
            results.append(AblationResult(name=name, evidence={"-": ["no case's handoff raised this gate reason"]}))
            continue
        results.append(run_ablation(name, seed=seed, root=root, store_url=store_url, cases=subset))
    return results
