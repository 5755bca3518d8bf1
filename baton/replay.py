"""Replay: re-execute a run from one of its checkpoints, with recorded observations only.

Replay and handoff share one state model (sec. 23 of the spec): a replay
starts exactly where a new owner would, from `baton.checkpoints.restore` of a
sealed checkpoint, and walks the run's later checkpoints in order. At each one
it re-derives what is derivable and compares it, field by field, with what
was recorded:

* candidates: the artifact is re-derived by the pure function of its kind
  (a `baton.replay_derivers.Deriver` the caller supplies; the reference
  agents' are `baton.agents.derivers.DERIVERS`) under the checkpoint's behavioral release (or the
  release given for a counterfactual replay) from the recorded observations it
  was built from; the replayed hash must equal the recorded one;
* evidence: the verifier runs again on the replayed bytes; its result must
  equal the recorded result, and the recorded evidence must bind to the
  replayed hash;
* operations: nothing is sent anywhere. A recorded operation is simulated
  against the recorded ledger: the replayed request (its artifact hash) must
  be the one the ledger recorded, whose recorded outcome is then taken as the
  outcome;
* boundaries: the boundary the replayed state reaches (verified only with
  passing replayed evidence, authorized only with an approval bound to the
  replayed hash, committed only through a matching recorded operation) must
  equal the recorded boundary;
* recorded bytes: every observation and artifact blob read is re-hashed; an
  altered or missing blob is reported as a `recorded_blob` divergence.

Replayable: observations (always USE_RECORDED_OBSERVATION, never fetched
again), candidates of the kinds the caller's derivers cover (for the reference
agents: research reports, deployment specs), their verifiers, approval binding, operation identity and the
lifecycle they imply. Not replayable, and taken as recorded: live external
state, anything a target did (the ledger's recorded outcomes stand in),
approvals themselves (who approved, when), reconciliation answers, candidates
of other kinds (patches, form submissions, anything a non-deterministic model
wrote), budget charges, and worker-local state, which no checkpoint holds.

A replay reads the store and the blob store and writes nothing.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import Field

from baton.checkpoints import RestoredRun, restore
from baton.errors import BatonError, BlobNotFoundError, IntegrityError, RecordNotFoundError
from baton.identity import canonical_json, sha256_ref
from baton.models import Boundary, Candidate, ExecutionCheckpoint, Observation, OperationState, Record, VerdictResult
from baton.models.release import BehavioralRelease
from baton.replay_derivers import CANDIDATE_INPUTS_KEY, DROPPED_KEY, TASK_KEY, Derivers, Inputs
from baton.store.base import SqlStore
from baton.store.blobs import Blobs


class ReplayError(BatonError):
    """A replay could not start: unknown run or checkpoint, or a starting state that does not verify."""


class Divergence(Record):
    """One field on which the replay disagrees with the record."""

    checkpoint_id: str
    seq: int
    field: str = Field(description="candidate_hash, evidence_result, evidence_binding, operation_artifact, "
                                   "boundary, release or recorded_blob")
    recorded: str | None
    replayed: str | None
    detail: str


class ReplayStep(Record):
    """What the replay re-derived at one later checkpoint, beside what was recorded."""

    seq: int
    checkpoint_id: str
    recorded_boundary: Boundary
    replayed_boundary: Boundary
    recorded_candidate: str | None
    replayed_candidate: str | None
    recorded_evidence: str | None
    replayed_evidence: str | None
    notes: tuple[str, ...] = ()


class ReplayReport(Record):
    """The whole replay: its steps, every divergence, and what could not be re-executed."""

    run_id: str
    from_checkpoint: str
    release_override: str | None
    steps: tuple[ReplayStep, ...]
    divergences: tuple[Divergence, ...]

    @property
    def diverged(self) -> bool:
        return bool(self.divergences)


_NEEDS_PASS = {Boundary.VERIFIED, Boundary.AWAITING_AUTHORITY}
_DERIVED = {Boundary.CANDIDATE_READY, *_NEEDS_PASS, Boundary.AUTHORIZED, Boundary.COMMITTING, Boundary.COMMITTED,
            Boundary.POSTCONDITION_VERIFIED}


def _question(observation: Observation) -> tuple[str, str]:
    return observation.source, canonical_json(dict(observation.query)).decode("utf-8")


def valid_refs_at(restored: RestoredRun, at: dt.datetime) -> list[str]:
    """Observation refs the run could rely on at `at`: not dropped, and its question's newest answer
    at that point is fresh and has the same content."""
    recorded = restored.parts.state.memory.get(DROPPED_KEY)
    dropped = recorded if isinstance(recorded, dict) else {}
    log = [o for o in restored.observations if o.observed_at <= at] or list(restored.observations)
    newest: dict[tuple[str, str], Observation] = {}
    for observation in log:
        newest[_question(observation)] = observation
    refs = []
    for observation in log:
        ref = observation.record_ref()
        current = newest[_question(observation)]
        if ref in dropped or current.record_ref() in dropped:
            continue
        if current.content_ref == observation.content_ref and current.is_fresh(at):
            refs.append(ref)
    return refs


class _Replayer:
    """Walks a run's checkpoints after a starting one, holding the replayed state."""

    def __init__(self, blobs: Blobs, start: RestoredRun, release: BehavioralRelease | None,
                 derivers: Derivers) -> None:
        self.blobs = blobs
        self.derivers = derivers
        self.release = release
        self.hash_of: dict[str, str | None] = {c.artifact_hash: c.artifact_hash for c in start.parts.candidates}
        self.bytes_of: dict[str, bytes] = {}
        self.passed: dict[str, bool] = {e.candidate_hash: e.passed for e in start.parts.evidence}
        self.committed = start.checkpoint.boundary in (Boundary.COMMITTED, Boundary.POSTCONDITION_VERIFIED)
        self.divergences: list[Divergence] = []

    # -- recorded bytes ---------------------------------------------------------------------

    def _read(self, checkpoint: ExecutionCheckpoint, ref: str, what: str) -> bytes | None:
        try:
            return self.blobs.get(ref)
        except (IntegrityError, BlobNotFoundError) as exc:
            self._diverge(checkpoint, "recorded_blob", ref, None, f"{what}: {type(exc).__name__}: {exc}")
            return None

    def _diverge(self, checkpoint: ExecutionCheckpoint, field: str, recorded: str | None, replayed: str | None,
                 detail: str) -> None:
        self.divergences.append(Divergence(checkpoint_id=checkpoint.checkpoint_id, seq=checkpoint.seq, field=field,
                                           recorded=recorded, replayed=replayed, detail=detail))

    def _inputs(self, cur: RestoredRun, candidate: Candidate, notes: list[str]) -> Inputs | None:
        memory = cur.parts.state.memory
        recorded_inputs = memory.get(CANDIDATE_INPUTS_KEY) or {}
        refs = recorded_inputs.get(candidate.candidate_id) if isinstance(recorded_inputs, dict) else None
        by_ref = {o.record_ref(): o for o in cur.observations}
        if not isinstance(refs, list):
            notes.append(f"{candidate.candidate_id}: its inputs were not recorded")
            return None
        inputs = []
        for ref in refs:
            observation = by_ref.get(str(ref))
            if observation is None:
                notes.append(f"{candidate.candidate_id}: input {ref} is not in the observation log")
                return None
            content = self._read(cur.checkpoint, observation.content_ref, f"content of observation {observation.source}")
            if content is None:
                return None
            inputs.append((observation, content))
        return inputs

    # -- one step ---------------------------------------------------------------------------

    def step(self, prev: RestoredRun, cur: RestoredRun) -> ReplayStep:
        notes: list[str] = []
        ckpt = cur.checkpoint
        known = {o.record_ref() for o in prev.observations}
        for observation in cur.observations:
            if observation.record_ref() not in known:
                self._read(ckpt, observation.content_ref, f"content of observation {observation.source}")
        seen = {c.artifact_hash for c in prev.parts.candidates}
        for candidate in cur.parts.candidates:
            if candidate.artifact_hash not in seen and candidate.artifact_hash not in self.hash_of:
                self._candidate(cur, candidate, notes)
        for evidence in cur.parts.evidence[len(prev.parts.evidence):]:
            self._evidence(cur, evidence.candidate_hash, evidence.passed, evidence.verified_at, notes)
        self._operations(prev, cur, notes)
        replayed = self._boundary(cur)
        if replayed is not ckpt.boundary:
            self._diverge(ckpt, "boundary", ckpt.boundary.value, replayed.value,
                          "the replayed state reaches another boundary than the one recorded")
        current = cur.parts.current_candidate
        recorded_hash = None if current is None else current.artifact_hash
        replayed_hash = None if recorded_hash is None else self.hash_of.get(recorded_hash)
        held = [e for e in cur.parts.evidence if recorded_hash is not None and e.applies_to(recorded_hash)]
        return ReplayStep(
            seq=ckpt.seq, checkpoint_id=ckpt.checkpoint_id, recorded_boundary=ckpt.boundary, replayed_boundary=replayed,
            recorded_candidate=recorded_hash, replayed_candidate=replayed_hash,
            recorded_evidence=held[-1].result.value if held else None,
            replayed_evidence=None if replayed_hash is None or replayed_hash not in self.passed
            else ("PASS" if self.passed[replayed_hash] else "FAIL"),
            notes=tuple(notes),
        )

    def _candidate(self, cur: RestoredRun, candidate: Candidate, notes: list[str]) -> None:
        ckpt = cur.checkpoint
        release = self.release or cur.parts.release
        if self.release is None and candidate.produced_by_release != release.release_id:
            self._diverge(ckpt, "release", candidate.produced_by_release, release.release_id,
                          f"{candidate.candidate_id} claims another release than the checkpoint it was sealed in")
        deriver = self.derivers.get(candidate.kind)
        if deriver is None:
            notes.append(f"{candidate.candidate_id}: kind {candidate.kind!r} has no pure derivation; taken as recorded")
            self.hash_of[candidate.artifact_hash] = candidate.artifact_hash
            return
        recorded_inputs = cur.parts.state.memory.get(CANDIDATE_INPUTS_KEY)
        if not isinstance(recorded_inputs, dict) or candidate.candidate_id not in recorded_inputs:
            notes.append(f"{candidate.candidate_id}: its inputs were not recorded; taken as recorded")
            self.hash_of[candidate.artifact_hash] = candidate.artifact_hash
            return
        inputs = self._inputs(cur, candidate, notes)
        if inputs is None:
            self.hash_of[candidate.artifact_hash] = None
            return
        task = cur.parts.state.memory.get(TASK_KEY)
        try:
            artifact = deriver.derive(release, inputs, task if isinstance(task, Mapping) else {})
        except KeyError as exc:
            notes.append(f"{candidate.candidate_id}: no pure model implements {release.model} ({exc}); taken as recorded")
            self.hash_of[candidate.artifact_hash] = candidate.artifact_hash
            return
        except BatonError as exc:
            self._diverge(ckpt, "candidate_hash", candidate.artifact_hash, None,
                          f"{candidate.candidate_id}: the replayed model produced no artifact: {exc}")
            self.hash_of[candidate.artifact_hash] = None
            return
        replayed = sha256_ref(artifact)
        self.hash_of[candidate.artifact_hash] = replayed
        self.bytes_of[replayed] = artifact
        if replayed != candidate.artifact_hash:
            self._diverge(ckpt, "candidate_hash", candidate.artifact_hash, replayed,
                          f"{candidate.candidate_id} ({candidate.kind}) re-derived under {release.model} differs")

    def _evidence(self, cur: RestoredRun, recorded_hash: str, recorded_pass: bool, at: dt.datetime,
                  notes: list[str]) -> None:
        ckpt = cur.checkpoint
        candidate = next((c for c in cur.parts.candidates if c.artifact_hash == recorded_hash), None)
        replayed_hash = self.hash_of.get(recorded_hash)
        if candidate is None or replayed_hash is None:
            notes.append(f"evidence for {recorded_hash[:19]}: no replayed artifact to verify")
            return
        if replayed_hash != recorded_hash:
            self._diverge(ckpt, "evidence_binding", recorded_hash, replayed_hash,
                          "the recorded evidence verified another artifact than the replayed one")
        deriver = self.derivers.get(candidate.kind)
        if deriver is None:
            self.passed[replayed_hash] = recorded_pass
            return
        artifact = self.bytes_of.get(replayed_hash)
        if artifact is None:
            artifact = self._read(ckpt, replayed_hash, f"bytes of candidate {candidate.candidate_id}")
        inputs = self._inputs(cur, candidate, notes)
        if artifact is None or inputs is None:
            return
        verdict = deriver.verify(artifact, inputs, valid_refs_at(cur, at))
        passed = verdict.result is VerdictResult.PASS
        self.passed[replayed_hash] = passed
        if passed != recorded_pass:
            self._diverge(ckpt, "evidence_result", "PASS" if recorded_pass else "FAIL", verdict.result.value,
                          f"{verdict.verifier_version}: {verdict.detail}")

    def _operations(self, prev: RestoredRun, cur: RestoredRun, notes: list[str]) -> None:
        before = {e.operation_id: e.state for e in prev.parts.operations.entries}
        for entry in cur.parts.operations.entries:
            if before.get(entry.operation_id) is entry.state:
                continue
            replayed = None if entry.artifact_hash is None else self.hash_of.get(entry.artifact_hash, entry.artifact_hash)
            if replayed != entry.artifact_hash:
                self._diverge(cur.checkpoint, "operation_artifact", entry.artifact_hash, replayed,
                              f"{entry.kind} {entry.operation_id}: the replayed run would send another artifact; "
                              "its recorded outcome cannot stand in")
                continue
            notes.append(f"{entry.kind} {entry.operation_id}: simulated from the ledger as {entry.state.value}")
            if entry.state is OperationState.COMMITTED:
                self.committed = True

    def _boundary(self, cur: RestoredRun) -> Boundary:
        recorded = cur.checkpoint.boundary
        if recorded not in _DERIVED:
            return recorded  # GENERATING, FAILED and ESCALATED are the agent's own decisions
        current = cur.parts.current_candidate
        replayed_hash = None if current is None else self.hash_of.get(current.artifact_hash)
        if current is None or replayed_hash is None:
            return Boundary.GENERATING
        if recorded is Boundary.CANDIDATE_READY:
            return recorded
        if recorded is Boundary.COMMITTING:
            return recorded if replayed_hash == current.artifact_hash else Boundary.AUTHORIZED
        if recorded in (Boundary.COMMITTED, Boundary.POSTCONDITION_VERIFIED):
            return recorded if self.committed else Boundary.AUTHORIZED
        if not self.passed.get(replayed_hash, False):
            return Boundary.CANDIDATE_READY if replayed_hash not in self.passed else Boundary.GENERATING
        if recorded in _NEEDS_PASS:
            return recorded
        sealed_at = cur.checkpoint.sealed_at
        bound = any(a.artifact_hash == replayed_hash and sealed_at < a.expires_at for a in cur.parts.authority.approvals)
        return Boundary.AUTHORIZED if bound else Boundary.AWAITING_AUTHORITY


