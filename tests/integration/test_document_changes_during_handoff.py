"""A document changes while a research run moves: the new owner revalidates and redrafts, never reuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from baton.agents.releases import RELEASES
from baton.agents.report_format import parse_claims
from baton.checkpoints import restore
from baton.handoff.coordinator import HandoffCoordinator, HandoffRequest
from baton.identity import sha256_ref
from baton.models import AuthorityLevel, Boundary, EventType, RunKind
from baton.placements import DEFAULT_PLACEMENTS, placement_named
from baton.runtime.launch import RunSpec, launch_run
from baton.runtime.worker import connect_targets
from baton.store.factory import open_blobs, open_store
from baton.targets.corpus_service import PUBLICATIONS_FILE
from baton.targets.service_process import target_data_dir

from builders.live import ended_run, live_targets, wait_for, workers

pytestmark = pytest.mark.integration
RUN = "research-moved-1"
SOURCE = "corpus://fencing"
NEW_TEXT = "Fencing tokens now also carry the placement region. Older tokens are refused as before."


def test_a_document_changed_during_a_handoff_is_revalidated_and_its_claim_redrafted(tmp_path: Path) -> None:
    home = tmp_path / "home"
    local, cloud = (placement_named(DEFAULT_PLACEMENTS, name) for name in ("local-gpu-eu", "cloud-eu"))
    with live_targets(home):
        store = open_store(None, home)
        blobs = open_blobs(home, store)
        deploy, corpus = connect_targets(home, timeout_s=5.0)
        with workers(home, {"w1": local.name, "w2": cloud.name}, **{"boundary-pause-s": "0.5"}):
            spec = RunSpec(RUN, RunKind.RESEARCH, RELEASES["model-v7"], local, "research fencing",
                           {"topic": "fencing", "documents": ["fencing", "leases"]}, AuthorityLevel.SANDBOX_MUTATE)
            launch_run(store, blobs, spec, reservation_ttl_s=10.0)

            drafted = wait_for(
                lambda: (c := store.latest_checkpoint(RUN)) is not None
                and c.boundary in (Boundary.CANDIDATE_READY, Boundary.VERIFIED) and c,
                timeout_s=60, what="the report to be drafted on the first worker",
            )
            old = next(o for o in restore(blobs, drafted).observations if o.source == SOURCE)
            old_report = blobs.get(restore(blobs, drafted).parts.candidates[-1].artifact_hash).decode()
            assert old.record_ref() in old_report  # the first draft cites the old observation

            corpus.change_document("fencing", NEW_TEXT)  # the world moves while the run is being moved
            coordinator = HandoffCoordinator(store, blobs, {local.name: local, cloud.name: cloud},
                                             fence_targets=(deploy, corpus), lease_ttl_s=10.0, quiesce_timeout_s=5.0)
            outcome = coordinator.handoff(HandoffRequest(RUN, "scheduler_rebalance", preferred_targets=(cloud.name,)))
            assert outcome.committed and outcome.target_placement == cloud.name, outcome
            run = ended_run(store, RUN)
        assert run.status == "verified", run.detail
        assert str(run.detail["finished_by"]).startswith("worker:w2")

        # The quiesced source stopped before publishing; the new owner had to revalidate.
        assert store.list_events(run_id=RUN, event_types=[EventType.SOURCE_QUIESCED])
        assert store.list_events(run_id=RUN, event_types=[EventType.REVALIDATION_STARTED])
        changed = [e for _, e in store.list_events(run_id=RUN, event_types=[EventType.REVERIFICATION_REQUIRED])
                   if e.detail.get("source") == SOURCE]
        assert changed and "changed on revalidation" in (changed[0].reason or "")
        assert changed[0].detail["observation"] == old.record_ref()

        # What was published cites the new observation of the changed document, never the old one.
        lines = [json.loads(text) for text in (target_data_dir("corpus", home) / PUBLICATIONS_FILE).read_text().splitlines()]
        (publication,) = [line for line in lines if line["run_id"] == RUN]
        report = publication["report"]
        assert old.record_ref() not in report
        assert "fencing tokens now also carry the placement region" in report.lower()
        final = restore(blobs, store.latest_checkpoint(RUN))  # type: ignore[arg-type]
        by_ref = {o.record_ref(): o for o in final.observations}
        cited = {ref for claim in parse_claims(report) for ref in claim.cited_refs}
        fencing = [by_ref[ref] for ref in cited if by_ref[ref].source == SOURCE]
        assert fencing and all(o.content_ref == sha256_ref(NEW_TEXT.encode()) for o in fencing)
        revalidations = final.parts.state.memory["baton.revalidations"]
        assert any(r["source"] == SOURCE and r["changed"] and r["mode"] == "REVALIDATE_LIVE_STATE" for r in revalidations)
        store.close()
        deploy.close()
        corpus.close()
