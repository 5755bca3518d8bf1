"""Named fault plans: the cases of sec. 27 that the live matrix runs (`baton.faults.cases`), as pinned sim schedules.

Each plan replays one live case's fault at the same point of the run, in the simulation's
vocabulary (`baton.sim.faults`). Write counts come from `baton.sim.seal_writes` on a fault-free
world of the same seed: on seed 0 a deploy run seals VERIFIED at write 11, claims its deployment
at write 15 and records the target's answer at write 16; a research run seals VERIFIED at write 13;
a coding run records the push's answer at write 46; a browser run records the submission's at 19.
Message 3 of a deploy world is its one `POST /deployments`. Every plan's faults fire (tests/sim/
test_sec27_plans.py checks it). `ablation` names the switch the live matrix says this case catches
(docs/fault-matrix.md, "## Ablations"); `baton.sim_agreement` asks the sim the same.

Live cases with no faithful plan here, and why:

* `target-dies-after-commit`: the deploy service dies and stays down; the sim's network loses a
  message (`drop_response`) but every target stays up, so the run reconciles and ends verified.
* `manifest-corrupted`: a byte of a stored manifest flips on disk; the sim has no storage-corruption fault.
* `coding-remote-moved-after-verify`, `browser-draft-changed-during-move`: an upstream commit to the git
  remote, a person editing the server-side draft; the git and web twins take no such outside change.
* `non-exportable-state-moved`, `attestation-required-moved`, `data-scope-required-moved`, `unsafe-state-moved`,
  `region-change-forbidden-moved`, `provider-change-forbidden-moved`, `behavioral-move-unapproved`,
  `ceiling-lowered-downgrade-allowed`, `schema-transform-moved`, `schema-transform-forbidden-moved`: owner
  constraints, handoff policies, an older exported checkpoint or a move to a named placement; the sim's
  world launches its runs under one fleet policy with no constraints, and a catalog change moves runs
  onto the changed placement only.

`ended-run-moved-to-unfit` has a plan (stop 32), outside `PLANS` (`APART`: adding one there would move every seed's
scenario draw): the deploy run's worker is held at its POSTCONDITION_VERIFIED seal (its end not yet recorded, lease
kept), the fleet moves the run onto the other placement, and once the move has committed the operator takes the
releases' verifier off it (`catalog_faults.AFTER_MOVE`), before its worker adopts the run. The swarm mix draws it on
its own stream (`baton.sim.scenarios.draw_apart`).

`approval-expired-in-hand` has one too (stop 32, in `APART`): the deploy run's worker is held at its COMMITTING seal
(the SDK has checked the run's approval, the authority has not yet been asked for the capability), its lease kept,
past the 15-minute approval the world's approver granted; then it asks and goes on. Until stop 32 the world's
in-process approver kept no record, so no oracle could say an approval had run out; it now writes the signing
approver's lines to its own record (`baton.sim.approver`), which `baton.sim.oracles_approval` reads against the
deploy service's own record.

`replanned-after-verify` too (stop 32, in `APART`): the deploy run's worker dies right after its VERIFIED seal, and a
second writer holding its epoch seals one more VERIFIED checkpoint over a re-planned spec nobody verified
(`faults.REPLAN`, the live case's writer, `baton.faults.replan_side`); the lease lapses and the run is moved. The
deploy verifier now keeps its own record of its verdicts in the world (`baton.sim.oracles_verdicts` reads it).

The two corpus cases (`corpus-changed`, `corpus-changed-while-paused`) strike at the research run's VERIFIED seal
(`faults.sealed_on`), not at a write count: the live matrix runs them against Baton and both transcript controls, and
a seal is the one point all three reach (stop 31; before, at write 13 they never fired for a control). The pause is
a `hold` (lease or job kept, as live), no longer a `stall`, which froze the heartbeat and moved the run.

`secret-in-tool-result` plants its credential later than the live case does: the sim's run reads its documents
before the fleet's operator can change one, so the credential is pasted once the report is verified and the worker is
then frozen past its observations' freshness; the run meets the credential when it reads the document again
(revalidation), still as a tool result.

`capability-expired-in-hand` holds the worker at its deployment's claim, capability in hand, for 8 s (`hold`: its
heartbeat keeps the 6 s lease, so only the capability, bounded by the lease it was issued against, runs out).

The two epoch cases hold the worker where the live case does, with the sim's faults: `stale-capability-after-move`
freezes the worker at its deployment's claim (its capability issued) for less than a lease while a planned move
commits; `stale-claim-after-move` freezes it at its first claim (the reservation read, not yet claimed) while the
run is moved to another placement whose worker claims it. The live matrix switches the other epoch layers off with
the named one (`FaultCase.companions`); so does the ablation sweep (`baton.sim.runner.ablation_sweep`).
"""

