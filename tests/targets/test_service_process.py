"""Starting, killing and failing to start a service subprocess."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from baton.targets.service_process import ServiceProcess, ServiceStartError

pytestmark = pytest.mark.integration


def test_kill_ends_the_process_and_the_port(tmp_path: Path) -> None:
    service = ServiceProcess.deploy(tmp_path / "deploy").start()
    assert service.running and service.pid is not None
    assert httpx.get(service.url + "/health").json()["service"] == "deploy"
    service.kill()
    assert not service.running
    with pytest.raises(httpx.TransportError):
        httpx.get(service.url + "/health", timeout=1.0)


def test_a_service_that_cannot_start_is_reported(tmp_path: Path) -> None:
    broken = ServiceProcess("baton.targets.deploy_service", tmp_path / "x", ["--no-such-option"])
    with pytest.raises(ServiceStartError):
        broken.start(timeout_s=20)


def test_records_live_under_baton_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from baton.targets.service_process import target_data_dir

    monkeypatch.setenv("BATON_HOME", str(tmp_path))
    assert target_data_dir("deploy") == tmp_path / "targets" / "deploy"
    assert target_data_dir("corpus", "/elsewhere") == Path("/elsewhere/targets/corpus")
