"""The fault cases: each one script, written once against the verbs every strategy offers.

A script starts a worker for the run on the source placement (naming the
fault point where it will hold), launches the run, injects the fault from
outside (SIGKILL or SIGSTOP at the point, a target that commits and answers
too late or dies, a byte flipped in the checkpoint manifest on disk, a
corpus document rewritten), moves the run, and waits for it to end. Baton
and both transcript controls meet the same fault at the same point in the
same kind of state.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from baton.catalog.releases import RELEASES
from baton.faults import (
    cases_authority, cases_binding, cases_epochs, cases_gates, cases_gates2, cases_leases, cases_policy,
    cases_resume, cases_schema,
)
from baton.faults.cases_agents import agent_cases
from baton.faults.case_steps import kill_at, move_or_stay, stall_before_send, wake_stalled
from baton.faults.rig import Rig, TargetOptions, sigkill, wait_until
from baton.models import BehavioralRelease
from baton.targets.corpus_service import CorpusClient

SOURCE = "local-gpu-eu"
SAME_RELEASE = "cloud-eu"  # runs model-v7 and model-v8, like the source
V8_ONLY = "cloud-us"  # runs only model-v8: moving there changes the release


class CaseRun(Protocol):
    """What a case script may do to a run, whichever strategy runs it."""

    strategy: str
    run_id: str

    def start(self, options: TargetOptions) -> None: ...
    def worker(self, placement: str, *, point: str | None = None) -> object: ...
    def launch(self) -> None: ...
    def pid(self, placement: str) -> int: ...
    def freeze(self, placement: str) -> int: ...
    def thaw(self, pid: int) -> None: ...
    def wait_lease_lapsed(self) -> None: ...
    def hand_off(self, to: str, reason: str = "lease_expired", *, start_worker: bool = True,
                 source_alive: bool = False) -> str: ...
    def change_releases(self, withdraw: list[str], publish: dict[str, tuple[BehavioralRelease, list[str]]]) -> str: ...
    def change_placement(self, placement: str, **facts: str) -> str: ...
    def tamper_manifest(self) -> str: ...
    def replan_unverified(self, content: bytes, summary: str) -> str: ...
    def wait_end(self, timeout_s: float = 240.0) -> str: ...
    def refused_at_adoption(self) -> str | None: ...


Script = Callable[[CaseRun, Rig, list[str]], None]


@dataclass(frozen=True)
class FaultCase:
    """One injected fault and the run around it."""

    case_id: str
    title: str
    kind: str  # deploy, research, coding or browser
    script: Script
    targets: TargetOptions = field(default_factory=TargetOptions)
    limits: dict[str, Any] = field(default_factory=dict)
    task: dict[str, Any] = field(default_factory=dict)
    """Extra task input for the run (e.g. a short `freshness_s` for the research agent's observations)."""
    constraints: dict[str, Any] = field(default_factory=dict)
    """The run's portability constraints (Baton carries them; a transcript has nowhere to)."""
    exercises: tuple[str, ...] = ()
    """Gate reasons the case's fault makes the gate weigh on a placement the coordinator then passes over
    (no committed decision records them, so an unablated baseline run cannot show them)."""
    lease_ttl_s: float | None = None
    """Baton's lease (and so capability) lifetime for this case; None: the matrix's short default."""
    companions: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Ablation -> the other protections stacked against this case's fault, switched off with it when it alone is
    ablated, so that it is all that stands between the fault and the oracles (each one alone holds: run the
    case with only its companions off to see it clean)."""
    handoff_policy: dict[str, Any] = field(default_factory=dict)
    """Changes to the fleet's handoff policy for Baton's moves in this case (HandoffPolicy fields, e.g.
    `allow_authority_downgrade`); empty: the fleet policy as it is."""
    approval_ttl_s: float | None = None
    """How long the approvals Baton's authority service signs last in this case (None: its default)."""


def killed_after_seal(run: CaseRun, rig: Rig, notes: list[str]) -> None:
    """Verified and checkpointed, then the worker dies holding its lease; the run moves."""
    run.worker(SOURCE, point="sealed:VERIFIED")
    run.launch()
    kill_at(run, rig, notes, "sealed:VERIFIED")
    run.wait_lease_lapsed()
    notes.append(run.hand_off(SAME_RELEASE))
    notes.append(f"ended {run.wait_end()}")


def killed_awaiting_reply(run: CaseRun, rig: Rig, notes: list[str]) -> None:
    """The deploy service commits, then holds its answer; the worker dies waiting for it; the run moves."""
    run.worker(SOURCE)
    run.launch()
    wait_until(lambda: rig.effects_of(run.run_id), what="the deploy service to commit")
    sigkill(run.pid(SOURCE))
    notes.append(f"{run.strategy}: worker SIGKILLed while the committed deployment's answer was held")
    run.wait_lease_lapsed()
    notes.append(run.hand_off(SAME_RELEASE))
    notes.append(f"ended {run.wait_end()}")


def target_dies_after_commit(run: CaseRun, rig: Rig, notes: list[str]) -> None:
    """The deploy service commits, then dies before it answers, and stays down: the outcome is UNKNOWN."""
    run.worker(SOURCE)
    run.launch()
    wait_until(lambda: rig.effects_of(run.run_id), what="the deploy service to commit")
    rig.kill_deploy_service()
    notes.append("deploy service SIGKILLed after committing, before answering")
    notes.append(f"ended {run.wait_end()}")


def stale_worker_wakes(run: CaseRun, rig: Rig, notes: list[str]) -> None:
    """SIGSTOP with a checked request in hand, past the lease; the run moves to another release; SIGCONT."""
    pid = stall_before_send(run, rig, notes, SOURCE)
    run.wait_lease_lapsed()
    notes.append(run.hand_off(V8_ONLY))
    notes.append(f"moved run ended {run.wait_end()}")
    wake_stalled(run, rig, notes, pid)
    notes.append(f"ended {run.wait_end()}")


def manifest_corrupted(run: CaseRun, rig: Rig, notes: list[str]) -> None:
    """The worker dies after VERIFIED is checkpointed; the move is decided; then, before the new owner
    restores, one byte of that checkpoint's candidate manifest flips on disk."""
    run.worker(SOURCE, point="sealed:VERIFIED")
    run.launch()
    kill_at(run, rig, notes, "sealed:VERIFIED")
    run.wait_lease_lapsed()
    notes.append(run.hand_off(SAME_RELEASE, start_worker=False))
    notes.append(run.tamper_manifest())
    run.worker(SAME_RELEASE)
    notes.append(f"ended {run.wait_end()}")


CHANGED_DOC = "fencing"
CHANGED_TEXT = ("A fencing token is compared with the newest one the target has recorded for the run. "
                "Requests carrying an older token are refused.")


def corpus_changed(run: CaseRun, rig: Rig, notes: list[str]) -> None:
    """The report is verified; the worker dies; a cited document is rewritten; the run moves."""
    run.worker(SOURCE, point="sealed:VERIFIED")
    run.launch()
    kill_at(run, rig, notes, "sealed:VERIFIED")
    assert rig.corpus_service is not None
    with CorpusClient(rig.corpus_service.url) as corpus:
        changed = corpus.change_document(CHANGED_DOC, CHANGED_TEXT)
    notes.append(f"corpus document {CHANGED_DOC} rewritten (v{changed.get('version')})")
    run.wait_lease_lapsed()
    notes.append(run.hand_off(SAME_RELEASE))
    notes.append(f"ended {run.wait_end()}")


SHORT_FRESHNESS_S = 3.0


def corpus_changed_while_paused(run: CaseRun, rig: Rig, notes: list[str]) -> None:
    """The report is verified; the worker pauses (lease kept) past its observations' freshness budget while a
    cited document is rewritten; it goes on without moving."""
    run.worker(SOURCE, point="sealed:VERIFIED")
    run.launch()
    rig.wait_reached("sealed:VERIFIED")
    assert rig.corpus_service is not None
    with CorpusClient(rig.corpus_service.url) as corpus:
        changed = corpus.change_document(CHANGED_DOC, CHANGED_TEXT)
    notes.append(f"{run.strategy}: paused at sealed:VERIFIED; corpus document {CHANGED_DOC} rewritten "
                 f"(v{changed.get('version')})")
    paused = time.monotonic()
    wait_until(lambda: time.monotonic() - paused > 2 * SHORT_FRESHNESS_S, what="the freshness budget to run out")
    rig.release("sealed:VERIFIED")
    notes.append(f"ended {run.wait_end()}")


PLANTED_KEY = "AKIAZ7BATONFAULTS123"  # AWS access-key format: 'AKIA' and 16 of [0-9A-Z]
SECRET_TEXT = CHANGED_TEXT + " Operators reach the fencing service with access key " + PLANTED_KEY + "."


def secret_in_tool_result(run: CaseRun, rig: Rig, notes: list[str]) -> None:
    """A cited document carries a credential (pasted by an operator); the run reads it as a tool result."""
    assert rig.corpus_service is not None
    rig.plant_secret(PLANTED_KEY)
    with CorpusClient(rig.corpus_service.url) as corpus:
        changed = corpus.change_document(CHANGED_DOC, SECRET_TEXT)
    notes.append(f"corpus document {CHANGED_DOC} v{changed.get('version')} carries an access key")
    run.worker(SOURCE)
    run.launch()
    notes.append(f"ended {run.wait_end()}")


ALIAS_NAME = "model-v7b"
ALIAS = RELEASES["model-v7"].model_copy(update={"model": "scripted-model-v7-2026-12"})
"""What the provider now serves under its model alias: a new manifest no run is pinned to or may migrate to."""


def release_withdrawn(run: CaseRun, rig: Rig, notes: list[str]) -> None:
    """A candidate is planned; the worker dies; the provider withdraws the run's release (and v8) and repoints
    its alias to a new release on the target; the run is moved there."""
    run.worker(SOURCE, point="sealed:CANDIDATE_READY")
    run.launch()
    kill_at(run, rig, notes, "sealed:CANDIDATE_READY")
    notes.append(run.change_releases(["model-v7", "model-v8"], {ALIAS_NAME: (ALIAS, [SAME_RELEASE])}))
    run.wait_lease_lapsed()
    move_or_stay(run, notes, SAME_RELEASE, "no placement offers its release any more")


RESIDENCY = ["eu-central", "eu-west"]


def placement_left_region(run: CaseRun, rig: Rig, notes: list[str]) -> None:
    """The run may only run in the EU; after VERIFIED its worker dies; the operator re-homes the target
    placement to us-east; the run is moved there."""
    rig.record_residency(RESIDENCY)
    run.worker(SOURCE, point="sealed:VERIFIED")
    run.launch()
    kill_at(run, rig, notes, "sealed:VERIFIED")
    notes.append(run.change_placement(SAME_RELEASE, region="us-east"))
    run.wait_lease_lapsed()
    move_or_stay(run, notes, SAME_RELEASE, "the target placement is outside its allowed regions")


PROVIDERS = ["cloudco", "local"]


def placement_changed_provider(run: CaseRun, rig: Rig, notes: list[str]) -> None:
    """The run may only run on its owner's two providers; after VERIFIED its worker dies; the operator moves
    the target placement to another provider; the run is moved there."""
    rig.record_residency(providers=PROVIDERS)
    run.worker(SOURCE, point="sealed:VERIFIED")
    run.launch()
    kill_at(run, rig, notes, "sealed:VERIFIED")
    notes.append(run.change_placement(SAME_RELEASE, provider="othercloud"))
    run.wait_lease_lapsed()
    move_or_stay(run, notes, SAME_RELEASE, "the target placement is on a provider it may not use")


_STALL = TargetOptions(ambiguous_rate=1.0, ambiguous_delay_s=4.0)

CASE_LIST: tuple[FaultCase, ...] = (
    FaultCase("killed-after-seal", "worker SIGKILLed after sealing VERIFIED, lease held", "deploy", killed_after_seal),
    FaultCase("killed-awaiting-reply", "worker SIGKILLed while a committed deployment's answer is held", "deploy",
              killed_awaiting_reply, _STALL, companions={"idempotency": ("reconcile-before-retry",),
                                                         **cases_resume.OPEN_OPERATION_COMPANIONS}),
    FaultCase("target-dies-after-commit", "deploy service dies after committing, before answering", "deploy",
              target_dies_after_commit, TargetOptions(ambiguous_rate=1.0, ambiguous_delay_s=30.0)),
    FaultCase("stale-worker-wakes", "worker SIGSTOPped with a checked request, woken after the run moved", "deploy",
              stale_worker_wakes, companions={"capability-check": ("target-fence",)}),
    FaultCase("manifest-corrupted", "checkpoint manifest corrupted on disk before the move", "deploy",
              manifest_corrupted),
    FaultCase("corpus-changed", "a cited document changes while the run is moved", "research", corpus_changed,
              companions=cases_resume.ENVIRONMENT_COMPANIONS),
    FaultCase("corpus-changed-while-paused", "a cited document changes while the worker pauses past its "
              "freshness budget", "research", corpus_changed_while_paused, task={"freshness_s": SHORT_FRESHNESS_S}),
    FaultCase("secret-in-tool-result", "a document the run reads carries a credential", "research",
              secret_in_tool_result),
    FaultCase("placement-left-region", "the target placement is re-homed outside the run's allowed regions",
              "deploy", placement_left_region, constraints={"portable_to_regions": RESIDENCY},
              exercises=("region_not_allowed",)),
    FaultCase("placement-changed-provider", "the target placement moves to a provider the run may not use",
              "deploy", placement_changed_provider, constraints={"portable_to_providers": PROVIDERS},
              exercises=("provider_not_allowed",)),
    FaultCase("release-withdrawn", "the run's release is withdrawn and the alias repointed before the move", "deploy",
              release_withdrawn),
    FaultCase("placement-lost-schema", "the target placement's workers can no longer read the run's state schema",
              "deploy", cases_gates.placement_lost_schema, exercises=("state_schema_incompatible",)),
    FaultCase("placement-lost-verifier", "the target placement no longer hosts the release's verifier bundle",
              "deploy", cases_gates.placement_lost_verifier, exercises=("verifier_unavailable",)),
    FaultCase("placement-lost-tools", "the target placement no longer hosts the release's tool contract",
              "deploy", cases_gates.placement_lost_tools, exercises=("tool_contract_unavailable",)),
    FaultCase("stale-capability-after-move", "worker stalled holding a valid capability, woken after the run moved",
              "deploy", cases_epochs.stale_capability_after_move, lease_ttl_s=cases_epochs.LEASE_TTL_S,
              companions=cases_epochs.EPOCH_COMPANIONS),
    FaultCase("ended-run-moved-to-unfit", "an ended run, its worker held before recording the end, is moved to a "
              "placement that loses the release's verifier before it adopts the run", "deploy",
              cases_resume.ended_run_moved_to_unfit, exercises=("checkpoint_not_resumable",),
              companions=cases_resume.TERMINAL_COMPANIONS),
    FaultCase("placement-ceiling-lowered", "the target placement's ceiling is lowered below deploying, its worker "
              "already up", "deploy", cases_gates.placement_ceiling_lowered, exercises=("authority_downgrade_forbidden",),
              companions=cases_authority.FORBIDDEN_DOWNGRADE_COMPANIONS),
    *agent_cases(),  # coding and browser cases (baton/faults/cases_agents.py)
    FaultCase("non-exportable-state-moved", "a run whose state is non-exportable is moved out of its region and "
              "provider", "deploy", cases_gates2.non_exportable_state_moved, constraints=cases_gates2.NON_EXPORTABLE,
              exercises=("non_exportable_state",)),
    FaultCase("attestation-required-moved", "a run that needs attested hardware is moved to an unattested "
              "placement", "deploy", cases_gates2.attestation_required_moved, constraints=cases_gates2.ATTESTED,
              exercises=("hardware_attestation_missing",)),
    FaultCase("data-scope-required-moved", "a run that needs a data scope is moved to a placement without it",
              "deploy", cases_gates2.data_scope_required_moved, constraints=cases_gates2.SCOPED,
              exercises=("data_scope_unavailable",)),
    FaultCase("unsafe-state-moved", "a run whose non-exportable state needs attested hardware nowhere in its trust "
              "domain is moved", "deploy", cases_gates2.unsafe_state_moved, constraints=cases_gates2.UNSAFE,
              exercises=("migration_unsafe",), companions=cases_gates2.UNSAFE_COMPANIONS),
    FaultCase("behavioral-move", "a model-v7 run is moved to a placement that serves only model-v8 (approved)",
              "deploy", cases_gates2.behavioral_move, companions=cases_gates2.BEHAVIORAL_COMPANIONS),
    FaultCase("ceiling-lowered-downgrade-allowed", "the target placement's ceiling is lowered below deploying, its "
              "worker already up; the policy allows the downgrade", "deploy",
              cases_gates.placement_ceiling_lowered, exercises=("authority_downgraded",),
              handoff_policy={"allow_authority_downgrade": True}, companions=cases_authority.DOWNGRADE_COMPANIONS),
    FaultCase("approval-expired-in-hand", "worker holds an approved deployment past the approval's expiry (lease "
              "kept), then asks for its capability", "deploy", cases_authority.approval_expired_in_hand,
              approval_ttl_s=cases_authority.APPROVAL_TTL_S),
    FaultCase("capability-expired-in-hand", "worker holds a capability past its expiry (lease kept), then presents it",
              "deploy", cases_authority.capability_expired_in_hand, companions=cases_authority.EXPIRY_COMPANIONS),
    FaultCase("region-change-forbidden-moved", "a run its owner keeps in its region is moved to another region",
              "deploy", cases_policy.region_change_forbidden_moved, exercises=("region_change_forbidden",),
              handoff_policy=cases_policy.SAME_REGION),
    FaultCase("provider-change-forbidden-moved", "a run its owner keeps with its provider is moved to another "
              "provider", "deploy", cases_policy.provider_change_forbidden_moved,
              exercises=("provider_change_forbidden",), handoff_policy=cases_policy.SAME_PROVIDER),
    FaultCase("behavioral-move-unapproved", "a model-v7 run is moved to a placement that serves only model-v8; the "
              "policy allows the migration, its approval has expired", "deploy",
              cases_policy.behavioral_move_unapproved, exercises=("behavioral_migration_unapproved",),
              handoff_policy=cases_policy.UNAPPROVED),
    FaultCase("stale-claim-after-move", "worker stalled between reading the run's reservation and claiming it, "
              "claims after the run moved and its new owner claimed", "deploy", cases_leases.stale_claim_after_move,
              companions=cases_leases.LEASE_CAS_COMPANIONS),
    FaultCase("replanned-after-verify", "a second writer seals VERIFIED over a re-planned spec nothing verified before "
              "the move", "deploy", cases_binding.replanned_after_verify,
              companions=cases_binding.BINDING_COMPANIONS),
    FaultCase("schema-transform-forbidden-moved", "a run an older Baton sealed at schema 2 is imported and moved to a "
              "placement that reads only schema 3; the policy forbids transforms", "deploy",
              cases_schema.imported_legacy_moved, exercises=("schema_transform_forbidden",),
              handoff_policy=cases_schema.NO_TRANSFORM),
    FaultCase("schema-transform-moved", "a run an older Baton sealed at schema 2 is imported and moved to a placement "
              "that reads only schema 3; the policy allows the transform", "deploy",
              cases_schema.imported_legacy_transformed),
)

CASES: dict[str, FaultCase] = {case.case_id: case for case in CASE_LIST}
