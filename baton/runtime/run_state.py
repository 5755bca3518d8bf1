"""The live logical state of one run on its owner, and the rules for changing it.

`RunState` holds the parts a checkpoint is sealed from, the current boundary,
the observation book and the head of the checkpoint chain. Its methods only
change that state (no I/O): moving along the lifecycle, adding candidates and
evidence, tracking which observations a candidate rests on, and deciding what
must be invalidated when an observation changes.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from typing import Any

from baton.checkpoints import RunParts
from baton.lifecycle import transition
from baton.models import (
    Approval,
    AuthorityContext,
    Boundary,
    BudgetUsage,
    Candidate,
    ExecutionCheckpoint,
    Observation,
    OperationEntry,
    OperationLedger,
    SearchState,
    UseMode,
    VerifierEvidence,
    WorkspaceIdentity,
)
from baton.runtime import memory_keys as keys
from baton.runtime.observation_book import ObservationBook

BEFORE_COMMIT: frozenset[Boundary] = frozenset({
    Boundary.GENERATING,
    Boundary.CANDIDATE_READY,
    Boundary.VERIFIED,
    Boundary.AWAITING_AUTHORITY,
    Boundary.AUTHORIZED,
})
"""Boundaries at which the candidate may still be withdrawn (nothing was sent yet)."""

_BACK_TO_GENERATING: dict[Boundary, tuple[Boundary, ...]] = {
    Boundary.CANDIDATE_READY: (Boundary.GENERATING,),
    Boundary.VERIFIED: (Boundary.CANDIDATE_READY, Boundary.GENERATING),
    Boundary.AWAITING_AUTHORITY: (Boundary.GENERATING,),
    Boundary.AUTHORIZED: (Boundary.CANDIDATE_READY, Boundary.GENERATING),
}


class RunState:
    """Parts, boundary, observations and chain head of a run being executed."""

    def __init__(self, parts: RunParts, boundary: Boundary, book: ObservationBook, head: ExecutionCheckpoint) -> None:
        self.parts = parts
        self.boundary = boundary
        self.book = book
        self.head = head
        self.new_observations: list[Observation] = []

    # -- reading ------------------------------------------------------------------------------

    @property
    def memory(self) -> dict[str, Any]:
        return dict(self.parts.state.memory)

    @property
    def candidate(self) -> Candidate | None:
        """The current candidate; None at GENERATING (none yet, or withdrawn)."""
        return None if self.boundary is Boundary.GENERATING else self.parts.current_candidate

    def candidate_inputs(self, candidate: Candidate) -> list[str]:
        """Refs of the observations `candidate` was built from."""
        inputs = self.parts.state.memory.get(keys.CANDIDATE_INPUTS) or {}
        refs = inputs.get(candidate.candidate_id, []) if isinstance(inputs, dict) else []
        return [str(ref) for ref in refs] if isinstance(refs, list) else []

    def first_invalid(self, refs: Sequence[str], now: dt.datetime) -> tuple[Observation, UseMode] | str | None:
        """The first ref that may not be relied on now (its observation and mode), a message, or None."""
        for ref in refs:
            if self.book.valid(ref, now):
                continue
            entry = self.book.entry(ref)
            if entry is None:
                return f"input {ref} is not an observation of this run"
            current = self.book.current(entry.observation.source, entry.observation.query) or entry
            return entry.observation, current.mode_at(now)
        return None

    def passing_evidence(self, artifact_hash: str) -> VerifierEvidence | None:
        for evidence in reversed(self.parts.evidence):
            if evidence.passed and evidence.applies_to(artifact_hash):
                return evidence
        return None

    def approval(self, operation: str, artifact_hash: str, now: dt.datetime) -> Approval | None:
        for approval in self.parts.authority.approvals:
            if approval.valid_for(operation, artifact_hash, now):
                return approval
        return None

    # -- lifecycle ----------------------------------------------------------------------------

    def move(self, target: Boundary) -> None:
        """Move to `target` if the lifecycle allows it (staying put is always allowed)."""
        if target is not self.boundary:
            self.boundary = transition(self.boundary, target)

    def rewind_to_generating(self) -> None:
        for step in _BACK_TO_GENERATING.get(self.boundary, ()):
            self.move(step)

    def stop_at(self, boundary: Boundary) -> None:
        """Move to FAILED or ESCALATED (from VERIFYING via the candidate it was verifying)."""
        if self.boundary is Boundary.VERIFYING:
            self.boundary = Boundary.CANDIDATE_READY
        self.move(boundary)

    # -- changes ------------------------------------------------------------------------------

    def update_state(self, **changes: Any) -> None:
        self.parts = dataclasses.replace(self.parts, state=self.parts.state.model_copy(update=changes))

    def set_memory(self, key: str, value: Any) -> None:
        self.update_state(memory={**self.parts.state.memory, key: value})

    def append_memory(self, key: str, item: Any) -> None:
        existing = self.parts.state.memory.get(key)
        self.set_memory(key, [*(existing if isinstance(existing, list) else []), item])

    def add_observation(self, observation: Observation) -> None:
        self.book.add(observation)
        self.new_observations.append(observation)

    def add_candidate(self, candidate: Candidate, inputs: Sequence[Observation]) -> None:
        existing = self.parts.state.memory.get(keys.CANDIDATE_INPUTS)
        mapping: dict[str, Any] = dict(existing) if isinstance(existing, dict) else {}
        mapping[candidate.candidate_id] = [o.record_ref() for o in inputs]
        self.set_memory(keys.CANDIDATE_INPUTS, mapping)
        self.parts = dataclasses.replace(self.parts, candidates=self.parts.candidates + (candidate,))
        self.update_state(candidate_refs=self.parts.state.candidate_refs + (candidate.record_ref(),))

    def add_evidence(self, evidence: VerifierEvidence) -> None:
        self.parts = dataclasses.replace(self.parts, evidence=self.parts.evidence + (evidence,))

    def set_workspace(self, workspace: WorkspaceIdentity) -> None:
        self.parts = dataclasses.replace(self.parts, workspace=workspace)

    def set_search(self, search: SearchState) -> None:
        self.parts = dataclasses.replace(self.parts, search=search)

    def set_authority(self, authority: AuthorityContext) -> None:
        self.parts = dataclasses.replace(self.parts, authority=authority)

    def charge(self, usage: BudgetUsage) -> None:
        self.parts = dataclasses.replace(self.parts, budget=self.parts.budget.charge(usage))

    def set_operations(self, entries: Sequence[OperationEntry]) -> None:
        self.parts = dataclasses.replace(self.parts, operations=OperationLedger(entries=tuple(entries)))

    def invalidate_dependents(self, now: dt.datetime) -> bool:
        """Drop facts resting on content no longer valid; withdraw a candidate that does. True if withdrawn."""
        facts = tuple(f for f in self.parts.state.derived_facts if all(self.book.valid(r, now) for r in f.derived_from))
        self.update_state(derived_facts=facts)
        candidate = self.candidate
        stale = candidate is not None and any(not self.book.valid(r, now) for r in self.candidate_inputs(candidate))
        if stale and self.boundary in BEFORE_COMMIT:
            self.rewind_to_generating()
            return True
        return False

    # -- sealing ------------------------------------------------------------------------------

    def parts_to_seal(self) -> RunParts:
        """The parts as they are sealed: book state persisted in memory, step counted."""
        memory: dict[str, Any] = dict(self.parts.state.memory)
        for key, value in ((keys.DROPPED_OBSERVATIONS, self.book.dropped()),
                           (keys.PENDING_REVALIDATION, self.book.pending_modes())):
            if value:
                memory[key] = value
            else:
                memory.pop(key, None)
        self.update_state(memory=memory, step=self.parts.state.step + 1)
        return self.parts

    def sealed(self, checkpoint: ExecutionCheckpoint) -> None:
        """The chain now ends at `checkpoint`; its new observations are in it."""
        self.head = checkpoint
        self.new_observations = []
