"""The six questions of sec. 27, and DESIGN.md's invariants, answered from what a scenario observed.

Inputs are records kept by someone other than the strategy under test where
possible: the targets' effect files, the provider's bills, the verifier's log,
the credentials the identity provider issued, the store's ledger, events and
checkpoints, and the gateway history (through `baton.checker`). The workers'
own instrumentation adds what only they can see (which observation they
relied on, with what authority they acted), always next to the live truth
recorded at the same moment.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from baton.checker import TargetEffect, Violation, check
from baton.checkpoints import RestoredRun, restore
from baton.errors import BatonError
from baton.faults.facts import (
    F,
    Billed,
    CredentialIssued,
    Fact,
    MutationAttempted,
    ObservationUsed,
    Reconciled,
    Resumed,
    RunEnded,
    RunStarted,
    Verified,
)
from baton.faults.world import World
from baton.history import HistoryOp, read_history
from baton.models import AuthorityLevel, Boundary, BudgetUsage, Event, OperationEntry


class Question(StrEnum):
    """Sec. 27's six questions, each answered yes (violated) or no for one scenario."""

    DUPLICATE_MUTATION = "duplicate_mutation"
    STALE_EVIDENCE = "stale_evidence"
    AUTHORITY_EXPANDED = "authority_expanded"
    WRONG_ARTIFACT = "wrong_artifact"
    BUDGET_RESET = "budget_reset"
    UNKNOWN_HIDDEN = "unknown_hidden"

    @property
    def text(self) -> str:
        return _TEXT[self]


_TEXT = {
    Question.DUPLICATE_MUTATION: "Can duplicate mutation occur?",
    Question.STALE_EVIDENCE: "Can stale evidence be accepted?",
    Question.AUTHORITY_EXPANDED: "Can authority expand accidentally?",
    Question.WRONG_ARTIFACT: "Can verification attach to the wrong artifact?",
    Question.BUDGET_RESET: "Can budget reset?",
    Question.UNKNOWN_HIDDEN: "Can UNKNOWN be hidden?",
}

_ACTED = ("committed", "replayed", "unknown")
_EVIDENCE_BOUNDARIES = {Boundary.VERIFIED, Boundary.AWAITING_AUTHORITY, Boundary.AUTHORIZED, Boundary.COMMITTING,
                        Boundary.COMMITTED, Boundary.POSTCONDITION_VERIFIED}


@dataclass
class Observed:
    """Everything recorded about one scenario's run."""

    run_id: str
    facts: list[Fact]
    records: list[dict[str, Any]]
    effects: list[TargetEffect]
    history: list[HistoryOp]
    ledger: list[OperationEntry]
    events: list[Event]
    checkpoints: list[RestoredRun]
    persisted: list[Path]
    run_status: str | None
    notes: list[str] = field(default_factory=list)

    def of(self, kind: type[F]) -> list[F]:
        """This run's facts of one type, in the order they were written."""
        return [f for f in self.facts if isinstance(f, kind) and f.run_id == self.run_id]


def observe(world: World) -> Observed:
    """Collect the records of `world`'s run (read-only)."""
    run_id, store = world.run_id, world.store
    records = [r for target in world.targets.values() for r in target.records() if r.get("run") == run_id]
    effects = [e for target in world.targets.values() for e in target.effects() if e.run_id == run_id]
    history_path = world.root / "history.jsonl"
    history = [op for op in read_history(history_path) if op.run_id == run_id] if history_path.exists() else []
    checkpoints, notes = [], []
    try:
        for checkpoint in store.list_checkpoints(run_id):
            try:
                checkpoints.append(restore(world.blobs, checkpoint))
            except BatonError as exc:
                notes.append(f"{checkpoint.checkpoint_id} does not restore: {exc}")
        run_status: str | None = store.get_run(run_id).status
    except BatonError:
        run_status = None
    persisted = [p for p in (world.root / "blobs").rglob("*") if p.is_file()]
    persisted += [p for p in (world.root / "naive").rglob("*") if p.is_file()]
    persisted += [p for p in world.root.glob("baton.db*") if p.is_file()]
    return Observed(
        run_id=run_id, facts=world.facts.all(), records=records, effects=effects, history=history,
        ledger=store.list_operations(run_id) if run_status is not None else [],
        events=[e for _, e in store.list_events(run_id=run_id)] if run_status is not None else [],
        checkpoints=checkpoints, persisted=persisted, run_status=run_status, notes=notes,
    )


