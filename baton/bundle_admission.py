"""Admitting a portable bundle onto a placement: integrity first, then the portability rules.

`baton.bundle` reads and writes the file format and checks everything that
is about the records themselves. Whether a checkpoint's constraints let its
state live on the receiving placement is a handoff rule
(`baton.portability`), applied here between the read and the write, so a
refused bundle writes nothing.
"""

from __future__ import annotations

from pathlib import Path

from baton.bundle import BundleLimits, ImportReport, VerifiedBundle, read_bundle, write_bundle
from baton.errors import BundlePlacementError
from baton.models import Placement
from baton.portability import constraint_violations
from baton.store.base import SqlStore
from baton.store.blobs import BlobStore


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


def verify_bundle(path: Path | str, *, placement: Placement | None, limits: BundleLimits = BundleLimits()) -> VerifiedBundle:
    """Run every check of an import without touching any store; raise a BundleError subclass on failure."""
    bundle = read_bundle(path, limits=limits)
    check_placement(bundle, placement)
    return bundle


def import_bundle(
    store: SqlStore,
    blobs: BlobStore,
    path: Path | str,
    *,
    placement: Placement | None,
    limits: BundleLimits = BundleLimits(),
) -> ImportReport:
    """Verify a bundle completely, then import it; on any failure nothing is written.

    `placement` is where the run will live; None means unknown, which only
    unconstrained checkpoints accept. Idempotent: checkpoints already stored
    with the same hash are skipped.
    """
    bundle = verify_bundle(path, placement=placement, limits=limits)
    return write_bundle(store, blobs, bundle, placement_name=None if placement is None else placement.name)
