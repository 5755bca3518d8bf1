"""Signed approvals: verified on bundle import (nothing written when refused) and by the authority when it issues."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path

import pytest

from baton.approval_signing import sign_approval, verify_approval
from baton.authority import AuthorityService
from baton.authority_keys import KeyRing
from baton.bundle import export_run
from baton.bundle_admission import import_bundle
from baton.checkpoints import build_checkpoint
from baton.errors import ApprovalError, AuthorityDeniedError, BundleApprovalError
from baton.identity import sha256_ref
from baton.models import Approval, AuthorityContext, AuthorityLevel, Boundary, Candidate, ResumabilityClass
from baton.store.blobs import BlobStore
from baton.store.records import Lease
from baton.store.sqlite import SqliteStore

from builders.records import T0, parts, placement

APPROVERS = KeyRing.generate()  # the approvers' keys: not the authority's capability keys
ATTACKER = KeyRing.generate()
ARTIFACT = sha256_ref(b"release notes v1")
OTHER = sha256_ref(b"release notes v2")


def approval(artifact: str = ARTIFACT, **changes: object) -> Approval:
    base = Approval(approval_id="a-1", operation="publish", artifact_hash=artifact, level=AuthorityLevel.EXTERNAL_MUTATE,
                    approved_by="editor", expires_at=T0 + dt.timedelta(hours=1))
    return base.model_copy(update=changes)


def test_a_signed_approval_verifies_and_each_fault_has_its_own_reason() -> None:
    trusted = APPROVERS.trusted()
    signed = sign_approval(approval(), APPROVERS.active)
    assert verify_approval(signed, trusted, now=T0, operation="publish", artifacts={ARTIFACT}) == signed
    cases = {
        "unsigned": approval(),
        "untrusted_approver": sign_approval(approval(), ATTACKER.active),
        "forged": signed.model_copy(update={"expires_at": T0 + dt.timedelta(days=30)}),  # altered after signing
        "retargeted": sign_approval(approval(OTHER), APPROVERS.active),
    }
    for reason, candidate in cases.items():
        with pytest.raises(ApprovalError) as refused:
            verify_approval(candidate, trusted, now=T0, operation="publish", artifacts={ARTIFACT})
        assert refused.value.reason == reason
    with pytest.raises(ApprovalError) as late:
        verify_approval(signed, trusted, now=T0 + dt.timedelta(hours=2))
    assert late.value.reason == "expired"
    with pytest.raises(ApprovalError) as other_op:
        verify_approval(signed, trusted, operation="delete")
    assert other_op.value.reason == "retargeted"


def _bundle(tmp_path: Path, granted: Approval) -> Path:
    home = tmp_path / "source"
    store, blobs = SqliteStore(home / "baton.db"), BlobStore(home / "blobs")
    try:
        artifact = blobs.put(b"release notes v1")
        assert artifact == ARTIFACT
        run_parts = parts()
        candidate = Candidate(candidate_id="c-1", kind="report", artifact_hash=artifact,
                              produced_by_release=run_parts.release.release_id, created_at=T0)
        run_parts = dataclasses.replace(
            run_parts, candidates=(candidate,),
            authority=AuthorityContext(level=AuthorityLevel.EXTERNAL_MUTATE, policy_id="p", approvals=(granted,)))
        store.create_run("run-1", run_parts.run_kind, run_parts.release.release_id, "eu-1")
        checkpoint = build_checkpoint(blobs, run_id="run-1", parts=run_parts, new_observations=(), parent=None,
                                      boundary=Boundary.AUTHORIZED, resumability=ResumabilityClass.R3,
                                      resumability_reasons=("approved",), owner_epoch=0, sealed_at=T0)
        store.append_checkpoint(checkpoint)
        out = tmp_path / "run.bundle"
        export_run(store, blobs, "run-1", out)
        return out
    finally:
        store.close()


@pytest.mark.parametrize(
    ("reason", "granted"),
    [
        ("untrusted_approver", sign_approval(approval(), ATTACKER.active)),  # forged with a key of one's own
        ("forged", sign_approval(approval(), APPROVERS.active).model_copy(update={"level": AuthorityLevel.EXTERNAL_MUTATE,
                                                                                  "approved_by": "cto"})),  # altered
        ("retargeted", sign_approval(approval(OTHER), APPROVERS.active)),  # a genuine approval of another artifact
        ("unsigned", approval()),
    ],
)
def test_a_bundle_with_a_bad_approval_imports_nothing(tmp_path: Path, reason: str, granted: Approval) -> None:
    bundle = _bundle(tmp_path, granted)
    target, target_blobs = SqliteStore(tmp_path / "target" / "baton.db"), BlobStore(tmp_path / "target" / "blobs")
    try:
        with pytest.raises(BundleApprovalError) as refused:
            import_bundle(target, target_blobs, bundle, placement=placement(), approvers=APPROVERS.trusted())
        assert refused.value.reason == reason
        assert target.list_runs() == [] and target.list_checkpoints("run-1") == []
        assert target.execute_raw("SELECT count(*) FROM checkpoints")[0][0] == 0
        assert not any((tmp_path / "target" / "blobs").rglob("*"))  # not a blob written either
    finally:
        target.close()


def test_a_bundle_with_a_genuine_approval_imports(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, sign_approval(approval(), APPROVERS.active))
    target, target_blobs = SqliteStore(tmp_path / "target" / "baton.db"), BlobStore(tmp_path / "target" / "blobs")
    try:
        report = import_bundle(target, target_blobs, bundle, placement=placement(), approvers=APPROVERS.trusted())
        assert report.imported == ("run-1/000000",)
    finally:
        target.close()


def test_the_authority_issues_only_against_a_signed_approval() -> None:
    service = AuthorityService(KeyRing.generate(), approvers=APPROVERS.trusted())
    lease = Lease(run_id="run-1", owner="w1", epoch=1, expires_at=T0 + dt.timedelta(minutes=5))

    def issue(granted: Approval) -> object:
        context = AuthorityContext(level=AuthorityLevel.EXTERNAL_MUTATE, policy_id="p", approvals=(granted,))
        return service.issue(run_id="run-1", epoch=1, operation="publish", artifact_hash=ARTIFACT,
                             level=AuthorityLevel.EXTERNAL_MUTATE, lease=lease, placement=placement(),
                             context=context, now=T0)

    assert issue(sign_approval(approval(), APPROVERS.active)).claims.artifact_hash == ARTIFACT  # type: ignore[attr-defined]
    for bad in (approval(), sign_approval(approval(), ATTACKER.active),
                sign_approval(approval(), APPROVERS.active).model_copy(update={"approved_by": "someone else"})):
        with pytest.raises(AuthorityDeniedError, match="approval"):
            issue(bad)