# --- the six questions -------------------------------------------------------------------------


def duplicate_mutation(seen: Observed) -> list[str]:
    """One logical operation applied more than once at its target."""
    applied: dict[str, list[int]] = defaultdict(list)
    for record in seen.records:
        applied[str(record.get("intent"))].append(int(record["seq"]))
    found = [f"{intent!r} applied {len(seqs)} times by the target (seq {seqs})"
             for intent, seqs in applied.items() if len(seqs) > 1]
    return found + [v.message for v in _checker(seen) if v.invariant == 1]


def stale_evidence(seen: Observed) -> list[str]:
    """An observation relied on as recorded after its freshness ran out or after the world moved on."""
    found = []
    for use in seen.of(ObservationUsed):
        if use.mode != "USE_RECORDED_OBSERVATION":
            continue
        age = (use.at - use.observed_at).total_seconds()
        if age > use.freshness_s:
            found.append(f"{use.worker} used {use.source} at {use.step} {age:.2f}s after observing it "
                         f"(freshness {use.freshness_s:g}s)")
        elif use.recorded_content != use.live_content:
            found.append(f"{use.worker} used its record of {use.source} at {use.step} while the source "
                         "said something else")
    return found


def _above(level: str, ceiling: str) -> bool:
    return not AuthorityLevel(ceiling).allows(AuthorityLevel(level))


def authority_expanded(seen: Observed) -> list[str]:
    """Acting or holding above the lesser of the run's authority and the placement's ceiling, or on a lapsed
    or foreign approval, or carrying credentials in portable state."""
    found = []
    for attempt in seen.of(MutationAttempted):
        if attempt.outcome not in _ACTED:
            continue
        if _above(attempt.level, attempt.ceiling):
            found.append(f"{attempt.worker} acted at {attempt.level} on {attempt.placement} (ceiling {attempt.ceiling})")
        if AuthorityLevel(attempt.level).allows(AuthorityLevel.EXTERNAL_MUTATE):
            if attempt.approval_expires_at is None or attempt.approval_expires_at <= attempt.at:
                found.append(f"{attempt.worker} acted on an approval that had expired "
                             f"({attempt.approval_expires_at} <= {attempt.at})")
            elif attempt.approval_artifact != attempt.candidate_hash:
                found.append(f"{attempt.worker} acted on {attempt.candidate_hash[:19]} under an approval for "
                             f"{str(attempt.approval_artifact)[:19]}")
    for resumed in seen.of(Resumed):
        entitled = AuthorityLevel.lesser(AuthorityLevel(resumed.checkpoint_level), AuthorityLevel(resumed.ceiling))
        if not entitled.allows(AuthorityLevel(resumed.authority_level)):
            found.append(f"{resumed.worker} resumed holding {resumed.authority_level}; entitled to {entitled.value}")
    return found + credentials_in_state(seen)


def credentials_in_state(seen: Observed) -> list[str]:
    """Issued bearer credentials found in any persisted state (blobs, store, transcript)."""
    issued = [c for c in seen.facts if isinstance(c, CredentialIssued)]
    if not issued:
        return []
    found = []
    contents = {path: path.read_bytes() for path in seen.persisted}
    for credential in issued:
        needle = credential.value.encode()
        for path, data in contents.items():
            if needle in data:
                found.append(f"a {credential.kind} credential is stored in {path.name}")
                break
    return found


def wrong_artifact(seen: Observed) -> list[str]:
    """An effect whose artifact no verifier passed, or a sealed verified boundary whose evidence names
    another hash than the current candidate's."""
    passed = {v.candidate_hash for v in seen.of(Verified) if v.passed}
    found = [f"the target applied {str(r.get('candidate_hash'))[:19]}, which no verifier passed"
             for r in seen.records if r.get("candidate_hash") not in passed]
    for restored in seen.checkpoints:
        checkpoint, candidate = restored.checkpoint, restored.parts.current_candidate
        if checkpoint.boundary not in _EVIDENCE_BOUNDARIES or candidate is None:
            continue
        if not any(e.passed and e.applies_to(candidate.artifact_hash) for e in restored.parts.evidence):
            found.append(f"{checkpoint.checkpoint_id} is {checkpoint.boundary.value} without passing evidence "
                         f"for {candidate.artifact_hash[:19]}")
    return found


def _sum(charges: list[BudgetUsage]) -> BudgetUsage:
    total = BudgetUsage()
    for charge in charges:
        total = total.plus(charge)
    return total


