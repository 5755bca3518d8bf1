"""A worker that follows Baton's protocol: leases, sealed checkpoints, the gateway, reconciliation, resume rules.

It is the reference worker of the fault scenarios. Everything consequential
goes through Baton's real pieces: the lease comes from `Coordinator.grant`,
state is sealed with `build_checkpoint` into the SQL store, side effects go
through `MutationGateway` with a capability from `AuthorityService` and one
idempotency key per logical operation, open outcomes are settled by
`Reconciler`, and a new owner starts from `prepare_resume` (which applies the
reverification rules) and has its first transition checked by `confirm_resume`.
Observations past their freshness budget, or marked for revalidation by a
move, are fetched again before any use; a changed answer withdraws the
candidate built on it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from decimal import Decimal

from baton.authority import may_perform
from baton.authority_http import CapabilityRequest
from baton.checkpoints import RunParts, build_checkpoint, put_record, restore
from baton.errors import (
    AuthorityDeniedError,
    BatonError,
    OperationNotCommittedError,
    OperationUnknownError,
    OutcomeUnknownError,
    StaleEpochError,
)
from baton.faults.external import utcnow
from baton.faults.facts import CredentialIssued, MutationAttempted, Outcome, Status, ObservationUsed, Reconciled, Resumed, RunEnded, RunStarted
from baton.faults.tasks import Inputs, Task
from baton.faults.workers import ScenarioWorker
from baton.faults.world import LEASE_TTL_S, World
from baton.gateway import MutationGateway, MutationRequest
from baton.handoff import HandoffOutcome, ResumePlan, confirm_resume, prepare_resume
from baton.identity import sha256_ref
from baton.models import (
    Approval,
    AuthorityContext,
    Boundary,
    BudgetLedger,
    BudgetUsage,
    Candidate,
    Event,
    EventType,
    ExecutionCheckpoint,
    Observation,
    OperationLedger,
    OperationState,
    PortableRunState,
    VerifierEvidence,
    WorkspaceIdentity,
)
from baton.rebase import rebase_transition
from baton.reconcile import Decision
from baton.resumability import classify_resumability

CANDIDATE_INPUTS = "baton.candidate_inputs"
_VERIFY_COST = BudgetUsage(verification_spend_usd=Decimal("0.01"))


class BatonWorker(ScenarioWorker):
    """One owner of one run at one epoch."""

    strategy = "baton"

    def __init__(self, world: World, task: Task, *, name: str, epoch: int, parts: RunParts,
                 parent: ExecutionCheckpoint | None, boundary: Boundary, observations: list[Observation],
                 plan: ResumePlan | None = None) -> None:
        super().__init__()
        self.world, self.task, self.name, self.epoch = world, task, name, epoch
        self.run_id = world.run_id
        self.parts, self.parent, self.boundary = parts, parent, boundary
        self.observations = observations
        self.pending: list[Observation] = []
        self.revalidate: set[str] = set()
        self.plan = plan
        self.ended = False
        self.fenced = False
        self.artifact: bytes | None = None
        self.session = world.external.webapp.login() if task.browser is not None else None
        self._gateway: MutationGateway | None = None
        self._held: tuple[MutationRequest, Approval, str] | None = None

    @property
    def gateway(self) -> MutationGateway:
        if self._gateway is None:
            self._gateway = self.world.gateway(self.session)
        return self._gateway

    # -- starting and adopting ------------------------------------------------------------------

    @classmethod
    def start(cls, world: World, task: Task, placement_name: str) -> BatonWorker:
        """Create the run, take its first lease, observe, and seal GENERATING."""
        placement = world.placement(placement_name)
        store, now = world.store, world.now()
        store.create_run(world.run_id, task.run_kind, world.release.release_id, placement.name, {"task": task.name})
        store.append_event(Event(event_type=EventType.RUN_CREATED, run_id=world.run_id, at=now,
                                 target_placement=placement.name, release_id=world.release.release_id))
        name = world.worker_name(placement.name, 1)
        lease = world.ownership().grant(world.run_id, name, ttl_s=LEASE_TTL_S, reason="run started")
        assert lease is not None
        workspace = None
        if task.name == "patch":
            repo = world.external.repo
            workspace = WorkspaceIdentity(repository_url="file:///faults/demo", base_commit=repo.head,
                                          worktree_ref=world.blobs.put(repo.content()), test_commands=("repo-tests",))
        parts = RunParts(
            run_kind=task.run_kind, release=world.release, placement=placement,
            state=PortableRunState(task=f"{task.name} run", memory={"task": dict(task.spec)}),
            operations=OperationLedger(),
            authority=AuthorityContext(level=world.config.authority, policy_id="faults-policy"),
            budget=BudgetLedger(limits=world.limits(now)), constraints=world.config.constraints, workspace=workspace,
        )
        world.facts.add(RunStarted(run_id=world.run_id, at=now, strategy=cls.strategy,
                                   authority_level=parts.authority.level.value, limits=parts.budget.limits))
        worker = cls(world, task, name=name, epoch=lease.epoch, parts=parts, parent=None,
                     boundary=Boundary.GENERATING, observations=[])
        for uri, query in task.questions:
            worker._observe(uri, query)
        worker._seal(Boundary.GENERATING)
        return worker

    @classmethod
    def adopt(cls, world: World, task: Task, outcome: HandoffOutcome, *, arm: tuple[str, ...] = ()) -> BatonWorker:
        """Take over a run the coordinator moved here: restore, reconcile, revalidate, then resume."""
        assert outcome.target_placement is not None and outcome.target_epoch is not None and outcome.new_owner
        placement = world.placement(outcome.target_placement)
        plan = prepare_resume(world.store, world.blobs, world.run_id, placement=placement, epoch=outcome.target_epoch)
        assert plan.budget is not None
        restored = plan.restored.parts
        parts = dataclasses.replace(restored, placement=placement, authority=plan.authority, budget=plan.budget)
        world.facts.add(Resumed(
            run_id=world.run_id, at=world.now(), worker=outcome.new_owner, placement=placement.name,
            budget_used=plan.budget.used, limits=plan.budget.limits, authority_level=plan.authority.level.value,
            checkpoint_level=restored.authority.level.value, ceiling=placement.authority_ceiling.value,
        ))
        worker = cls(world, task, name=outcome.new_owner, epoch=outcome.target_epoch, parts=parts,
                     parent=plan.checkpoint, boundary=plan.boundary, observations=list(plan.restored.observations),
                     plan=plan)
        worker.revalidate = {use.observation.record_ref() for use in plan.observations_to_revalidate}
        for point in arm:
            worker.arm(point)
        worker._die("after_adopt")
        worker._guarded(worker._resume, plan)
        return worker

    def _resume(self, plan: ResumePlan) -> None:
        if plan.unresolved_operations:
            self._settle_open_operations()
            if self.ended or self.boundary is Boundary.COMMITTED:
                return
        if plan.budget_exhausted:
            self._end(Boundary.FAILED, f"budget exhausted across the handoff: {', '.join(plan.budget_exhausted)}")
            return
        if self.boundary in (Boundary.COMMITTED, Boundary.POSTCONDITION_VERIFIED):
            return
        inputs = self._inputs("resume")
        if inputs is None:
            return
        if self.pending:
            self._seal(self.boundary)

    # -- stepping -------------------------------------------------------------------------------

    def step(self) -> None:
        if self.ended or self.paused:
            return
        actions = {
            Boundary.GENERATING: self._generate,
            Boundary.CANDIDATE_READY: self._verify,
            Boundary.VERIFIED: self._approve,
            Boundary.AWAITING_AUTHORITY: self._approve,
            Boundary.AUTHORIZED: self._commit,
            Boundary.COMMITTING: self._settle_open_operations,
            Boundary.COMMITTED: self._postcondition,
        }
        action = self._send if self._held is not None else actions.get(self.boundary)
        if action is None:
            self.ended = True
            return
        self._guarded(action)

    def _guarded(self, action: Callable[..., None], *args: object) -> None:
        """Run one action; a StaleEpochError anywhere in it means this worker was fenced."""
        try:
            action(*args)
        except StaleEpochError as exc:
            self._fenced(str(exc))

    def _fenced(self, why: str) -> None:
        """This worker lost the run to a newer epoch: it stops, and touches nothing any more."""
        self.fenced = True
        self.ended = True
        self.world.store.append_event(Event(event_type=EventType.STALE_WORKER_REJECTED, run_id=self.run_id,
                                            at=self.world.now(), source_epoch=self.epoch, reason=why[:300],
                                            detail={"worker": self.name}))

    # -- budget and observations ------------------------------------------------------------

    def _charge(self, usage: BudgetUsage, what: str) -> None:
        self.parts = dataclasses.replace(self.parts, budget=self.parts.budget.charge(usage))
        self.world.store.append_budget_charge(self.run_id, self.epoch, usage, what)
        self.world.meter.bill(self.run_id, self.name, usage, what)

    def _budget_left(self) -> bool:
        exhausted = self.parts.budget.exhausted(self.world.now())
        if exhausted:
            self._end(Boundary.FAILED, f"budget exhausted: {', '.join(exhausted)}")
        return not exhausted

    def _observe(self, uri: str, query: dict) -> Observation:
        world = self.world
        content = world.external.read(uri)
        observation = Observation(source=uri, query=query, observed_at=world.now(), content_ref=world.blobs.put(content),
                                  freshness_budget_s=world.external.freshness(uri))
        self.observations.append(observation)
        self.pending.append(observation)
        self._charge(BudgetUsage(tool_calls=1), f"observe {uri}")
        return observation

    def _current(self) -> list[Observation]:
        newest: dict[str, Observation] = {}
        for observation in self.observations:
            newest[observation.source] = observation
        return list(newest.values())

    def _inputs(self, step: str) -> Inputs | None:
        """Current observations, each usable as recorded; stale or moved ones are fetched again first.

        Returns None (and withdraws the candidate) when a fetched answer differs from the recorded one.
        """
        world, now = self.world, self.world.now()
        changed: list[str] = []
        inputs = []
        for observation in self._current():
            if not observation.is_fresh(now) or observation.record_ref() in self.revalidate:
                self.revalidate.discard(observation.record_ref())
                fresh = self._observe(observation.source, dict(observation.query))
                if fresh.content_ref != observation.content_ref:
                    changed.append(observation.source)
                observation = fresh
            world.facts.add(ObservationUsed(
                run_id=self.run_id, at=now, worker=self.name, step=step, source=observation.source,
                recorded_content=observation.content_ref, live_content=world.external.live_ref(observation.source),
                observed_at=observation.observed_at, freshness_s=observation.freshness_budget_s,
                mode="USE_RECORDED_OBSERVATION",
            ))
            inputs.append((observation, world.blobs.get(observation.content_ref)))
        if changed and self.parts.current_candidate is not None and self.boundary not in (
                Boundary.GENERATING, Boundary.COMMITTED, Boundary.POSTCONDITION_VERIFIED):
            self._withdraw(f"{', '.join(changed)} changed since the candidate was built")
            return None
        return inputs

    def _withdraw(self, why: str) -> None:
        """The candidate no longer matches the world: back to GENERATING (a rebase for a coding run)."""
        world = self.world
        parts = self.parts
        if parts.workspace is not None and self.task.name == "patch":
            repo = world.external.repo
            if repo.head != parts.workspace.base_commit:
                transition = rebase_transition(parts.workspace, repo.head, boundary=self.boundary,
                                               new_worktree_ref=world.blobs.put(repo.content()), new_patch_ref=None,
                                               at=world.now())
                ref = put_record(world.blobs, transition)
                parts = dataclasses.replace(parts, workspace=transition.after)
                why = f"{why}; rebase recorded as {ref[:19]}"
        authority = parts.authority.model_copy(update={"approvals": ()})
        self.parts = dataclasses.replace(parts, authority=authority)
        world.store.append_event(Event(event_type=EventType.REVERIFICATION_REQUIRED, run_id=self.run_id,
                                       at=world.now(), target_epoch=self.epoch, reason=why))
        self._seal(Boundary.GENERATING)

    # -- the steps ------------------------------------------------------------------------------

    def _generate(self) -> None:
        if not self._budget_left():
            return
        world, release = self.world, self.parts.release
        model = world.provider.serve(self.parts.placement.provider, release)
        if model.release.release_id != release.release_id:
            world.store.append_event(Event(
                event_type=EventType.REVALIDATION_FAILED, run_id=self.run_id, at=world.now(), release_id=release.release_id,
                reason=f"{self.parts.placement.provider} serves {model.release.model} under {release.model}"))
            self._end(Boundary.ESCALATED, "the provider's model alias no longer serves the pinned release; "
                                          "a behavioral migration needs policy and approval")
            return
        inputs = self._inputs("generate")
        if inputs is None:
            return
        reply = self.task.generate(model, inputs)
        self._charge(reply.charge, f"{model.name} generated a {self.task.candidate_kind}")
        self._die("before_seal")
        previous = self.parts.current_candidate
        candidate = Candidate(
            candidate_id=f"{self.task.candidate_kind}-{len(self.parts.candidates) + 1}", kind=self.task.candidate_kind,
            artifact_hash=world.blobs.put(reply.output), produced_by_release=release.release_id,
            parent_candidate=None if previous is None else previous.artifact_hash, created_at=world.now(),
        )
        memory = dict(self.parts.state.memory)
        previous_inputs = memory.get(CANDIDATE_INPUTS)
        recorded = dict(previous_inputs) if isinstance(previous_inputs, dict) else {}
        recorded[candidate.candidate_id] = [o.record_ref() for o, _ in inputs]
        memory[CANDIDATE_INPUTS] = recorded
        workspace = self.parts.workspace
        if workspace is not None:
            workspace = workspace.model_copy(update={"patch_ref": candidate.artifact_hash})
        self.artifact = reply.output
        self.parts = dataclasses.replace(
            self.parts, candidates=self.parts.candidates + (candidate,), workspace=workspace,
            state=self.parts.state.model_copy(update={"memory": memory,
                                                      "candidate_refs": self.parts.state.candidate_refs
                                                      + (put_record(world.blobs, candidate),)}),
        )
        self._seal(Boundary.CANDIDATE_READY)

    def _artifact_bytes(self) -> bytes | None:
        candidate = self.parts.current_candidate
        if candidate is None:
            return None
        if self.artifact is not None and sha256_ref(self.artifact) == candidate.artifact_hash:
            return self.artifact
        try:
            self.artifact = self.world.blobs.get(candidate.artifact_hash)
        except BatonError as exc:
            self._end(Boundary.ESCALATED, f"the candidate's bytes do not verify: {exc}")
            return None
        return self.artifact

    def _verify(self) -> None:
        if not self._budget_left():
            return
        inputs = self._inputs("verify")
        artifact = self._artifact_bytes() if inputs is not None else None
        candidate = self.parts.current_candidate
        if inputs is None or artifact is None or candidate is None:
            return
        verdict = self.world.verifier.run(self.run_id, self.name, artifact, lambda: self.task.verify(artifact, inputs))
        evidence = VerifierEvidence(
            candidate_hash=candidate.artifact_hash, verifier_version=verdict.verifier_version,
            inputs={"observations": [o.record_ref() for o, _ in inputs]}, result=verdict.result,
            detail=verdict.detail, verified_at=self.world.now(),
        )
        self._charge(_VERIFY_COST, f"verify with {verdict.verifier_version}")
        self.parts = dataclasses.replace(self.parts, evidence=self.parts.evidence + (evidence,))
        if verdict.passed:
            self._seal(Boundary.VERIFIED)
        else:
            self._end(Boundary.FAILED, f"verification failed: {verdict.detail}")

    def _passing(self, artifact_hash: str) -> bool:
        return any(e.passed and e.applies_to(artifact_hash) for e in self.parts.evidence)

    def _approval(self, artifact_hash: str) -> Approval | None:
        now = self.world.now()
        return next((a for a in self.parts.authority.approvals
                     if a.valid_for(self.task.operation, artifact_hash, now)), None)

    def _approve(self) -> None:
        candidate = self.parts.current_candidate
        if candidate is None or not self._passing(candidate.artifact_hash):
            self._seal(Boundary.CANDIDATE_READY)
            return
        if not may_perform(self.parts.authority, self.task.level):
            self._end(Boundary.ESCALATED, f"authority here is {self.parts.authority.level.value}; "
                                          f"{self.task.operation} needs {self.task.level.value}: waiting for a "
                                          "placement that may mutate")
            return
        if self._approval(candidate.artifact_hash) is None:
            approval = self.world.approver.approve(self.task.operation, candidate.artifact_hash, self.task.level,
                                                   self.parts.evidence, self.world.now())
            if approval is None:
                self._end(Boundary.ESCALATED, "no approval for the verified candidate")
                return
            authority = self.parts.authority.model_copy(update={"approvals": (approval,)})
            self.parts = dataclasses.replace(self.parts, authority=authority)
        self._seal(Boundary.AUTHORIZED)

    def _ask(self, placement: str, artifact_hash: str, key: str) -> CapabilityRequest:
        """What this worker asks the authority for: the task's operation on `artifact_hash`, for `key` only."""
        return CapabilityRequest(
            run_id=self.run_id, epoch=self.epoch, owner=self.name, operation=self.task.operation,
            artifact_hash=artifact_hash, level=self.task.level, placement=placement, context=self.parts.authority,
            idempotency_key=key,
        )

    def _commit(self) -> None:
        if not self._budget_left():
            return
        world = self.world
        inputs = self._inputs("commit")
        artifact = self._artifact_bytes() if inputs is not None else None
        candidate = self.parts.current_candidate
        if inputs is None or artifact is None or candidate is None:
            return
        approval = self._approval(candidate.artifact_hash)
        if approval is None:
            self._seal(Boundary.AWAITING_AUTHORITY)
            return
        placement = world.placement(self.parts.placement.name)
        lease = world.store.get_lease(self.run_id)
        key = f"{self.run_id}:{self.task.intent}"
        try:
            capability = world.request_capability(self._ask(placement.name, candidate.artifact_hash, key))
        except AuthorityDeniedError as exc:
            if lease.epoch != self.epoch:
                raise StaleEpochError(f"{self.name} no longer holds epoch {self.epoch}") from exc
            self._end(Boundary.ESCALATED, f"capability refused: {exc}")
            return
        world.facts.add(CredentialIssued(run_id=self.run_id, at=utcnow(), kind="capability", value=capability.token))
        request = MutationRequest(
            run_id=self.run_id, epoch=self.epoch, operation=self.task.operation,
            idempotency_key=key, target=self.task.target,
            payload=self.task.payload(self.run_id, artifact, candidate.artifact_hash),
            artifact_hash=candidate.artifact_hash, capability=capability.token, required_level=self.task.level,
            process=self.name,
        )
        self._held = (request, approval, placement.name)
        if self._hold("before_send"):
            return
        self._send()

    def _send(self) -> None:
        """Send the prepared request through the gateway and act on what comes back."""
        assert self._held is not None
        world = self.world
        request, approval, placement_name = self._held
        self._held = None
        placement = world.placement(placement_name)
        outcome: Outcome = "committed"
        operation_id: str | None = None
        try:
            result = self.gateway.submit(request)
            operation_id, outcome = result.operation_id, "replayed" if result.replayed else "committed"
        except OutcomeUnknownError as exc:
            operation_id, outcome = exc.operation_id, "unknown"
        except OperationUnknownError:
            outcome = "refused"
        except StaleEpochError:
            outcome = "fenced"
        except OperationNotCommittedError as exc:
            operation_id, outcome = exc.operation_id, "rejected"
        world.facts.add(MutationAttempted(
            run_id=self.run_id, at=world.now(), worker=self.name, placement=placement.name, intent=self.task.intent,
            idempotency_key=request.idempotency_key, operation_id=operation_id, candidate_hash=str(request.artifact_hash),
            level=self.task.level.value, ceiling=placement.authority_ceiling.value,
            approval_artifact=approval.artifact_hash, approval_expires_at=approval.expires_at, outcome=outcome,
        ))
        if outcome == "fenced":
            raise StaleEpochError(f"{self.name} was fenced at the gateway or the target")
        self._die("after_send")
        self._refresh_operations()
        if outcome in ("committed", "replayed"):
            self._seal(Boundary.COMMITTED)
        elif outcome == "rejected":
            self._end(Boundary.FAILED, f"the target refused {self.task.operation}")
        else:
            self._seal(Boundary.COMMITTING)
            self._settle_open_operations()

    def _refresh_operations(self) -> None:
        entries = tuple(self.world.store.list_operations(self.run_id))
        self.parts = dataclasses.replace(self.parts, operations=OperationLedger(entries=entries))

    def _settle_open_operations(self) -> None:
        """Ask the targets about every PREPARED or UNKNOWN operation before doing anything else."""
        world = self.world
        reconciler = world.reconciler(self.name)
        for entry in world.store.list_operations(self.run_id, states=[OperationState.PREPARED, OperationState.UNKNOWN]):
            result = reconciler.reconcile(entry.operation_id)
            world.facts.add(Reconciled(run_id=self.run_id, at=world.now(), worker=self.name,
                                       operation_id=entry.operation_id, intent=self.task.intent,
                                       state=result.state.value))
            self._refresh_operations()
            if result.decision is Decision.CONTINUE:
                self._seal(Boundary.COMMITTED)
            elif result.decision is Decision.RETRY:
                self._seal(Boundary.AUTHORIZED)  # the same key goes through the gateway again, re-armed
                self._retry(entry.idempotency_key)
            elif result.decision is Decision.ABANDON:
                self._end(Boundary.FAILED, f"{entry.operation_id} was not committed and may not be retried")
            else:
                self._end(Boundary.ESCALATED, f"{entry.operation_id} is still UNKNOWN after asking {entry.target}")
            return

    def _retry(self, key: str) -> None:
        candidate = self.parts.current_candidate
        artifact = self._artifact_bytes()
        approval = None if candidate is None else self._approval(candidate.artifact_hash)
        if candidate is None or artifact is None or approval is None:
            self._seal(Boundary.AWAITING_AUTHORITY)
            return
        world = self.world
        capability = world.request_capability(self._ask(self.parts.placement.name, candidate.artifact_hash, key))
        request = MutationRequest(
            run_id=self.run_id, epoch=self.epoch, operation=self.task.operation, idempotency_key=key,
            target=self.task.target, payload=self.task.payload(self.run_id, artifact, candidate.artifact_hash),
            artifact_hash=candidate.artifact_hash, capability=capability.token, required_level=self.task.level,
            process=self.name)
        result = world.reconciler(self.name).retry(self.gateway, request)
        world.facts.add(MutationAttempted(
            run_id=self.run_id, at=world.now(), worker=self.name, placement=self.parts.placement.name,
            intent=self.task.intent, idempotency_key=key, operation_id=result.operation_id,
            candidate_hash=candidate.artifact_hash, level=self.task.level.value,
            ceiling=world.placement(self.parts.placement.name).authority_ceiling.value,
            approval_artifact=approval.artifact_hash, approval_expires_at=approval.expires_at, outcome="committed"))
        self._refresh_operations()
        self._seal(Boundary.COMMITTED)

    def _postcondition(self) -> None:
        candidate = self.parts.current_candidate
        records = self.world.targets[self.task.target].records()
        mine = [r for r in records if r.get("run") == self.run_id]
        ok = candidate is not None and len(mine) == 1 and mine[0].get("candidate_hash") == candidate.artifact_hash
        if not ok:
            self._end(Boundary.FAILED, f"postcondition failed: {len(mine)} effect(s) recorded for the run")
            return
        self._seal(Boundary.POSTCONDITION_VERIFIED)
        self._finish_run("verified", "postcondition verified at the target")

    # -- sealing and ending ---------------------------------------------------------------------

    def _seal(self, boundary: Boundary) -> None:
        if self.fenced:
            return
        world, now = self.world, self.world.now()
        world.store.append_event(Event(event_type=EventType.CHECKPOINT_STARTED, run_id=self.run_id, at=now,
                                       source_placement=self.parts.placement.name, source_epoch=self.epoch,
                                       resume_boundary=boundary.value))
        resumability = classify_resumability(
            boundary, self.parts.run_kind, self.parts.operations, has_recorded_observations=bool(self.observations),
            workspace=self.parts.workspace, browser=self.task.browser, constraints=self.parts.constraints,
            source=self.parts.placement,
        )
        checkpoint = build_checkpoint(
            world.blobs, run_id=self.run_id, parts=self.parts, new_observations=self.pending, parent=self.parent,
            boundary=boundary, resumability=resumability.resumability, resumability_reasons=resumability.reasons,
            owner_epoch=self.epoch, sealed_at=now,
        )
        world.store.append_checkpoint(checkpoint)
        self.pending, self.parent, self.boundary = [], checkpoint, boundary
        world.store.append_event(Event(event_type=EventType.CHECKPOINT_SEALED, run_id=self.run_id, at=world.now(),
                                       checkpoint_id=checkpoint.checkpoint_id, release_id=checkpoint.release_id,
                                       state_schema=checkpoint.schema_version, resume_boundary=boundary.value,
                                       source_epoch=self.epoch, detail={"checkpoint_hash": checkpoint.checkpoint_hash}))
        self._die("after_seal")
        plan, self.plan = self.plan, None
        if plan is not None:
            problems = confirm_resume(world.store, plan, checkpoint, restore(world.blobs, checkpoint))
            if problems:
                self._end(Boundary.ESCALATED, "first resumed transition broke an invariant: " + "; ".join(problems))

    def _end(self, boundary: Boundary, reason: str) -> None:
        if self.ended:
            return
        self._seal(boundary)
        if not self.fenced and not self.ended:
            self._finish_run("failed" if boundary is Boundary.FAILED else "escalated", reason)

    def _finish_run(self, status: Status, reason: str) -> None:
        world = self.world
        self.ended = True
        world.store.set_run_status(self.run_id, status, {"reason": reason[:300]})
        event = EventType.RUN_ESCALATED if status == "escalated" else EventType.RUN_FINISHED
        world.store.append_event(Event(event_type=event, run_id=self.run_id, at=world.now(), reason=reason[:300],
                                       target_epoch=self.epoch, detail={"status": status, "worker": self.name}))
        world.facts.add(RunEnded(run_id=self.run_id, at=world.now(), worker=self.name, status=status,
                                 reason=reason[:300]))
        world.store.release_lease(self.run_id, self.name, self.epoch)

    def stop_after_transfer(self) -> None:
        """The coordinator moved the run away: this worker drops it."""
        self.ended = True


