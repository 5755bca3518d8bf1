"""Production entry points refuse to start with an ablation set; harness-started processes start, warning loudly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from baton.ablation import ENV_VAR, Ablation, ablation_env
from baton.authority_http import AuthorityServiceProcess
from baton.targets.service_process import ServiceProcess

BATON = str(Path(sys.executable).parent / "baton")
BANNER = "PROTECTIONS SWITCHED OFF"


def run(command: list[str], home: Path, ablate: str | None) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key not in (ENV_VAR, "BATON_DATABASE_URL")}
    env["BATON_HOME"] = str(home)
    if ablate is not None:
        env[ENV_VAR] = ablate
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, cwd=home.parent)


@pytest.mark.parametrize(
    "command",
    [
        ["fleet", "--runs", "1", "--workers", "1"],
        ["demo", "--no-fleet"],
        ["platform", "--no-fleet", "--no-dashboard", "--web-port", "0"],
    ],
    ids=["fleet", "demo", "platform"],
)
def test_production_commands_refuse_any_ablation_and_touch_nothing(tmp_path: Path, command: list[str]) -> None:
    home = tmp_path / "home"
    result = run([BATON, *command], home, f"{Ablation.IDEMPOTENCY.value},gate:release_incompatible")
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"baton {command[0]} refuses to start with {ENV_VAR}=gate:release_incompatible,idempotency" in result.stderr
    assert not home.exists()  # no store, no services, no targets were created


def test_an_unknown_ablation_name_is_refused_too(tmp_path: Path) -> None:
    result = run([BATON, "demo", "--no-fleet"], tmp_path / "home", "no-such-check")
    assert result.returncode != 0 and "unknown ablation(s) no-such-check" in result.stderr


def test_a_worker_started_with_ablations_warns_before_anything_else(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "baton.runtime.worker", "--placement", "no-such-placement", "--home",
               str(tmp_path / "home"), "--worker-id", "w-ablated", "--authority-url", "http://127.0.0.1:9"]
    result = run(command, tmp_path / "home", Ablation.TARGET_FENCE.value)
    first = result.stderr.splitlines()[:3]
    assert any(f"worker w-ablated: {BANNER} ({ENV_VAR}=target-fence)" in line for line in first), result.stderr


def test_without_ablations_a_worker_prints_no_warning(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "baton.runtime.worker", "--placement", "no-such-placement", "--home",
               str(tmp_path / "home"), "--worker-id", "w-plain", "--authority-url", "http://127.0.0.1:9"]
    assert BANNER not in run(command, tmp_path / "home", None).stderr


def test_a_target_service_started_with_ablations_serves_and_warns(tmp_path: Path) -> None:
    with ablation_env(Ablation.IDEMPOTENCY.value):
        service = ServiceProcess.deploy(tmp_path / "deploy").start()
    try:
        log = (tmp_path / "deploy" / "service.log").read_text(encoding="utf-8")
        assert f"{BANNER} ({ENV_VAR}=idempotency)" in log
    finally:
        service.stop()


def test_the_authority_service_started_with_ablations_serves_and_warns(tmp_path: Path) -> None:
    with ablation_env(Ablation.APPROVAL_CHECK.value):
        service = AuthorityServiceProcess(tmp_path / "authority", f"sqlite:///{tmp_path / 'baton.db'}").start()
    try:
        log = (tmp_path / "authority" / "service.log").read_text(encoding="utf-8")
        assert f"authority service: {BANNER} ({ENV_VAR}=approval-check)" in log
    finally:
        service.stop()
