"""A browser-pool drain, through the fleet's own chaos calls, moves a mid-form browser run between
worker processes (each driving /usr/bin/chromium): its sessions are revoked, the new worker rebuilds
one from a scoped credential and finishes from the server-side draft, submitting exactly once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from baton.agents.browser_agent import BROWSER_STATE, default_answers
from baton.authority_keys import KeyRing
from baton.catalog.releases import RELEASES
from baton.catalog.seed import hosted_placements
from baton.chaos import ChaosEvent, ChaosReason
from baton.chaos_catalog import record_chaos
from baton.checkpoints import restore
from baton.models import AuthorityLevel, Boundary, EventType, RunKind
from baton.placements import DEFAULT_PLACEMENTS
from baton.runtime.dispatch import DispatchSettings, build_coordinator
from baton.runtime.fleet_chaos import moves_for, revoke_drained_sessions
from baton.runtime.launch import RunSpec, launch_run
from baton.runtime.worker import connect_targets
from baton.store.factory import open_blobs, open_store
from baton.targets.service_process import target_data_dir
from baton.targets.webapp_service import WebappClient, read_submissions, webapp_process

from builders.live import ended_run, live_targets, wait_for, workers

pytestmark = pytest.mark.integration
RUN = "browser-drained-1"
POOL, OTHER = "browser-pool-eu", "local-gpu-eu"
# Only a placement with a browser may run a browser run, so this catalog gives OTHER one as well.
CATALOG = [p.model_copy(update={"tools": (*p.tools, "browser")}) if p.name == OTHER else p for p in DEFAULT_PLACEMENTS]


def test_a_drained_pool_moves_a_mid_form_run_to_another_worker_which_submits_once(tmp_path: Path) -> None:
    home = tmp_path / "home"
    KeyRing.generate().save(home / "authority")  # the authority service loads these keys when it starts
    store = open_store(None, home)
    blobs = open_blobs(home, store)
    hosting = hosted_placements(store, CATALOG, [POOL, OTHER])
    with live_targets(home), webapp_process(target_data_dir("webapp", home),
                                            trust=home / "authority" / "jwks.json") as app:
        webapp = WebappClient(app.url, timeout_s=5.0)
        deploy, corpus = connect_targets(home, timeout_s=5.0)
        with workers(home, {"w1": POOL, "w2": OTHER}, **{"boundary-pause-s": "0.6"}):
            launch_run(store, blobs, RunSpec(RUN, RunKind.BROWSER, RELEASES["model-v7"], hosting[POOL], "sign up acme",
                                             {"account": "acme", "answers": default_answers("Acme")},
                                             AuthorityLevel.SANDBOX_MUTATE), reservation_ttl_s=30.0)

            def mid_form() -> bool:
                latest = store.latest_checkpoint(RUN)
                state = None if latest is None else restore(blobs, latest).parts.state.memory.get(BROWSER_STATE)
                return isinstance(state, dict) and int(state["next_page"]) >= 2

            wait_for(mid_form, timeout_s=120, what="page 1 to be confirmed on the browser pool")
            event = ChaosEvent(event_id="chaos-test-000", at_s=1.0, reason=ChaosReason.BROWSER_POOL_DRAINED,
                               source_placement=POOL, affected=(POOL,), preferred_targets=(OTHER,), kill_worker=False)
            (move,) = moves_for(event, {RUN: POOL}, placements=list(hosting.values()),
                                lease_owner=lambda run: store.get_lease(run).owner,
                                release_of=lambda run: RELEASES["model-v7"].release_id)
            assert move.request is not None
            changes = record_chaos(store, event, list(hosting))  # the catalog call every chaos reason makes
            assert revoke_drained_sessions(event, [RUN], webapp) >= 1
            coordinator = build_coordinator(store, blobs, hosting, (deploy, corpus, webapp),
                                            DispatchSettings(reservation_ttl_s=30.0, quiesce_timeout_s=30.0))
            outcome = coordinator.handoff(move.request)
            assert outcome.committed and outcome.target_placement == OTHER, outcome
            run = ended_run(store, RUN, timeout_s=180)
        assert run.status == "verified", run.detail
        assert str(run.detail["finished_by"]).startswith("worker:w2")
        assert len(changes) == 1  # the pool was refilled from a new image: a catalog change

        data = target_data_dir("webapp", home)
        submissions = [s for s in read_submissions(data) if s["run_id"] == RUN]
        assert len(submissions) == 1
        lines = [json.loads(x) for x in (data / "sessions.jsonl").read_text().splitlines()]
        revoked = {x["session_id"] for x in lines if x.get("revoked") and "drained" in x["reason"]}
        issued = {x["session_id"]: x for x in lines if not x.get("revoked") and x.get("run_id") == RUN}
        assert revoked and all(issued[s]["epoch"] < submissions[0]["epoch"] for s in revoked)
        chosen = [e for _, e in store.list_events(run_id=RUN, event_types=[EventType.BROWSER_RESUME_CHOSEN])]
        after = [e for e in chosen if e.source_placement == OTHER]
        assert after and after[0].detail["resume_class"] == "RECONSTRUCT_SESSION"
        assert after[0].detail["confirmed_version"] == after[0].detail["server_version"] >= 1
        quiesced = store.list_events(run_id=RUN, event_types=[EventType.SOURCE_QUIESCED])
        assert quiesced and f"at {Boundary.GENERATING.value}" in str(quiesced[-1][1].detail["note"])  # mid-form
        webapp.close()
        deploy.close()
        corpus.close()
    store.close()
