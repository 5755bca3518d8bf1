"""In the live fleet every side effect is admitted by the target's own capability check, and a bypass is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from baton.errors import TargetRejectedError
from baton.fencing import FencingToken
from baton.fleet import FleetConfig, run_fleet
from baton.runtime.worker import connect_targets
from baton.targets.service_process import ServiceProcess, target_data_dir

from baton.targets.mutation_log import FENCE_ADVANCED

pytestmark = pytest.mark.integration


def _results(service: str, home: Path) -> list[str]:
    path = target_data_dir(service, home) / "requests.jsonl"
    results = [json.loads(line)["result"] for line in path.read_text().splitlines() if line.strip()]
    return [result for result in results if result != FENCE_ADVANCED]  # the fence's own marks, not requests


def test_fleet_targets_admit_only_capabilities_from_the_authority(tmp_path: Path) -> None:
    home = tmp_path / "home"
    summary = run_fleet(FleetConfig(runs=4, workers=2, chaos=False, home=home, timeout_s=120.0, launch_interval_s=0.2))
    assert summary.verified == 4, summary
    for service in ("deploy", "corpus"):  # the oracle: the targets' own request logs
        results = _results(service, home)
        assert results and set(results) <= {"applied", "replayed"}, (service, results)
    assert (home / "authority" / "jwks.json").exists() and list((home / "authority" / "private").glob("*.pem"))

    # A worker that goes around the gateway: the same deploy service, no capability. Refused, recorded, not applied.
    deploy = ServiceProcess.deploy(target_data_dir("deploy", home),
                                   guard=["--trust", str(home / "authority" / "jwks.json"),
                                          "--capability-operation", "deploy"])
    deploy.start()
    try:
        client, corpus = connect_targets(home, timeout_s=5.0)
        before = len(_results("deploy", home))
        with pytest.raises(TargetRejectedError) as refused:
            client.apply("op-bypass", "key-bypass", FencingToken(summary.run_status and next(iter(summary.run_status)), 99),
                         {"service": "billing", "version": "9", "artifact_hash": "sha256:" + "0" * 64})
        assert refused.value.reason == "capability:no_capability"
        assert _results("deploy", home)[before:] == ["capability:no_capability"]
        client.close()
        corpus.close()
    finally:
        deploy.stop()