from __future__ import annotations

from dataclasses import dataclass

from baton.models import RunKind
from baton.sim.catalog_faults import AFTER_MOVE, CATALOG_CHANGE
from baton.sim.faults import DOC_SECRET, HOLD, REPLAN, Fault, FaultPlan, sealed_on

DEPLOY = (RunKind.DEPLOY,)
DEPLOY_VERIFIED = 11
"""The write that seals VERIFIED in seed 0's deploy world."""
DEPLOY_CLAIM = 15
DEPLOY_ANSWER = 16
DEPLOY_POST = 3
RESEARCH_VERIFIED = 13
RESEARCH_SEALED_VERIFIED = sealed_on(RunKind.RESEARCH.value, "VERIFIED")
"""The research run's VERIFIED seal, for every strategy (Baton's checkpoint, a control's transcript at that step):
where the two corpus cases strike, as the live matrix's `sealed:VERIFIED` fault point does. Write 13 (the seal in
Baton's world of one research run) is never reached by a control, whose research run makes about 7 writes."""
PAUSED_PAST_FRESHNESS = "400.0"
"""Past every research observation's freshness budget (Baton's 120 s, a control's 300 s). A `hold`: the worker waits
with its lease (or job) kept, as the live case pauses it; a `stall` would freeze its heartbeat too and move the run."""
CODING_ANSWER = 46
BROWSER_ANSWER = 19
LONG_STALL = "12.0"
"""Longer than the sim's lease: the run is moved while the worker is frozen."""
HELD_CAPABILITY = "5.0"
"""Shorter than the sim's lease (6 s), so the capability the worker holds at its claim stays valid, and longer than
the coordinator waits for a frozen source to quiesce: the move commits while the worker is frozen with the
capability in hand, and the worker wakes before the new owner runs (the live case's `capability_issued` hold)."""
EXPIRED_CAPABILITY_HOLD = "8.0"
"""Longer than the sim's 6 s lease a capability is bounded by; the heartbeat renews the lease meanwhile."""
CLAIM_OPERATION = "claim_operation"
"""The store call that claims a side effect: the first of the world is write 15 of seed 0's deploy world."""
DEPLOY_SEALED_ENDED = sealed_on(RunKind.DEPLOY.value, "POSTCONDITION_VERIFIED")
"""The deploy run's terminal seal: the run has ended, its worker has not yet recorded the end."""
ENDED_HOLD = "8.0"
"""Longer than the coordinator waits for the held source to quiesce (3 s) and the target's worker's poll (2 s): the
move commits and the target's worker adopts while the source still holds its end unrecorded (its heartbeat on)."""
DEPLOY_SEALED_COMMITTING = sealed_on(RunKind.DEPLOY.value, "COMMITTING")
"""The deploy run's COMMITTING seal: its approval checked by the SDK, its capability not yet asked for."""
APPROVAL_HOLD = "1000.0"
"""Past the world's approvals (the policy approver's 900 s), the worker's heartbeat keeping its lease."""
DEPLOY_SEALED_VERIFIED = sealed_on(RunKind.DEPLOY.value, "VERIFIED")
"""The deploy run's VERIFIED seal (whatever the count of writes before it)."""
FIRST_CLAIM = 1
"""A worker's first write is its claim of the run's reservation: frozen there, it has read the reservation and
not claimed it (the live case's `reservation_read` hold)."""


@dataclass(frozen=True)
class Sec27Plan:
    """One live case's fault, as a pinned schedule of the simulation."""

    case_id: str
    kinds: tuple[RunKind, ...]
    plan: FaultPlan
    ablation: str | None = None
    seed: int = 0


