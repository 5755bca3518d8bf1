"""SIGKILL a worker while its deployment is in flight: another worker resumes, one deployment exists."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from baton.agents.releases import RELEASES
from baton.checker import check
from baton.handoff.coordinator import HandoffCoordinator, HandoffRequest
from baton.history import read_history
from baton.models import AuthorityLevel, EventType, OperationState, RunKind
from baton.placements import DEFAULT_PLACEMENTS, placement_named
from baton.runtime.launch import RunSpec, launch_run
from baton.runtime.worker import connect_targets
from baton.store.factory import open_blobs, open_store
from baton.targets.deploy_service import DEPLOYMENTS_FILE, count_side_effects, read_effects
from baton.targets.service_process import target_data_dir

from builders.live import ended_run, live_targets, wait_for, workers

pytestmark = pytest.mark.integration
RUN = "deploy-killed-1"


def test_a_killed_worker_s_deployment_is_reconciled_and_finished_elsewhere(tmp_path: Path) -> None:
    home = tmp_path / "home"
    deploy_dir = target_data_dir("deploy", home)
    local, cloud = (placement_named(DEFAULT_PLACEMENTS, name) for name in ("local-gpu-eu", "cloud-eu"))
    # Every deployment commits, then the answer is held for 3 s: the worker is killed inside that window.
    with live_targets(home, ambiguous_rate=1.0, ambiguous_delay_s=3.0):
        store = open_store(None, home)
        blobs = open_blobs(home, store)
        with workers(home, {"w1": local.name, "w2": cloud.name}, **{"boundary-pause-s": "0.1",
                                                                      "target-timeout-s": "10"}) as (supervisor, slots):
            spec = RunSpec(RUN, RunKind.DEPLOY, RELEASES["model-v7"], local, "deploy checkout",
                           {"service": "checkout"}, AuthorityLevel.EXTERNAL_MUTATE)
            launch_run(store, blobs, spec, reservation_ttl_s=10.0)

            def deployed_but_unanswered() -> str | None:
                lines = (deploy_dir / DEPLOYMENTS_FILE).read_text().splitlines() if (deploy_dir / DEPLOYMENTS_FILE).exists() else []
                prepared = [o for o in store.list_operations(RUN) if o.state is OperationState.PREPARED]
                return prepared[0].operation_id if lines and prepared else None

            in_flight = wait_for(deployed_but_unanswered, timeout_s=60, what="the deployment to commit at the service")
            assert supervisor.kill(slots["w1"])  # type: ignore[arg-type]

            deploy, corpus = connect_targets(home, timeout_s=5.0)
            coordinator = HandoffCoordinator(store, blobs, {local.name: local, cloud.name: cloud},
                                             fence_targets=(deploy, corpus), lease_ttl_s=10.0)
            outcome = coordinator.handoff(HandoffRequest(RUN, "gpu_reclaimed", source_alive=False))
            assert outcome.committed and outcome.target_placement == cloud.name, outcome

            run = ended_run(store, RUN)
        assert run.status == "verified", run.detail
        assert str(run.detail["finished_by"]).startswith("worker:w2")

        counts = count_side_effects(deploy_dir)
        assert counts["total"] == 1 and counts["duplicates"] == {}, counts
        (line,) = [json.loads(text) for text in (deploy_dir / DEPLOYMENTS_FILE).read_text().splitlines()]
        assert line["operation_id"] == in_flight and line["run_id"] == RUN

        reconciled = [e for _, e in store.list_events(run_id=RUN, event_types=[EventType.OPERATION_RECONCILED])]
        assert [(e.detail["operation_id"], e.detail["state"]) for e in reconciled] == [(in_flight, "COMMITTED")]
        assert store.get_operation(in_flight).state is OperationState.COMMITTED
        resumed = store.list_events(run_id=RUN, event_types=[EventType.RESUME_VERIFIED])
        assert len(resumed) >= 2  # first start, and the resume on the second worker

        history = [op for op in read_history(home / "history.jsonl") if op.run_id == RUN]
        acquired = [e for _, e in store.list_events(run_id=RUN, event_types=[EventType.LEASE_ACQUIRED])]
        assert check(history, store.list_operations(RUN), read_effects(deploy_dir), acquired) == []
        store.close()
