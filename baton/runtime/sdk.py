"""The agent SDK: a `RunContext` an agent calls at semantic boundaries.

Agent code never writes persistence code. It calls:

    ctx.observe(source, query, content, freshness_s=...)   record what was seen
    ctx.read(source, query)                                use it (refused while it needs revalidation)
    ctx.revalidate(observation, live_content)              explicit re-observation after a move
    ctx.derive(fact_id, statement, from_=[...])            a fact, kept apart from hypotheses
    ctx.propose(candidate_bytes, kind=..., inputs=[...])   -> CANDIDATE_READY
    ctx.verify(check)                                      evidence bound to the exact hash -> VERIFIED
    ctx.request_approval(operation, level=...)             -> AWAITING_AUTHORITY -> AUTHORIZED
    ctx.perform(operation, target, payload, key=...)       through the gateway -> COMMITTING -> COMMITTED
    ctx.confirm_postcondition(ok, detail)                  -> POSTCONDITION_VERIFIED (or FAILED)
    ctx.charge(usage, reason)                              into the run's budget ledger
    ctx.call_model(call, reason, cost=...)                 a model call, charged before it is made
    ctx.set_workspace(identity) / ctx.record_search(state) a coding run's workspace and whole search state

Every boundary seals a checkpoint with the resumability class derived from
the run's state, then looks for a pending handoff request: if there is one it
acknowledges it (the sealed checkpoint is the quiesce point) and raises
`HandoffRequested`, which the worker handles. A lost lease raises `RunFenced`
at the next call; the gateway and the store refuse a stale epoch anyway.
"""

from __future__ import annotations

import datetime as dt
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import Any, NamedTuple, NoReturn, TypeVar

from pydantic import JsonValue

from baton import fault_points
from baton.authority_http import CapabilityRequest
from baton.errors import AuthorityDeniedError, SecretInStateError
from baton.gateway import MutationRequest, MutationResult
from baton.handoff.resume import ResumePlan
from baton.identity import ref_of, sha256_ref
from baton.lifecycle import TERMINAL
from baton.models import (
    Approval,
    AuthorityContext,
    AuthorityLevel,
    BehavioralRelease,
    Boundary,
    BudgetLedger,
    BudgetUsage,
    Candidate,
    DerivedFact,
    EventType,
    ExecutionCheckpoint,
    Observation,
    OperationEntry,
    OperationState,
    Placement,
    RunKind,
    SearchState,
    SourceAuthority,
    UseMode,
    VerifierEvidence,
    WorkspaceIdentity,
)
from baton.models.evidence import VerdictLike
from baton.resumability import BrowserResumeClass
from baton.runtime import memory_keys as keys
from baton.runtime.approvals import ApprovalRequest
from baton.runtime.commit import commit_operation
from baton.runtime.errors import (
    BoundaryError,
    BudgetExhausted,
    ObservationNeedsRevalidation,
    RunEscalated,
    RunFailed,
    RunFenced,
)
from baton.runtime.resume_state import resumed_state, settle_commit
from baton.runtime.run_state import BEFORE_COMMIT, RunState
from baton.runtime.sealing import Sealer
from baton.runtime.services import RuntimeServices
from baton.secret_scan import ensure_no_secrets
from baton.store.records import Lease

_VERIFY_COST = BudgetUsage(verification_spend_usd=Decimal("0.001"))


ReplyT = TypeVar("ReplyT")


class ObservedContent(NamedTuple):
    """A usable observation and the exact bytes it recorded."""

    observation: Observation
    content: bytes
    ref: str


def _scan(label: str, content: bytes) -> None:
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        return
    ensure_no_secrets([(label, text)])


