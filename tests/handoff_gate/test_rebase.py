"""A changed base repository is a recorded transition that demands re-verification and re-approval."""

from __future__ import annotations

import pytest

from baton.errors import InvalidTransitionError
from baton.identity import sha256_ref
from baton.models import Boundary
from baton.rebase import rebase_transition

from builders.records import T0, workspace

NEW_TREE = sha256_ref(b"worktree at fff0001")
NEW_PATCH = sha256_ref(b"patch P rebased")


def test_rebase_after_verification_goes_back_to_candidate_ready() -> None:
    before = workspace()
    record = rebase_transition(
        before, "fff0001", boundary=Boundary.AUTHORIZED, new_worktree_ref=NEW_TREE, new_patch_ref=NEW_PATCH, at=T0
    )
    assert record.boundary_before is Boundary.AUTHORIZED
    assert record.boundary_after is Boundary.CANDIDATE_READY
    assert record.requires_reverification and record.requires_reapproval
    assert record.invalidated_artifact == before.patch_ref
    assert record.after.base_commit == "fff0001"
    assert record.after.patch_ref == NEW_PATCH
    assert record.after.verification_output_refs == ()  # old outputs do not follow the new base
    assert record.before == before and record.before_ref == before.record_ref()
    assert record.after_ref != record.before_ref


def test_rebase_is_deterministic() -> None:
    make = lambda: rebase_transition(  # noqa: E731
        workspace(), "fff0001", boundary=Boundary.VERIFIED, new_worktree_ref=NEW_TREE, new_patch_ref=NEW_PATCH, at=T0
    )
    assert make() == make()
    assert make().transition_id == make().transition_id


def test_rebase_while_generating_needs_no_reverification() -> None:
    record = rebase_transition(
        workspace(), "fff0001", boundary=Boundary.GENERATING, new_worktree_ref=NEW_TREE, new_patch_ref=None, at=T0
    )
    assert record.boundary_after is Boundary.GENERATING
    assert not record.requires_reverification and not record.requires_reapproval
    assert record.invalidated_artifact is None


@pytest.mark.parametrize(
    "boundary", [Boundary.VERIFYING, Boundary.COMMITTING, Boundary.COMMITTED, Boundary.POSTCONDITION_VERIFIED, Boundary.FAILED]
)
def test_rebase_is_refused_mid_verification_or_once_commit_began(boundary: Boundary) -> None:
    with pytest.raises(InvalidTransitionError, match="cannot be rebased"):
        rebase_transition(workspace(), "fff0001", boundary=boundary, new_worktree_ref=NEW_TREE, new_patch_ref=NEW_PATCH, at=T0)


def test_unchanged_base_is_not_a_rebase() -> None:
    with pytest.raises(ValueError, match="unchanged"):
        rebase_transition(workspace("a1b2c3d"), "a1b2c3d", boundary=Boundary.VERIFIED, new_worktree_ref=NEW_TREE, new_patch_ref=None, at=T0)
