"""The targets' origin record: where each admitted mutation came from, as the process's starter named it.

The process that starts a worker (Baton's supervisor, a control's scheduler) puts the placement in the
worker's environment; the shared target client sends it as a header; the target writes it to
`origins.jsonl`, guarded or not (null without the header). Read back from the target's own file.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from baton.agents.coding_workspace import Workspace, diff_against, make_patch
from baton.fencing import FencingToken
from baton.identity import sha256_ref
from baton.runtime.supervisor import Supervisor
from baton.targets import deploy_service, git_remote_service, webapp_service
from baton.targets.deploy_service import DEPLOYMENTS_FILE, DeployClient
from baton.targets.http_server import ORIGIN_ENV, ORIGIN_HEADER, ORIGINS_FILE, PRESENTED_FILE
from baton.targets.mutation_log import REQUESTS_FILE

ARTIFACT = sha256_ref(b"checkout build 1.4.2")
BODY = {"service": "checkout", "version": "1.4.2", "artifact_hash": ARTIFACT}


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def _headers(op: str, run: str = "run-1", epoch: int = 1, **extra: str) -> dict[str, str]:
    return {"X-Operation-Id": op, "Idempotency-Key": f"key-{op}", "X-Fencing-Run": run,
            "X-Fencing-Epoch": str(epoch), **extra}


def test_the_shared_client_names_the_placement_its_starter_set_and_nothing_without_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[httpx.Headers] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers)
        return httpx.Response(201, json={"status": "applied", "record": {}})

    monkeypatch.setenv(ORIGIN_ENV, "cloud-eu")
    with DeployClient("http://deploy.test", transport=httpx.MockTransport(answer)) as client:
        client.apply("op-1", "k-1", FencingToken("run-1", 1), BODY)
    monkeypatch.delenv(ORIGIN_ENV)
    with DeployClient("http://deploy.test", transport=httpx.MockTransport(answer)) as client:
        client.apply("op-2", "k-2", FencingToken("run-1", 1), BODY)
    assert seen[0].get(ORIGIN_HEADER) == "cloud-eu"
    assert ORIGIN_HEADER not in seen[1]


def test_an_unguarded_deployment_records_its_origin_and_one_without_the_header_records_null(tmp_path: Path) -> None:
    client = TestClient(deploy_service.create_app(tmp_path))
    assert client.post("/deployments", json=BODY, headers=_headers("op-1", **{ORIGIN_HEADER: "cloud-eu"})
                       ).status_code == 201
    assert client.post("/deployments", json={**BODY, "version": "1.4.3"}, headers=_headers("op-2")).status_code == 201
    origins = _lines(tmp_path / ORIGINS_FILE)
    assert [(o["operation_id"], o["run_id"], o["epoch"], o["origin"]) for o in origins] == [
        ("op-1", "run-1", 1, "cloud-eu"), ("op-2", "run-1", 1, None)]
    assert all(o["at"] for o in origins)
    assert not (tmp_path / PRESENTED_FILE).exists()  # no guard, no capability: only the origin says where from
    assert len(_lines(tmp_path / DEPLOYMENTS_FILE)) == 2


def test_a_fenced_request_records_no_origin(tmp_path: Path) -> None:
    client = TestClient(deploy_service.create_app(tmp_path))
    assert client.post("/fence", json={"run_id": "run-1", "epoch": 3}).status_code == 200
    refused = client.post("/deployments", json=BODY, headers=_headers("op-1", epoch=2, **{ORIGIN_HEADER: "cloud-eu"}))
    assert refused.status_code == 409 and refused.json()["error"] == "fenced"
    assert _lines(tmp_path / ORIGINS_FILE) == []


@pytest.mark.parametrize("origin", ["cloud eu", "../cloud-eu", "-cloud", "x" * 200, "cloud-eu;rm"])
def test_a_malformed_origin_header_is_refused_before_anything_is_recorded(tmp_path: Path, origin: str) -> None:
    deploy = TestClient(deploy_service.create_app(tmp_path / "deploy"))
    refused = deploy.post("/deployments", json=BODY, headers=_headers("op-1", **{ORIGIN_HEADER: origin}))
    assert refused.status_code == 400 and refused.json()["error"] == "bad_headers"
    assert ORIGIN_HEADER in refused.json()["message"]
    for name in (ORIGINS_FILE, DEPLOYMENTS_FILE, REQUESTS_FILE):
        assert _lines(tmp_path / "deploy" / name) == []
    webapp = TestClient(webapp_service.create_app(tmp_path / "webapp"))
    submission = {"draft_id": "d1", "version": 1, "submission_hash": "sha256:" + "0" * 64}
    refused = webapp.post("/submissions", json=submission, headers=_headers("op-1", **{ORIGIN_HEADER: origin}))
    assert refused.status_code == 400 and refused.json()["error"] == "bad_headers"
    assert _lines(tmp_path / "webapp" / REQUESTS_FILE) == []
    git = TestClient(git_remote_service.create_app(tmp_path / "git", repositories=("calc",)))
    push = {"repository": "calc", "branch": "main", "base_commit": "0" * 40, "patch": "p",
            "patch_hash": "sha256:" + "0" * 64, "message": "m"}
    refused = git.post("/pushes", json=push, headers=_headers("op-1", **{ORIGIN_HEADER: origin}))
    assert refused.status_code == 400 and refused.json()["error"] == "bad_headers"
    assert _lines(tmp_path / "git" / REQUESTS_FILE) == []


def test_a_push_records_its_origin(tmp_path: Path) -> None:
    data = tmp_path / "git"
    git = TestClient(git_remote_service.create_app(data, repositories=("calc",)))
    bare = git_remote_service.repository_path(data, "calc")
    base = subprocess.run(["git", f"--git-dir={bare}", "rev-parse", "main"], capture_output=True, text=True,
                          check=True).stdout.strip()
    workspace = Workspace(tmp_path / "ws")
    workspace.clone(str(bare))
    with workspace.sandbox("edit", base) as tree:
        path = tree / "calc" / "stats.py"
        path.write_text(path.read_text() + "\n# touched\n")
        patch = make_patch(base, diff_against(tree, base))
    body = {"repository": "calc", "branch": "main", "base_commit": base, "patch": patch.decode(),
            "patch_hash": sha256_ref(patch), "message": "touch"}
    assert git.post("/pushes", json=body, headers=_headers("op-1", **{ORIGIN_HEADER: "cloud-us"})).status_code == 201
    (origin,) = _lines(data / ORIGINS_FILE)
    assert (origin["operation_id"], origin["origin"]) == ("op-1", "cloud-us")


def test_the_supervisor_names_each_workers_placement_in_its_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    started: list[dict[str, str]] = []

    class Recorded:
        pid = 1

        def __init__(self, command: list[str], **options: Any) -> None:
            started.append(options["env"])

        def poll(self) -> int:
            return 0

    monkeypatch.setenv(ORIGIN_ENV, "somewhere-else")  # the supervisor's own environment does not leak through
    monkeypatch.setattr(subprocess, "Popen", Recorded)
    supervisor = Supervisor(home=tmp_path, log_dir=tmp_path / "logs")
    supervisor.start(supervisor.add("w1", "cloud-eu"))
    supervisor.start(supervisor.add("w2", "local-gpu-eu"))
    assert [env[ORIGIN_ENV] for env in started] == ["cloud-eu", "local-gpu-eu"]
