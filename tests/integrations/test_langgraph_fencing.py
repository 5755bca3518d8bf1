"""Two worker processes on one LangGraph thread; a handoff through Baton's coordinator fences the first.

Worker A runs the thread under its lease and pauses inside step 3. Baton's
handoff coordinator then moves the run to another placement (prepare: the
sealed checkpoint verified and the compatibility gate passed; commit: a new
epoch by compare-and-set, which fences A), and worker B, holding the new
lease, resumes the thread with `graph.invoke(None, config)` to the end. When A wakes, its save is refused
with StaleEpochError and the thread's history holds only checkpoints that the
owner of the time wrote. The oracle is what each worker process put in the
state (its own name on each observation) and reported about its own run. The
ablation runs the same two processes on LangGraph's SqliteSaver, which has no
fence: there A's late save lands in the history, which the same check sees.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from baton.handoff.coordinator import HandoffCoordinator, HandoffRequest
from baton.integrations.langgraph import BatonSaver
from baton.integrations.langgraph.platform import default_parts
from baton.ownership import Coordinator
from baton.store.factory import open_store
from baton.store.sql_blobs import SqlBlobStore

WORKER = Path(__file__).with_name("lg_fence_worker.py")
REPO = Path(__file__).resolve().parents[2]
PAUSE_AT = 3
DEADLINE_S = 180.0


def _start(tmp: Path, name: str, *args: str) -> tuple[subprocess.Popen[bytes], Path]:
    result = tmp / f"{name}.json"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, str(WORKER), *args, "--tag", name, "--result", str(result)],
                            cwd=REPO, env=env)
    return proc, result


def _wait_file(path: Path, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not path.exists():
        assert proc.poll() is None or path.exists(), f"worker exited ({proc.returncode}) before writing {path.name}"
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.05)


def _finish(proc: subprocess.Popen[bytes], result: Path) -> dict[str, Any]:
    assert proc.wait(timeout=DEADLINE_S) == 0
    return json.loads(result.read_text())


def _observations_in_history(tuples: list[Any]) -> list[list[str]]:
    return [list(t.checkpoint["channel_values"].get("observations", [])) for t in tuples]


def _handoff_scenario(tmp: Path, saver_args: list[str], handoff: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    marker, go = tmp / "a.paused", tmp / "a.go"
    a, a_result = _start(tmp, "a", *saver_args("a"), "--pause-at", str(PAUSE_AT), "--marker", str(marker),
                         "--go", str(go))
    try:
        _wait_file(marker, a)
        handoff()
        b, b_result = _start(tmp, "b", *saver_args("b"), "--resume")
        b_outcome = _finish(b, b_result)
    finally:
        go.write_text("go")
    a_outcome = _finish(a, a_result)
    return a_outcome, b_outcome


def test_fenced_worker_cannot_write_after_handoff(tmp_path: Path, store_url: str) -> None:
    thread = "thread-under-lease"
    store = open_store(store_url)
    saver = BatonSaver(store)
    run_id = saver.ensure_run(thread)
    first = Coordinator(store, name="test-launcher").grant(run_id, "worker-a", ttl_s=600)
    assert first is not None
    leases = {"a": ("worker-a", first.epoch, "langgraph-local")}
    source, target = default_parts("langgraph-local").placement, default_parts("langgraph-remote").placement
    coordinator = HandoffCoordinator(store, SqlBlobStore(store), {p.name: p for p in (source, target)})

    def handoff() -> None:
        # Worker a is paused and does not answer: the coordinator moves the run without it, which
        # fences epoch a by compare-and-set before the new owner starts.
        outcome = coordinator.handoff(HandoffRequest(run_id, "planned move of a LangGraph thread",
                                                     source_alive=False))
        assert outcome.committed, outcome.abort_reason
        assert outcome.new_owner is not None and outcome.target_epoch is not None
        leases["b"] = (outcome.new_owner, outcome.target_epoch, target.name)

    def args(name: str) -> list[str]:
        owner, epoch, placement = leases[name]
        return ["--saver", "baton", "--url", store_url, "--thread", thread, "--owner", owner,
                "--epoch", str(epoch), "--placement", placement]

    a_outcome, b_outcome = _handoff_scenario(tmp_path, args, handoff)

    assert a_outcome.get("error") == "StaleEpochError", a_outcome
    expected = [f"a:{i}" for i in range(PAUSE_AT)] + [f"b:{i}" for i in range(PAUSE_AT, 6)]
    assert b_outcome["final"]["observations"] == expected
    config = {"configurable": {"thread_id": thread}}
    history = list(saver.list(config))
    for observations in _observations_in_history(history):
        assert not any(o.startswith("a:") and int(o[2:]) >= PAUSE_AT for o in observations), observations
    latest = saver.get_tuple(config)
    assert latest is not None and latest.checkpoint["channel_values"]["observations"] == expected
    # Every Baton seal of the run is the owner's of its time: epoch a, then epoch b, never a again.
    sealed = store.list_checkpoints(run_id)
    owner_epochs = [c.owner_epoch for c in sealed]
    assert owner_epochs == sorted(owner_epochs) and set(owner_epochs) == {leases["a"][1], leases["b"][1]}
    assert store.get_run(run_id).placement == "langgraph-remote"
    assert len(sealed) == len(history)
    store.close()


def test_ablation_langgraph_sqlite_saver_lets_the_stale_worker_write(tmp_path: Path) -> None:
    path = str(tmp_path / "langgraph.sqlite")
    thread = "thread-without-fence"

    def args(name: str) -> list[str]:
        return ["--saver", "langgraph-sqlite", "--url", path, "--thread", thread, "--owner", name]

    a_outcome, b_outcome = _handoff_scenario(tmp_path, args, lambda: None)

    assert "final" in a_outcome and "final" in b_outcome  # nobody refused anything
    from langgraph.checkpoint.sqlite import SqliteSaver

    import sqlite3

    conn = sqlite3.connect(path, check_same_thread=False)
    history = list(SqliteSaver(conn).list({"configurable": {"thread_id": thread}}))
    conn.close()
    stale = [obs for obs in _observations_in_history(history)
             if any(o.startswith("a:") and int(o[2:]) >= PAUSE_AT for o in obs)]
    assert stale, "the stale worker's late checkpoint is in the history"
