"""SIGKILL the process doing a move at every kill point; the run converges (SQLite and PostgreSQL).

A deploy run starts on a worker of `local-gpu-eu`. Once the deploy target's
own record file holds its deployment, a coordinator process moves the run
(source alive, so it quiesces) to `cloud-eu`, where a second worker waits.
At one named point (`baton.fault_points`) the process taking the step sends
itself SIGKILL: the coordinator for prepare and commit, the adopting worker
for adopt, restore and the first resumed checkpoint. Then `baton recover`
(the CLI, a separate process) finishes or undoes the half-done move, the dead
worker's slot is restarted, and the run must end.

Oracles: the deploy target's `deployments.jsonl` (effects per logical
operation and per idempotency key), the workers' JSONL history through the
invariant checker, and one lease grant per epoch. Each result is printed and,
with BATON_KILL_POINT_REPORT=<file>, appended to that file as a JSON line
(`tests/crash/kill_point_table.py` turns it into docs/kill-points.md's table).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest

from baton.catalog.releases import RELEASES
from baton.checker import check
from baton.handoff.recovery import find_half_done
from baton.history import read_history
from baton.fault_points import KILL_POINT_ENV, MARK_ENV, KillPoint
from baton.models import AuthorityLevel, EventType, RunKind
from baton.placements import DEFAULT_PLACEMENTS, placement_named
from baton.runtime.launch import RunSpec, launch_run
from baton.store.factory import open_blobs, open_store
from baton.targets.deploy_service import DEPLOYMENTS_FILE, read_effects
from baton.targets.service_process import target_data_dir

from builders.fixtures import Backend
from builders.live import ended_run, live_targets, wait_for, workers

pytestmark = pytest.mark.integration

RUN = "deploy-crash-1"
MOVER = Path(__file__).with_name("mover.py")
BATON = str(Path(sys.executable).parent / "baton")
REPORT_ENV = "BATON_KILL_POINT_REPORT"
COORDINATOR_POINTS = (KillPoint.PREPARE_REQUESTED, KillPoint.PREPARE_RESERVED, KillPoint.COMMIT_TRANSFERRED)
WORKER_POINTS = (KillPoint.ADOPT_CLAIMED, KillPoint.RESTORE_STARTED, KillPoint.CONFIRM_SEALED)


@dataclass(frozen=True)
class CrashResult:
    """One row of the kill-point table."""

    point: str
    backend: str
    killed: str
    recovery: list[str]
    second_recovery: int
    status: str
    finished_by: str
    final_placement: str
    epochs: list[int]
    owners: list[str]
    effects_total: int
    effects_per_operation: dict[str, int]
    effects_per_key: dict[str, int]
    kill_to_end_s: float
    test_s: float


def target_records(home: Path) -> list[dict[str, object]]:
    """The deploy target's own record file, line by line (the oracle; no Baton table is read)."""
    path = target_data_dir("deploy", home) / DEPLOYMENTS_FILE
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def _recover(home: Path, url: str) -> list[dict[str, object]]:
    done = subprocess.run([BATON, "recover", "--home", str(home), "--database-url", url, "--prepare-deadline", "1",
                           "--json"], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def crash_at(point: KillPoint, backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CrashResult:
    started = time.monotonic()
    home = tmp_path / "home"
    mark = tmp_path / "killed.mark"
    local, cloud = (placement_named(DEFAULT_PLACEMENTS, name) for name in ("local-gpu-eu", "cloud-eu"))
    kill_env = {KILL_POINT_ENV: point.value, MARK_ENV: str(mark)}
    with live_targets(home):
        store = open_store(backend.url, home)
        blobs = open_blobs(home, store)
        options = {"boundary-pause-s": "1.0", "target-timeout-s": "10"}
        with workers(home, {"w1": local.name}, database_url=backend.url, **options) as (supervisor, slots):
            w2 = supervisor.add("w2", cloud.name)
            with monkeypatch.context() as env:  # only this worker process carries the armed point
                if point in WORKER_POINTS:
                    for name, value in kill_env.items():
                        env.setenv(name, value)
                supervisor.start(w2)
            ready = tmp_path / "mover.ready"
            mover_env = {**os.environ, **(kill_env if point in COORDINATOR_POINTS else {})}
            mover = subprocess.Popen([sys.executable, str(MOVER), "--home", str(home), "--database-url", backend.url,
                                      "--run", RUN, "--target", cloud.name, "--ready", str(ready)], env=mover_env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            # The run starts only once the coordinator is polling the target's file, so the move is never late.
            wait_for(lambda: ready.exists() or mover.poll() is not None, timeout_s=120, what="the mover to start")
            spec = RunSpec(RUN, RunKind.DEPLOY, RELEASES["model-v7"], local, "deploy checkout",
                           {"service": "checkout"}, AuthorityLevel.EXTERNAL_MUTATE)
            launch_run(store, blobs, spec, reservation_ttl_s=10.0)
            out, err = mover.communicate(timeout=180)
            if point in COORDINATOR_POINTS:
                assert mover.returncode == -signal.SIGKILL, (mover.returncode, out, err)
            else:
                assert mover.returncode == 0 and json.loads(out)["status"] == "committed", (out, err)
                wait_for(lambda: w2.process is not None and w2.process.poll() is not None, timeout_s=120,
                         what="the adopting worker to reach the kill point")
                assert w2.process is not None and w2.process.returncode == -signal.SIGKILL
            killed = mark.read_text().split()[0]
            assert killed == point.value
            killed_at = time.monotonic()

            if point is not KillPoint.COMMIT_TRANSFERRED:  # the half-done move becomes visible to recovery
                wait_for(lambda: find_half_done(store, prepare_deadline_s=1) or None, timeout_s=60,
                         what="the half-done move to be recognised", poll_s=0.2)
            recovered = _recover(home, backend.url)
            again = _recover(home, backend.url)  # idempotent: nothing left to do
            if point in WORKER_POINTS:
                supervisor.start(w2)  # the slot's next incarnation (the mark is taken: it does not die again)
            run = ended_run(store, RUN, timeout_s=180)
            kill_to_end = time.monotonic() - killed_at
        grants = [e for _, e in store.list_events(run_id=RUN, event_types=[EventType.LEASE_ACQUIRED])]
        operations = store.list_operations(RUN)
        final_placement = store.get_run(RUN).placement or ""
        store.close()

    records = [r for r in target_records(home) if r["run_id"] == RUN]
    history = [op for op in read_history(home / "history.jsonl") if op.run_id == RUN]
    violations = check(history, operations, read_effects(target_data_dir("deploy", home)), grants)
    assert violations == [], violations
    result = CrashResult(
        point=point.value, backend=backend.name, killed=killed,
        recovery=[f"{r['stage']}: {r['action']} (epoch {r['epoch_before']} -> {r['epoch_after']})" for r in recovered],
        second_recovery=len(again), status=run.status, finished_by=str(run.detail.get("finished_by", "")),
        final_placement=final_placement,
        epochs=[int(e.target_epoch or 0) for e in grants], owners=[str(e.detail.get("owner")) for e in grants],
        effects_total=len(records),
        effects_per_operation=dict(Counter(f"{r['run_id']}/deploy {r['service']}" for r in records)),
        effects_per_key=dict(Counter(str(r["idempotency_key"]) for r in records)),
        kill_to_end_s=round(kill_to_end, 1), test_s=round(time.monotonic() - started, 1),
    )
    report = os.environ.get(REPORT_ENV)
    if report:
        with open(report, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(asdict(result)) + "\n")
    print(f"\n{json.dumps(asdict(result))}")
    return result


@pytest.mark.parametrize("point", [*COORDINATOR_POINTS, *WORKER_POINTS], ids=lambda p: p.value)
def test_a_move_killed_at_each_point_converges(
    point: KillPoint, backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = crash_at(point, backend, tmp_path, monkeypatch)
    # The run ends, verified, finished by one worker.
    assert result.status == "verified" and result.finished_by.startswith("worker:"), result
    # One owner per epoch, epochs strictly increasing (one grant per epoch).
    assert result.epochs == sorted(set(result.epochs)), result
    # At most one effect per logical operation, from the target's own file (the run deploys once: exactly one).
    assert result.effects_total == 1 and set(result.effects_per_operation.values()) == {1}, result
    assert set(result.effects_per_key.values()) == {1}, result
    assert result.second_recovery == 0, result  # a second `baton recover` finds nothing to do
    if point in (KillPoint.PREPARE_REQUESTED, KillPoint.PREPARE_RESERVED):
        assert result.recovery == [r for r in result.recovery if r.startswith("prepared: aborted")] and result.recovery
        assert result.final_placement == "local-gpu-eu" and result.finished_by.startswith("worker:w1.")
    elif point is KillPoint.COMMIT_TRANSFERRED:
        assert result.final_placement == "cloud-eu" and result.finished_by.startswith("worker:w2.0")
    else:
        assert [r.split(":")[0] for r in result.recovery] == ["adopted"], result
        assert result.final_placement == "cloud-eu" and result.finished_by.startswith("worker:w2.1"), result
