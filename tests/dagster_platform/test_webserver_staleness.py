"""Through GraphQL on a running dagster-webserver: a new candidate turns its run's evidence STALE; reverification makes it FRESH."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from dagster import DagsterInstance, build_sensor_context


from pipelines.definitions import defs
from pipelines.resources import BatonResource
from sensors.baton_sensors import run_discovery

from .platform_support import ResearchRun

REPO = Path(__file__).resolve().parents[2]
QUERY = """query Stale($pk: String!) { assetNodes(assetKeys: [{path: ["verifier_evidence"]}]) {
  staleStatus(partition: $pk) staleCauses(partition: $pk) { key { path } partitionKey category reason } } }"""

pytestmark = pytest.mark.integration


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _graphql(port: int, query: str, variables: dict) -> dict:
    body = json.dumps({"query": query, "variables": variables}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/graphql", data=body,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


def _status(port: int, pk: str) -> tuple[str, list[dict]]:
    (node,) = _graphql(port, QUERY, {"pk": pk})["data"]["assetNodes"]
    return node["staleStatus"], node["staleCauses"]


def _tick(instance: DagsterInstance, cursor: str | None, home: Path) -> str:
    result = run_discovery(build_sensor_context(instance=instance, cursor=cursor,
                                                resources={"baton": BatonResource(home=str(home))}))
    for event in result.asset_events:  # what the daemon writes after the tick
        instance.report_runless_asset_event(event)
    return str(result.cursor)


def test_graphql_staleness_follows_the_candidate(home, store, blobs, tmp_path, monkeypatch):
    dagster_home = tmp_path / "dagster-home"
    dagster_home.mkdir()
    shutil.copy(REPO / "dagster.yaml", dagster_home / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(dagster_home))
    port = _free_port()
    env = {**os.environ, "DAGSTER_HOME": str(dagster_home), "BATON_HOME": str(home)}
    server = subprocess.Popen(
        [str(Path(sys.executable).with_name("dagster-webserver")), "-w", "workspace.yaml", "-h", "127.0.0.1",
         "-p", str(port)], cwd=REPO, env=env, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=(tmp_path / "webserver.log").open("wb"))
    try:
        run = ResearchRun.launch(store, blobs)
        run.draft()
        run.verify()
        with DagsterInstance.get() as instance:
            cursor = _tick(instance, None, home)
            deadline = time.monotonic() + 120
            while True:
                try:
                    status = _status(port, run.run_id)
                    break
                except (OSError, KeyError, TypeError):
                    if time.monotonic() > deadline:
                        raise AssertionError((tmp_path / "webserver.log").read_text()[-3000:]) from None
                    time.sleep(0.5)
            assert status[0] == "FRESH"
            run.draft()
            _tick(instance, cursor, home)
            status, causes = _status(port, run.run_id)
            assert status == "STALE"
            assert any(c["key"]["path"] == ["candidates"] and c["partitionKey"] == run.run_id for c in causes)
            result = defs.resolve_job_def("reverification_job").execute_in_process(
                instance=instance, partition_key=run.run_id, resources={"baton": BatonResource(home=str(home))})
            assert result.success
            assert _status(port, run.run_id) == ("FRESH", [])
    finally:
        os.killpg(server.pid, signal.SIGINT)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
