"""A changed base repository is a recorded state transition, never part of resume.

An old patch on a new base is not the same task state (sec. 14 of the spec).
`rebase_transition` turns "the repository moved" into an explicit, hashed
record: the workspace before and after, the boundary the run falls back to,
and the fact that the new artifact must be verified and approved again.
Evidence and approvals bound to the old patch hash stay bound to it.
"""

from __future__ import annotations

import datetime as dt

from pydantic import Field, model_validator

from baton.errors import InvalidTransitionError
from baton.lifecycle import is_sealable, transition
from baton.models import Boundary, Record, Ref, WorkspaceIdentity

_REBASE_LANDS_ON: dict[Boundary, Boundary] = {
    Boundary.GENERATING: Boundary.GENERATING,
    Boundary.CANDIDATE_READY: Boundary.CANDIDATE_READY,
}


class WorkspaceTransition(Record):
    """One recorded change of a coding run's workspace identity."""

    kind: str = "rebase"
    reason: str = Field(min_length=1)
    before: WorkspaceIdentity
    after: WorkspaceIdentity
    before_ref: Ref
    after_ref: Ref
    boundary_before: Boundary
    boundary_after: Boundary
    invalidated_artifact: Ref | None
    requires_reverification: bool
    requires_reapproval: bool
    recorded_at: dt.datetime

    @model_validator(mode="after")
    def _refs_match(self) -> WorkspaceTransition:
        if self.before.record_ref() != self.before_ref or self.after.record_ref() != self.after_ref:
            raise ValueError("workspace refs do not match the workspaces they name")
        return self

    @property
    def transition_id(self) -> str:
        return self.record_ref()


def rebase_transition(
    workspace: WorkspaceIdentity,
    new_base_commit: str,
    *,
    boundary: Boundary,
    new_worktree_ref: str,
    new_patch_ref: str | None,
    at: dt.datetime,
    reason: str = "base_repository_changed",
    new_lockfile_refs: dict[str, str] | None = None,
) -> WorkspaceTransition:
    """Record rebasing a run's workspace onto `new_base_commit` (done in a sandbox by the caller).

    Before a candidate exists the run keeps generating; afterwards it falls
    back to CANDIDATE_READY with a new artifact that needs new verification
    and new approval. Rebasing while verifying (not sealable) or once a commit
    has begun raises InvalidTransitionError. Deterministic: the same inputs
    give the same record.
    """
    if new_base_commit == workspace.base_commit:
        raise ValueError(f"base commit {new_base_commit} is unchanged; there is nothing to rebase")
    if not is_sealable(boundary):
        raise InvalidTransitionError(f"a workspace cannot be rebased at {boundary}: quiesce to a boundary first")
    after_boundary = _REBASE_LANDS_ON.get(boundary, Boundary.CANDIDATE_READY)
    if boundary not in _REBASE_LANDS_ON:
        try:
            transition(boundary, after_boundary)
        except InvalidTransitionError as exc:
            raise InvalidTransitionError(f"a workspace cannot be rebased at {boundary}: {exc}") from None
    after = workspace.model_copy(
        update={
            "base_commit": new_base_commit,
            "worktree_ref": new_worktree_ref,
            "patch_ref": new_patch_ref,
            "lockfile_refs": workspace.lockfile_refs if new_lockfile_refs is None else dict(new_lockfile_refs),
            "verification_output_refs": (),
        }
    )
    after = WorkspaceIdentity.model_validate(after.model_dump())
    had_candidate = boundary is not Boundary.GENERATING
    return WorkspaceTransition(
        reason=reason,
        before=workspace,
        after=after,
        before_ref=workspace.record_ref(),
        after_ref=after.record_ref(),
        boundary_before=boundary,
        boundary_after=after_boundary,
        invalidated_artifact=workspace.patch_ref if had_candidate else None,
        requires_reverification=had_candidate,
        requires_reapproval=had_candidate,
        recorded_at=at,
    )