class RunContext:
    """One run as one owner (worker, epoch) sees it, from its restored checkpoint onward."""

    def __init__(
        self,
        services: RuntimeServices,
        plan: ResumePlan,
        *,
        owner: str,
        process: str | None = None,
        lease_lost: threading.Event | None = None,
    ) -> None:
        self.services = services
        self.run_id = plan.run_id
        self.epoch = plan.epoch
        self.owner = owner
        self.process = process or f"{owner}/{plan.run_id}"
        resumed = resumed_state(services, plan)
        self._state = RunState(resumed.parts, resumed.boundary, resumed.book, plan.checkpoint)
        self._sealer = Sealer(services, self.run_id, self.epoch, owner, self.process, lease_lost or threading.Event())
        self._plan: ResumePlan | None = plan
        self.adjustments: tuple[str, ...] = tuple(resumed.adjustments)
        self._contents: dict[str, bytes] = {}
        """Observed bytes not sealed yet: stored in the next seal's transaction."""
        self._charges: list[tuple[BudgetUsage, str]] = []
        """Charges of the boundary being sealed: committed in its seal's transaction."""

    # -- read-only views ------------------------------------------------------------------------

    @property
    def boundary(self) -> Boundary:
        return self._state.boundary

    @property
    def run_kind(self) -> RunKind:
        return self._state.parts.run_kind

    @property
    def release(self) -> BehavioralRelease:
        return self._state.parts.release

    @property
    def placement(self) -> Placement:
        return self._state.parts.placement

    @property
    def authority(self) -> AuthorityContext:
        return self._state.parts.authority

    @property
    def budget(self) -> BudgetLedger:
        return self._state.parts.budget

    @property
    def candidate(self) -> Candidate | None:
        """The current candidate, or None (none proposed yet, or withdrawn)."""
        return self._state.candidate

    @property
    def evidence(self) -> tuple[VerifierEvidence, ...]:
        return self._state.parts.evidence

    @property
    def derived_facts(self) -> tuple[DerivedFact, ...]:
        return self._state.parts.state.derived_facts

    @property
    def last_checkpoint(self) -> ExecutionCheckpoint:
        return self._state.head

    @property
    def task(self) -> dict[str, Any]:
        """The task input the run was launched with."""
        value = self._state.parts.state.memory.get(keys.TASK)
        return dict(value) if isinstance(value, dict) else {}

    def memory(self, key: str, default: Any = None) -> Any:
        """A value the agent stored with `remember`."""
        return self._state.parts.state.memory.get(key, default)

    def tool(self, name: str) -> Any:
        """A read-side tool the worker provides (e.g. the corpus client); KeyError names the known ones."""
        try:
            return self.services.tools[name]
        except KeyError:
            raise KeyError(f"no tool {name!r} on this worker; available: {sorted(self.services.tools)}") from None

    def candidate_bytes(self) -> bytes:
        """The exact bytes of the current candidate."""
        return self.services.blobs.get(self._require_candidate().artifact_hash)

    def now(self) -> dt.datetime:
        """The store's clock (the one that judges leases, approvals and freshness)."""
        return self.services.store.db_now()

    # -- observations ---------------------------------------------------------------------------

    def observe(
        self,
        source: str,
        query: Mapping[str, JsonValue],
        content: bytes,
        *,
        freshness_s: float,
        authority: SourceAuthority = SourceAuthority.AUTHORITATIVE,
        observed_at: dt.datetime | None = None,
    ) -> Observation:
        """Record one observation (content stored by hash) and seal the "observation completed" boundary.

        The content, the new parts, the checkpoint, its events and the tool-call
        charge commit in one store transaction.
        """
        now = self._ready()
        observation = self._record(source, query, content, freshness_s, authority, observed_at or now)
        self._charge_with_seal(BudgetUsage(tool_calls=1), f"observe {source}", now)
        self._seal(at=now)
        return observation

    def read(self, source: str, query: Mapping[str, JsonValue] | None = None) -> ObservedContent | None:
        """The current observation of a question and its bytes; None if never observed (or dropped).

        Raises ObservationNeedsRevalidation when it may not be used as recorded.
        """
        entry = self._state.book.current(source, query)
        if entry is None:
            return None
        mode = entry.mode_at(self.now())
        if mode is not UseMode.USE_RECORDED_OBSERVATION:
            raise ObservationNeedsRevalidation(entry.observation, mode)
        return ObservedContent(entry.observation, self._content(entry.observation.content_ref), entry.ref)

    def needs_revalidation(self) -> list[tuple[Observation, UseMode]]:
        """Current observations that must be revalidated or refreshed before use."""
        return [(entry.observation, mode) for entry, mode in self._state.book.needing_revalidation(self.now())]

    def valid_observation_refs(self) -> list[str]:
        """Refs of every observation that may be relied on (and cited) right now."""
        return self._state.book.valid_refs(self.now())

    def revalidate(self, observation: Observation, content: bytes, *, observed_at: dt.datetime | None = None) -> bool:
        """Record the live answer to an observation's question; return True when the content changed.

        A change invalidates everything that relied on the old content: facts
        derived from it are dropped and a candidate built on it is withdrawn
        (the run goes back to GENERATING) unless its side effect already began.
        """
        self._ready()
        entry = self._state.book.entry(observation.record_ref())
        mode = entry.mode_at(self.now()).value if entry is not None else UseMode.REFRESH_STALE_OBSERVATION.value
        fresh = self._record(observation.source, observation.query, content, observation.freshness_budget_s,
                             observation.authority, observed_at)
        changed = fresh.content_ref != observation.content_ref
        self._state.append_memory(keys.REVALIDATIONS, {"source": observation.source, "mode": mode, "changed": changed,
                                                       "old": observation.record_ref(), "new": fresh.record_ref()})
        self._charge_with_seal(BudgetUsage(tool_calls=1), f"revalidate {observation.source}")
        if changed:
            self._invalidate(observation, f"{observation.source} changed on revalidation")
        self._seal()
        return changed

    def drop_observation(self, observation: Observation, reason: str) -> None:
        """Declare an observation unusable (its source no longer serves it); dependents are invalidated."""
        self._ready()
        self._state.book.drop(observation.record_ref(), reason)
        self._state.append_memory(keys.REVALIDATIONS, {"source": observation.source, "mode": "DROPPED",
                                                       "changed": True, "old": observation.record_ref(), "new": None})
        self._invalidate(observation, f"{observation.source} dropped: {reason}")
        self._seal()

    # -- derived state --------------------------------------------------------------------------

    def derive(self, fact_id: str, statement: str, *, from_: Sequence[Observation]) -> DerivedFact:
        """Add (or replace) a fact derived from observations; sealed with the next boundary."""
        fact = DerivedFact(fact_id=fact_id, statement=statement, derived_from=tuple(o.record_ref() for o in from_))
        facts = tuple(f for f in self.derived_facts if f.fact_id != fact_id) + (fact,)
        self._state.update_state(derived_facts=facts)
        return fact

    @property
    def workspace(self) -> WorkspaceIdentity | None:
        """The run's recorded workspace identity (coding runs), or None."""
        return self._state.parts.workspace

    @property
    def search(self) -> SearchState | None:
        """The run's recorded search state, or None."""
        return self._state.parts.search

    def set_workspace(self, workspace: WorkspaceIdentity) -> None:
        """Record the workspace identity the run now works on (sec. 14); sealed with the next boundary."""
        self._state.set_workspace(workspace)

    def record_search(self, search: SearchState) -> None:
        """Record the whole search state, frontier included (sec. 9); sealed with the next boundary."""
        self._state.set_search(search)

    def remember(self, key: str, value: JsonValue) -> None:
        """Keep an agent value (plan, hypothesis, counter) in the run state; sealed with the next boundary."""
        if keys.is_reserved(key):
            raise ValueError(f"memory key {key!r} is reserved for the SDK")
        self._state.set_memory(key, value)

    # -- candidate, verification, approval ----------------------------------------------------------

    def propose(
        self, content: bytes, *, kind: str, summary: str = "", inputs: Sequence[Observation] = ()
    ) -> Candidate:
        """Store a candidate by its exact hash and seal CANDIDATE_READY."""
        self._ready()
        if self.boundary is Boundary.CANDIDATE_READY:
            self._state.move(Boundary.GENERATING)
        if self.boundary is not Boundary.GENERATING:
            raise BoundaryError(f"propose needs GENERATING or CANDIDATE_READY, the run is at {self.boundary.value}")
        _scan("candidate", content)
        self._require_valid([o.record_ref() for o in inputs])
        previous = self._state.parts.current_candidate
        candidate = Candidate(
            candidate_id=f"{kind}-{len(self._state.parts.candidates) + 1}",
            kind=kind,
            artifact_hash=self.services.blobs.put(content),
            produced_by_release=self.release.release_id,
            parent_candidate=None if previous is None else previous.artifact_hash,
            summary=summary,
            created_at=self.now(),
        )
        self._state.add_candidate(candidate, inputs)
        self._state.move(Boundary.CANDIDATE_READY)
        self._seal()
        return candidate

    def withdraw_candidate(self, reason: str) -> None:
        """Give up the current candidate before its side effect (e.g. the release changed); back to GENERATING."""
        self._ready()
        if self.boundary not in BEFORE_COMMIT:
            raise BoundaryError(f"cannot withdraw a candidate at {self.boundary.value}")
        if self.boundary is not Boundary.GENERATING:
            self._state.rewind_to_generating()
            self._sealer.emit(self._state, EventType.REVERIFICATION_REQUIRED, reason=f"candidate withdrawn: {reason}")
            self._seal()

    def verify(
        self,
        check: Callable[[bytes], VerdictLike],
        *,
        inputs: Mapping[str, JsonValue] | None = None,
        cost: BudgetUsage | None = None,
    ) -> VerifierEvidence:
        """Run `check` on the candidate's exact bytes; evidence is bound to that hash.

        Passing seals VERIFIED; failing seals GENERATING (the candidate goes back).
        """
        self._ready()
        candidate = self._require_candidate()
        if self.boundary is Boundary.VERIFIED:
            held = self._state.passing_evidence(candidate.artifact_hash)
            if held is not None:
                return held
        if self.boundary is not Boundary.CANDIDATE_READY:
            raise BoundaryError(f"verify needs CANDIDATE_READY, the run is at {self.boundary.value}")
        self._require_valid(self._state.candidate_inputs(candidate))
        self._state.move(Boundary.VERIFYING)
        verdict = check(self.services.blobs.get(candidate.artifact_hash))
        evidence = VerifierEvidence(
            candidate_hash=candidate.artifact_hash,
            verifier_version=verdict.verifier_version,
            inputs=dict(inputs or {}),
            result=verdict.result,
            detail=verdict.detail,
            verified_at=self.now(),
        )
        self._state.add_evidence(evidence)
        self._charge_with_seal(cost or _VERIFY_COST, f"verify with {verdict.verifier_version}")
        self._state.move(Boundary.VERIFIED if evidence.passed else Boundary.GENERATING)
        self._seal()
        return evidence

    def request_approval(self, operation: str, *, level: AuthorityLevel = AuthorityLevel.EXTERNAL_MUTATE) -> Approval:
        """Ask the policy approver for `operation` on the current candidate's exact hash; seal AUTHORIZED."""
        self._ready()
        candidate = self._require_candidate()
        held = self._state.approval(operation, candidate.artifact_hash, self.now())
        if self.boundary is Boundary.AUTHORIZED and held is not None:
            return held
        if self.boundary not in (Boundary.VERIFIED, Boundary.AWAITING_AUTHORITY):
            raise BoundaryError(f"request_approval needs VERIFIED, the run is at {self.boundary.value}")
        if self._state.passing_evidence(candidate.artifact_hash) is None:
            raise BoundaryError(f"no passing evidence for {candidate.artifact_hash}; verify first")
        self._require_valid(self._state.candidate_inputs(candidate))
        if not self.authority.level.allows(level):
            self.escalate(f"{operation} needs {level.value}; the run holds {self.authority.level.value} "
                          f"on {self.placement.name}")
        if self.boundary is Boundary.VERIFIED:
            self._state.move(Boundary.AWAITING_AUTHORITY)
            self._seal()
        approval = self.services.approver.approve(
            ApprovalRequest(self.run_id, operation, candidate.artifact_hash, level, self.evidence, self.now())
        )
        if approval is None:
            self.escalate(f"approval for {operation} on {candidate.artifact_hash} was refused by policy")
        self._state.set_authority(self.authority.model_copy(update={"approvals": self.authority.approvals + (approval,)}))
        self._state.move(Boundary.AUTHORIZED)
        self._seal()
        return approval

    # -- side effects ---------------------------------------------------------------------------

    def perform(
        self,
        operation: str,
        target: str,
        payload: Mapping[str, JsonValue],
        *,
        key: str,
        level: AuthorityLevel = AuthorityLevel.EXTERNAL_MUTATE,
    ) -> MutationResult:
        """Send one consequential operation through the gateway with a fresh capability; seal COMMITTED.

        The intent is sealed at COMMITTING before anything is sent, so a new
        owner knows to reconcile. Timeouts are reconciled, never reported as
        success; a NOT_COMMITTED outcome is retried only within the retry budget.
        """
        self._ready()
        done = self._state.parts.state.memory.get(keys.COMMITTED_OPERATION)
        if self.boundary is Boundary.COMMITTED and isinstance(done, dict) and done.get("key") == key:
            return self._recorded_result(key)
        if self.boundary is not Boundary.AUTHORIZED:
            raise BoundaryError(f"perform needs AUTHORIZED, the run is at {self.boundary.value}")
        candidate = self._require_candidate()
        self._require_valid(self._state.candidate_inputs(candidate))
        needs_approval = level.allows(self.services.approval_required_from)
        if needs_approval and self._state.approval(operation, candidate.artifact_hash, self.now()) is None:
            raise BoundaryError(f"no valid approval for {operation} on {candidate.artifact_hash}")
        body = dict(payload)
        self._declare_intent(operation, target, key, ref_of(body), candidate.artifact_hash)
        self._state.move(Boundary.COMMITTING)
        self._seal()
        self.charge(BudgetUsage(tool_calls=1), f"{operation} via {target}")

        def request_for() -> MutationRequest:
            ask = CapabilityRequest(
                run_id=self.run_id, epoch=self.epoch, owner=str(self._live_lease().owner), operation=operation,
                artifact_hash=candidate.artifact_hash, level=level, placement=self.placement.name,
                context=self.authority, idempotency_key=key,
            )
            capability = self.services.capability_client(self.placement).request(ask)
            fault_points.reached(fault_points.CAPABILITY_ISSUED)
            return MutationRequest(
                run_id=self.run_id, epoch=self.epoch, operation=operation, idempotency_key=key, target=target,
                payload=body, artifact_hash=candidate.artifact_hash, capability=capability.token,
                required_level=level, process=self.process,
            )

        try:
            attempts = commit_operation(
                self.services.store, self.services.gateway, self.services.reconciler(self.process), request_for,
                max_retries=max(0, self.budget.limits.retries - self.budget.used.retries),
            )
        except RunEscalated as exc:
            self._refresh_operations()
            self.escalate(str(exc))
        except AuthorityDeniedError as exc:
            self._refresh_operations()
            self.fail(f"capability refused: {exc}")
        if attempts.retries:
            self.charge(BudgetUsage(retries=attempts.retries), f"{attempts.retries} retries of {key}")
        memory = self._state.memory
        pending = memory.pop(keys.PENDING_OPERATION, {})
        memory[keys.COMMITTED_OPERATION] = {**pending, "operation_id": attempts.result.operation_id}
        self._state.update_state(memory=memory)
        self._refresh_operations()
        self._state.move(Boundary.COMMITTED)
        self._seal()
        return attempts.result

    def confirm_postcondition(self, ok: bool, detail: str) -> None:
        """Record the postcondition check after a commit: POSTCONDITION_VERIFIED, or FAILED (raises RunFailed)."""
        self._ready()
        if self.boundary is not Boundary.COMMITTED:
            raise BoundaryError(f"a postcondition follows COMMITTED, the run is at {self.boundary.value}")
        self._state.set_memory("baton.postcondition", {"ok": ok, "detail": detail})
        if not ok:
            self.fail(f"postcondition failed: {detail}")
        self._state.move(Boundary.POSTCONDITION_VERIFIED)
        self._seal(check_handoff=False)

    # -- scoped credentials and browser resumes --------------------------------------------------

    def scoped_credential(
        self, operation: str, *, scope: str | None = None, level: AuthorityLevel = AuthorityLevel.OBSERVE,
        ttl_s: float = 300.0,
    ) -> str:
        """A short-lived capability from the authority for this run, epoch and `operation` on `scope`.

        For logging in to a target (a web application) as this run. It is
        returned to the caller only: keep it in a local variable, never in
        `remember` (the seal refuses credentials in state).
        """
        self._ready()
        ask = CapabilityRequest(
            run_id=self.run_id, epoch=self.epoch, owner=str(self._live_lease().owner), operation=operation,
            artifact_hash=scope, level=level, placement=self.placement.name, context=self.authority, ttl_s=ttl_s,
        )
        return self.services.capability_client(self.placement).request(ask).token

    def record_browser_resume(self, chosen: BrowserResumeClass, reason: str,
                              detail: Mapping[str, JsonValue] | None = None) -> None:
        """Record (BROWSER_RESUME_CHOSEN) the sec. 13 class a browser run resumes by, and why."""
        self._sealer.ensure_owner()
        self._state.append_memory(keys.BROWSER_RESUMES, {"class": chosen.value, "reason": reason, "epoch": self.epoch})
        self._sealer.emit(self._state, EventType.BROWSER_RESUME_CHOSEN, reason=reason,
                          detail={"resume_class": chosen.value, **dict(detail or {})})

    # -- budget -----------------------------------------------------------------------------------

    def charge(self, usage: BudgetUsage, reason: str) -> BudgetLedger:
        """Record consumption in the store's ledger and the checkpointed one; BudgetExhausted past a limit."""
        return self._charge(usage, reason, fenced=False)

    def call_model(self, call: Callable[[], ReplyT], reason: str, *, cost: Callable[[ReplyT], BudgetUsage]) -> ReplyT:
        """Make one model call, accounted for before it is made.

        The call is charged to the ledger (one model call) in its own transaction first, so a
        worker that dies after the provider served it, before the reply's charge, leaves the
        run accounted for the call (at worst for one the provider never served), never less.
        That first charge is fenced: a worker whose epoch is no longer the run's (a stalled one
        woken after the run moved) gets StaleEpochError and calls nothing. The reply's spend
        (`cost` of the reply, less that one call) is charged after it, whatever the epoch by
        then. BudgetExhausted before the call when the run may make no more calls."""
        self._charge(BudgetUsage(model_calls=1), f"model call about to be made: {reason}", fenced=True)
        reply = call()
        used = cost(reply)
        self.charge(used.model_copy(update={"model_calls": max(used.model_calls - 1, 0)}), reason)
        return reply

    def carry_on_after_aborted_move(self) -> None:
        """Go on where the run quiesced for a move that did not happen.

        A run quiesced at COMMITTING had declared its operation and, the quiesce point coming before
        the send, sent nothing; the agent has no step there. It is settled as a new owner settles it:
        a claim the store holds PREPARED or UNKNOWN is reconciled first, then the run is back at
        AUTHORIZED (nothing committed: the agent performs again under the same key) or at COMMITTED
        (committed: on to the postcondition). Still open after that, the run escalates."""
        self._sealer.ensure_owner()
        if self.boundary is not Boundary.COMMITTING:
            return
        pending = self._state.memory.get(keys.PENDING_OPERATION)
        key = pending.get("key") if isinstance(pending, dict) else None
        record = self.services.store.get_idempotency(self.run_id, str(key)) if key else None
        if record is not None and record.state in (OperationState.PREPARED, OperationState.UNKNOWN):
            self.services.reconciler(self.process).reconcile_run(self.run_id)
        memory = self._state.memory
        boundary, note = settle_commit(self.services, self.run_id, self.boundary, memory)
        self._refresh_operations()
        if boundary is Boundary.COMMITTING:
            self.escalate(f"after an aborted move: {note}")
        self._state.update_state(memory=memory)
        self._state.move(boundary)

    # -- ending -----------------------------------------------------------------------------------

    def fail(self, reason: str) -> NoReturn:
        """Seal FAILED and raise RunFailed."""
        self._stop_at(Boundary.FAILED, reason)
        raise RunFailed(f"run {self.run_id!r} failed: {reason}")

    def escalate(self, reason: str) -> NoReturn:
        """Seal ESCALATED and raise RunEscalated."""
        self._stop_at(Boundary.ESCALATED, reason)
        raise RunEscalated(f"run {self.run_id!r} escalated: {reason}")

    def checkpoint(self) -> ExecutionCheckpoint:
        """Seal the current state at the current boundary (progress the agent wants kept)."""
        self._ready()
        return self._seal()

    # -- internals --------------------------------------------------------------------------------

    def _charge(self, usage: BudgetUsage, reason: str, *, fenced: bool) -> BudgetLedger:
        """`charge`; `fenced`: the store refuses it (StaleEpochError) unless this owner's epoch is the run's."""
        self._sealer.ensure_owner()
        if usage != BudgetUsage():
            self.services.store.append_budget_charge(self.run_id, self.epoch, usage, reason, fenced=fenced)
            self._state.charge(usage)
        self._require_budget()
        return self.budget

    def _require_budget(self, now: dt.datetime | None = None) -> dt.datetime:
        now = now or self.now()
        exhausted = self.budget.exhausted(now)
        if exhausted:
            raise BudgetExhausted(f"run {self.run_id!r}: budget exhausted ({', '.join(exhausted)})", limits=exhausted)
        return now

    def _ready(self) -> dt.datetime:
        """Check the run may go on; the store's clock reading the budget was judged by."""
        self._sealer.ensure_owner()
        if self.boundary in TERMINAL:
            raise BoundaryError(f"run {self.run_id!r} has ended at {self.boundary.value}")
        return self._require_budget()

    def _charge_with_seal(self, usage: BudgetUsage, reason: str, now: dt.datetime | None = None) -> None:
        """A charge of the boundary about to be sealed: it commits with that seal (or alone if the run stops here)."""
        self._sealer.ensure_owner()
        self._state.charge(usage)
        self._charges.append((usage, reason))
        try:
            self._require_budget(now)
        except BudgetExhausted:
            self._flush_charges()
            raise

    def _flush_charges(self) -> None:
        charges, self._charges = self._charges, []
        for usage, reason in charges:
            self.services.store.append_budget_charge(self.run_id, self.epoch, usage, reason)

    def _content(self, ref: str) -> bytes:
        """Observed bytes by ref: not sealed yet, or from the blob store (verified there)."""
        pending = self._contents.get(ref)
        return pending if pending is not None else self.services.blobs.get(ref)

    def _live_lease(self) -> Lease:
        lease = self.services.store.get_lease(self.run_id)
        if lease.owner != self.owner or lease.epoch != self.epoch:
            self._sealer.lost.set()
            raise RunFenced(f"run {self.run_id!r}: lease is now {lease.owner!r} at epoch {lease.epoch}")
        return lease

    def _require_candidate(self) -> Candidate:
        candidate = self.candidate
        if candidate is None:
            raise BoundaryError(f"run {self.run_id!r} has no current candidate")
        return candidate

    def _require_valid(self, refs: Sequence[str]) -> None:
        invalid = self._state.first_invalid(refs, self.now())
        if isinstance(invalid, str):
            raise BoundaryError(invalid)
        if invalid is not None:
            raise ObservationNeedsRevalidation(*invalid)

    def _record(
        self,
        source: str,
        query: Mapping[str, JsonValue],
        content: bytes,
        freshness_s: float,
        authority: SourceAuthority,
        observed_at: dt.datetime | None,
    ) -> Observation:
        _scan(f"observation of {source}", content)
        ref = sha256_ref(content)
        observation = Observation(
            source=source,
            query=dict(query),
            observed_at=observed_at or self.now(),
            content_ref=ref,
            freshness_budget_s=freshness_s,
            authority=authority,
        )
        self._state.add_observation(observation)
        self._contents[ref] = content  # stored by the next seal, in its transaction
        return observation

    def _invalidate(self, observation: Observation, reason: str) -> None:
        withdrawn = self._state.invalidate_dependents(self.now())
        self._sealer.emit(self._state, EventType.REVERIFICATION_REQUIRED, reason=reason,
                          detail={"observation": observation.record_ref(), "source": observation.source,
                                  "candidate_withdrawn": withdrawn})

    def _declare_intent(self, operation: str, target: str, key: str, payload_ref: str, artifact_hash: str) -> None:
        """Record, before anything is sent, which operation this run is about to attempt."""
        self._state.set_memory(keys.PENDING_OPERATION, {"key": key, "operation": operation, "target": target,
                                                        "payload_ref": payload_ref})
        intent = OperationEntry(
            operation_id=f"intent-{uuid.uuid4().hex[:16]}",
            run_id=self.run_id,
            idempotency_key=key,
            epoch=self.epoch,
            kind=operation,
            target=target,
            payload_ref=payload_ref,
            artifact_hash=artifact_hash,
            state=OperationState.PREPARED,
            recorded_at=self.now(),
            detail="declared at COMMITTING, before sending: reconcile before any retry",
        )
        self._state.set_operations([*self.services.store.list_operations(self.run_id), intent])

    def _refresh_operations(self) -> None:
        self._state.set_operations(self.services.store.list_operations(self.run_id))

    def _recorded_result(self, key: str) -> MutationResult:
        record = self.services.store.get_idempotency(self.run_id, key)
        if record is None or record.state is not OperationState.COMMITTED:
            raise BoundaryError(f"run {self.run_id!r}: key {key!r} is not recorded as committed")
        return MutationResult(operation_id=record.operation_id, idempotency_key=key, state=record.state,
                              outcome=record.outcome, replayed=True)

    def _stop_at(self, boundary: Boundary, reason: str) -> None:
        if self.boundary in TERMINAL:
            return
        self._state.set_memory("baton.stop_reason", reason)
        self._state.stop_at(boundary)
        try:
            self._seal(check_handoff=False)
        except (RunFenced, SecretInStateError):
            raise
        except Exception:  # noqa: BLE001 - the worker records the end even if this seal fails
            pass

    def _seal(self, *, check_handoff: bool = True, at: dt.datetime | None = None) -> ExecutionCheckpoint:
        charges, self._charges = tuple(self._charges), []  # the sealer records them alone if the seal fails
        checkpoint = self._sealer.seal(self._state, contents=tuple(self._contents.values()), charges=charges,
                                       check_handoff=check_handoff, at=at)
        self._contents.clear()
        fault_points.reached(f"sealed:{checkpoint.boundary.value}")
        plan, self._plan = self._plan, None
        if plan is not None:
            problems = self._sealer.confirm(plan, checkpoint)
            if problems:
                self.fail("first resumed transition broke an invariant: " + "; ".join(problems))
        if check_handoff:
            self._sealer.pause(self._state)
        return checkpoint