def _plans() -> tuple[Sec27Plan, ...]:
    verified_crash = Fault("crash", DEPLOY_VERIFIED, "after")
    catalog = {
        "placement-left-region": ("placement_left_region", "gate:region_not_allowed"),
        "placement-changed-provider": ("provider_changed", "gate:provider_not_allowed"),
        "release-withdrawn": ("release_withdrawn", "gate:release_incompatible"),
        "placement-lost-schema": ("schema_lost", "schema-gate"),
        "placement-lost-verifier": ("verifier_lost", "verifier-gate"),
        "placement-lost-tools": ("tools_lost", None),
        "placement-ceiling-lowered": ("ceiling_lowered", "authority-downgrade"),
    }
    return (
        Sec27Plan("killed-after-seal", DEPLOY, FaultPlan((verified_crash,)), "budget-carry-over"),
        Sec27Plan("killed-awaiting-reply", DEPLOY, FaultPlan((Fault("drop_response", DEPLOY_POST),
                                                              Fault("crash", DEPLOY_ANSWER, "before"))),
                  "reconcile-before-retry"),
        Sec27Plan("stale-worker-wakes", DEPLOY, FaultPlan((Fault("handoff", DEPLOY_CLAIM - 1, "better_model_released"),
                                                           Fault("stall", DEPLOY_CLAIM, LONG_STALL))), "target-fence"),
        Sec27Plan("stale-capability-after-move", DEPLOY,
                  FaultPlan((Fault("handoff", 1, "scheduler_rebalance", on=CLAIM_OPERATION),
                             Fault("stall", 1, HELD_CAPABILITY, on=CLAIM_OPERATION))), "gateway-epoch"),
        Sec27Plan("stale-claim-after-move", DEPLOY,
                  FaultPlan((Fault("handoff", FIRST_CLAIM, "better_model_released"),
                             Fault("stall", FIRST_CLAIM, LONG_STALL))), "lease-cas"),
        Sec27Plan("behavioral-move", DEPLOY, FaultPlan((Fault("handoff", DEPLOY_VERIFIED, "better_model_released"),
                                                        verified_crash)), "gate:behavioral_migration_approved"),
        *(Sec27Plan(case_id, DEPLOY, FaultPlan((Fault("catalog_change", DEPLOY_VERIFIED, change), verified_crash)),
                    ablation) for case_id, (change, ablation) in catalog.items()),
        Sec27Plan("corpus-changed", (RunKind.RESEARCH,),
                  FaultPlan((Fault("doc_change", 1, "idempotency", on=RESEARCH_SEALED_VERIFIED),
                             Fault("crash", 1, "after", on=RESEARCH_SEALED_VERIFIED))), "resume-environment-check"),
        Sec27Plan("corpus-changed-while-paused", (RunKind.RESEARCH,),
                  FaultPlan((Fault("doc_change", 1, "idempotency", on=RESEARCH_SEALED_VERIFIED),
                             Fault(HOLD, 1, PAUSED_PAST_FRESHNESS, on=RESEARCH_SEALED_VERIFIED))), "freshness"),
        Sec27Plan("capability-expired-in-hand", DEPLOY,
                  FaultPlan((Fault(HOLD, 1, EXPIRED_CAPABILITY_HOLD, on=CLAIM_OPERATION),)), "capability-check"),
        Sec27Plan("secret-in-tool-result", (RunKind.RESEARCH,),
                  FaultPlan((Fault(DOC_SECRET, RESEARCH_VERIFIED, "idempotency"),
                             Fault("stall", RESEARCH_VERIFIED + 1, "400.0"))), "secret-scan"),
        Sec27Plan("coding-killed-after-push", (RunKind.CODING,),
                  FaultPlan((Fault("crash", CODING_ANSWER, "before"),)), "reconcile-before-retry"),
        Sec27Plan("browser-killed-awaiting-reply", (RunKind.BROWSER,),
                  FaultPlan((Fault("crash", BROWSER_ANSWER, "before"),)), "reconcile-before-retry"),
    )


PLANS: dict[str, Sec27Plan] = {plan.case_id: plan for plan in _plans()}


APART: dict[str, Sec27Plan] = {plan.case_id: plan for plan in (
    Sec27Plan("ended-run-moved-to-unfit", DEPLOY,
              FaultPlan((Fault(CATALOG_CHANGE, 1, AFTER_MOVE, on=DEPLOY_SEALED_ENDED),
                         Fault(HOLD, 1, ENDED_HOLD, on=DEPLOY_SEALED_ENDED))), "gate:checkpoint_not_resumable"),
    Sec27Plan("approval-expired-in-hand", DEPLOY,
              FaultPlan((Fault(HOLD, 1, APPROVAL_HOLD, on=DEPLOY_SEALED_COMMITTING),)), "approval-check"),
    Sec27Plan("replanned-after-verify", DEPLOY,
              FaultPlan((Fault("crash", 1, "after", on=DEPLOY_SEALED_VERIFIED),
                         Fault(REPLAN, 1, on=DEPLOY_SEALED_VERIFIED))), "evidence-binding"),
)}
"""Live cases with a plan that the swarm mix draws on its own stream, not among `PLANS` (`baton.sim.scenarios`)."""
