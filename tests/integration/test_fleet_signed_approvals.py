"""In the live fleet every approval a run holds was signed by the approver role's key, never by a worker."""

from __future__ import annotations

from pathlib import Path

import pytest

from baton.approval_signing import verify_approval
from baton.authority_keys import TrustedKeys
from baton.checkpoints import restore
from baton.fleet import FleetConfig, run_fleet
from baton.store.factory import open_blobs, open_store

pytestmark = pytest.mark.integration


def test_every_approval_in_the_live_fleet_verifies_under_the_approver_key(tmp_path: Path) -> None:
    home = tmp_path / "home"
    summary = run_fleet(FleetConfig(runs=3, workers=2, chaos=False, home=home, timeout_s=120.0, launch_interval_s=0.2))
    assert summary.verified == 3, summary
    approvers = TrustedKeys.load(home / "authority" / "approver" / "jwks.json")
    capability_keys = TrustedKeys.load(home / "authority" / "jwks.json")
    assert not set(approvers.keys) & set(capability_keys.keys)  # the approver's key is not the capability key
    store = open_store(None, home)
    blobs = open_blobs(home, store)
    seen = 0
    try:
        for run in store.list_runs():
            for checkpoint in store.list_checkpoints(run.run_id):
                parts = restore(blobs, checkpoint).parts
                artifacts = {candidate.artifact_hash for candidate in parts.candidates}
                for approval in parts.authority.approvals:
                    verify_approval(approval, approvers, artifacts=artifacts)  # raises on unsigned or forged
                    seen += 1
    finally:
        store.close()
    # Deploys at EXTERNAL_MUTATE were issued only on these approvals (the authority refuses unsigned ones).
    assert seen > 0