def budget_reset(seen: Observed) -> list[str]:
    """A resumed worker that forgot what was spent, got new limits, or consumed past the run's deadline."""
    started = seen.of(RunStarted)
    bills = seen.of(Billed)
    found = []
    for resumed in seen.of(Resumed):
        before = _sum([b.charge for b in bills if b.at < resumed.at])
        if not resumed.budget_used.covers(before):
            lost = [name for name in BudgetUsage.model_fields
                    if getattr(resumed.budget_used, name) < getattr(before, name)]
            found.append(f"{resumed.worker} resumed with less used than was billed ({', '.join(lost)})")
        if started and resumed.limits != started[0].limits:
            found.append(f"{resumed.worker} resumed under new limits (deadline {resumed.limits.deadline.isoformat()})")
    if started:
        deadline = started[0].limits.deadline
        late = [b for b in bills if b.at > deadline]
        late_acts = [a for a in seen.of(MutationAttempted) if a.at > deadline and a.outcome in _ACTED]
        if late or late_acts:
            found.append(f"{len(late)} charge(s) and {len(late_acts)} mutation(s) after the run's deadline")
    return found


def unknown_hidden(seen: Observed) -> list[str]:
    """An unanswered mutation that was retried, forgotten or reported as success without asking the target."""
    reconciled = {r.operation_id: r.state for r in seen.of(Reconciled)}
    for op in seen.history:
        if op.f == "reconcile" and op.type.value == "ok" and op.operation_id:
            reconciled.setdefault(op.operation_id, str(op.value.get("state")))
    attempts = seen.of(MutationAttempted)
    ended = seen.of(RunEnded)
    found = []
    for attempt in attempts:
        if attempt.outcome != "unknown":
            continue
        state = reconciled.get(attempt.operation_id or "")
        later = [a for a in attempts if a.intent == attempt.intent and a.at > attempt.at and a.outcome in _ACTED
                 and a.idempotency_key != attempt.idempotency_key]
        if state is None:
            if later:
                found.append(f"{attempt.operation_id} had no answer and was sent again as {later[0].idempotency_key} "
                             "without asking the target")
            if any(e.status == "verified" for e in ended):
                found.append(f"the run reported success while {attempt.operation_id} was never reconciled")
            elif not later and not ended:
                found.append(f"{attempt.operation_id} had no answer and nobody asked the target")
        elif state == "UNKNOWN" and any(e.status == "verified" for e in ended):
            found.append(f"the run reported success while {attempt.operation_id} stayed UNKNOWN")
    return found + [v.message for v in _checker(seen) if v.invariant == 4]


QUESTIONS = {
    Question.DUPLICATE_MUTATION: duplicate_mutation,
    Question.STALE_EVIDENCE: stale_evidence,
    Question.AUTHORITY_EXPANDED: authority_expanded,
    Question.WRONG_ARTIFACT: wrong_artifact,
    Question.BUDGET_RESET: budget_reset,
    Question.UNKNOWN_HIDDEN: unknown_hidden,
}


def answer(seen: Observed) -> dict[Question, list[str]]:
    """Each question with the evidence of its violation (empty when it did not happen)."""
    return {question: rule(seen) for question, rule in QUESTIONS.items()}


# --- the invariants ----------------------------------------------------------------------------


def _checker(seen: Observed) -> list[Violation]:
    return check(seen.history, seen.ledger, seen.effects, seen.events)


def invariants(seen: Observed, answers: dict[Question, list[str]]) -> dict[int, list[str]]:
    """DESIGN.md's invariants 1-10 (violations only): 1-5 by the history checker, 6-9 by the questions, 10 by the end."""
    found: dict[int, list[str]] = defaultdict(list)
    for violation in _checker(seen):
        found[violation.invariant].append(violation.message)
    found[1] += [m for m in answers[Question.DUPLICATE_MUTATION] if m not in found[1]]
    found[6] += answers[Question.WRONG_ARTIFACT]
    found[7] += answers[Question.AUTHORITY_EXPANDED]
    found[8] += answers[Question.BUDGET_RESET]
    found[9] += answers[Question.STALE_EVIDENCE]
    ended = seen.of(RunEnded)
    if not ended:
        found[10].append("the run never ended (verified, failed or escalated)")
    elif seen.run_status is not None and seen.run_status == "active":
        found[10].append("the run ended for its worker but the store still says active")
    return {number: messages for number, messages in sorted(found.items()) if messages}
