"""Admitting a portable bundle onto a placement: integrity first, then the portability and approval rules.

`baton.bundle` reads and writes the file format and checks everything that
is about the records themselves. Whether a checkpoint's constraints let its
state live on the receiving placement is a handoff rule
(`baton.portability`), and whether its approvals are signed by trusted
approvers is an authority rule (`baton.approval_signing`); both are applied
here between the read and the write, so a refused bundle writes nothing.
"""

from __future__ import annotations

from pathlib import Path

from baton.approval_signing import verify_approval
from baton.authority_keys import TrustedKeys
from baton.bundle import BundleLimits, ImportReport, VerifiedBundle, read_bundle, write_bundle
from baton.checkpoints import restore
from baton.errors import ApprovalError, BundleApprovalError, BundlePlacementError
from baton.models import Placement
from baton.portability import constraint_violations
from baton.store.base import SqlStore
from baton.store.blobs import Blobs


def check_placement(bundle: VerifiedBundle, placement: Placement | None) -> None:
    """Raise BundlePlacementError unless every checkpoint's constraints admit `placement` (None: unknown)."""
    refusals: list[str] = []
    for checkpoint in bundle.checkpoints:
        found = constraint_violations(checkpoint.constraints, placement, source=bundle.sources[checkpoint.checkpoint_id])
        if found:
            refusals.append(f"{checkpoint.checkpoint_id}: {', '.join(found)}")
    if refusals:
        where = "an unspecified placement" if placement is None else f"placement {placement.name!r}"
        raise BundlePlacementError(f"bundle constraints forbid {where}: " + "; ".join(refusals))


def check_approvals(bundle: VerifiedBundle, approvers: TrustedKeys) -> None:
    """Raise BundleApprovalError unless every approval is signed by a trusted approver and bound to one of the run's artifacts.

    Expiry is not judged here: a finished run's old approvals have lapsed, and
    resuming or issuing judges them at their own time.
    """
    view = bundle.blob_view()
    for checkpoint in bundle.checkpoints:
        parts = restore(view, checkpoint).parts
        artifacts = {candidate.artifact_hash for candidate in parts.candidates}
        for approval in parts.authority.approvals:
            try:
                verify_approval(approval, approvers, artifacts=artifacts)
            except ApprovalError as exc:
                raise BundleApprovalError(f"checkpoint {checkpoint.checkpoint_id}: {exc}", reason=exc.reason) from None


def verify_bundle(
    path: Path | str,
    *,
    placement: Placement | None,
    limits: BundleLimits = BundleLimits(),
    approvers: TrustedKeys | None = None,
) -> VerifiedBundle:
    """Run every check of an import without touching any store; raise a BundleError subclass on failure.

    With `approvers`, every approval the bundle carries must verify under them (`BundleApprovalError`).
    """
    bundle = read_bundle(path, limits=limits)
    check_placement(bundle, placement)
    if approvers is not None:
        check_approvals(bundle, approvers)
    return bundle


def import_bundle(
    store: SqlStore,
    blobs: Blobs,
    path: Path | str,
    *,
    placement: Placement | None,
    limits: BundleLimits = BundleLimits(),
    approvers: TrustedKeys | None = None,
) -> ImportReport:
    """Verify a bundle completely, then import it; on any failure nothing is written.

    `placement` is where the run will live; None means unknown, which only
    unconstrained checkpoints accept. Idempotent: checkpoints already stored
    with the same hash are skipped.
    """
    bundle = verify_bundle(path, placement=placement, limits=limits, approvers=approvers)
    return write_bundle(store, blobs, bundle, placement_name=None if placement is None else placement.name)
