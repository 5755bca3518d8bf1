"""The resume's environment check and the gate's `requires_revalidation`: either alone marks observations for
revalidation after a move to another environment; only with both switched off are they used as recorded."""

from __future__ import annotations

from contextlib import nullcontext

import pytest

from baton.ablation import ablation_env
from baton.handoff import HandoffCoordinator, HandoffRequest, prepare_resume
from baton.models import Boundary
from baton.store.base import SqlStore
from baton.store.blobs import BlobStore

from builders.handoff import PEER, SOURCE, seed_run

BOTH = ("gate:environment_changed", "resume-environment-check")


@pytest.mark.parametrize("off", [(), BOTH[:1], BOTH[1:], BOTH], ids=["on", "gate-off", "resume-off", "both-off"])
def test_either_layer_alone_revalidates(off: tuple[str, ...], store: SqlStore, blobs: BlobStore) -> None:
    assert SOURCE.environment.environment_id != PEER.environment.environment_id
    run = seed_run(store, blobs, boundary=Boundary.AUTHORIZED)
    coordinator = HandoffCoordinator(store, blobs, {p.name: p for p in (SOURCE, PEER)}, quiesce_timeout_s=0.2)
    with ablation_env(*off) if off else nullcontext():
        outcome = coordinator.handoff(HandoffRequest(run.run_id, "gpu_reclaimed", source_alive=False))
        assert outcome.target_epoch is not None
        plan = prepare_resume(store, blobs, run.run_id, placement=PEER, epoch=outcome.target_epoch)
    assert plan.decision is not None and plan.decision.requires_revalidation is ("gate:environment_changed" not in off)
    expected = off != BOTH
    assert plan.environment_changed is expected
    assert len(plan.observations_to_revalidate) == (len(run.observations) if expected else 0)