def _starting_checkpoint(store: SqlStore, run_id: str, from_checkpoint: str) -> tuple[int, list[ExecutionCheckpoint]]:
    try:
        chain = store.list_checkpoints(run_id)
    except RecordNotFoundError as exc:
        raise ReplayError(f"run {run_id!r} is not in the store") from exc
    for index, checkpoint in enumerate(chain):
        if from_checkpoint in (checkpoint.checkpoint_id, str(checkpoint.seq)):
            return index, chain
    if not chain:
        raise ReplayError(f"run {run_id!r} has no checkpoints")
    raise ReplayError(f"run {run_id!r} has no checkpoint {from_checkpoint!r} "
                      f"(it has {chain[0].checkpoint_id} .. {chain[-1].checkpoint_id})")


def replay_run(
    store: SqlStore,
    blobs: Blobs,
    run_id: str,
    from_checkpoint: str,
    *,
    derivers: Derivers,
    release: BehavioralRelease | None = None,
) -> ReplayReport:
    """Re-execute `run_id` from `from_checkpoint` (an id or a seq) and compare with the record.

    `derivers` re-derive candidates by kind (the runtime supplies them, e.g.
    `baton.agents.derivers.DERIVERS`); other kinds are taken as recorded.
    `release` replaces every checkpoint's release (a counterfactual replay).
    Raises ReplayError when the run or checkpoint is unknown, or the starting
    checkpoint itself does not restore; everything later is reported, not raised.
    """
    index, chain = _starting_checkpoint(store, run_id, from_checkpoint)
    try:
        start = restore(blobs, chain[index])
    except BatonError as exc:
        raise ReplayError(f"checkpoint {chain[index].checkpoint_id} does not restore: {exc}") from exc
    replayer = _Replayer(blobs, start, release, derivers)
    steps: list[ReplayStep] = []
    previous = start
    for checkpoint in chain[index + 1:]:
        try:
            current = restore(blobs, checkpoint)
        except BatonError as exc:
            replayer._diverge(checkpoint, "recorded_blob", checkpoint.checkpoint_hash, None,
                              f"checkpoint does not restore: {type(exc).__name__}: {exc}")
            break
        steps.append(replayer.step(previous, current))
        previous = current
    return ReplayReport(
        run_id=run_id, from_checkpoint=chain[index].checkpoint_id,
        release_override=None if release is None else release.release_id,
        steps=tuple(steps), divergences=tuple(replayer.divergences),
    )


def report_json(report: ReplayReport) -> dict[str, Any]:
    """The report as plain JSON data (what `baton replay --json` prints)."""
    return {**report.model_dump(mode="json"), "diverged": report.diverged}


def summary_counts(divergences: Sequence[Divergence]) -> dict[str, int]:
    """How many divergences of each field."""
    counts: dict[str, int] = {}
    for divergence in divergences:
        counts[divergence.field] = counts.get(divergence.field, 0) + 1
    return counts
