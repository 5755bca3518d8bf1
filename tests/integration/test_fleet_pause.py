"""A worker frozen with SIGSTOP past its lease, its runs taken over, then woken: the targets refuse it.

Judged from the targets' own files, read here with `json` (not through the
fleet's summary code): a `fenced` line in some target's `requests.jsonl` for
a run the frozen worker held, at an epoch below the one the run ended on,
and at most one effect per run over every target's effect file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from baton.cli.fleet_cmd import fleet_ok
from baton.fleet import FleetConfig, run_fleet
from baton.runtime.fleet_summary import excess_effects
from baton.targets import corpus_service, deploy_service
from baton.store.factory import open_store

pytestmark = pytest.mark.integration

EFFECT_FILES = {"deploy": "deployments.jsonl", "corpus": "publications.jsonl", "git": "pushes.jsonl",
                "webapp": "submissions.jsonl"}


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()] \
        if path.exists() else []


def test_a_frozen_worker_woken_after_its_runs_moved_is_refused_by_the_targets_fence(tmp_path: Path) -> None:
    home = tmp_path / "home"
    summary = run_fleet(FleetConfig(runs=4, workers=2, pause_worker=True, seed=3, home=home, timeout_s=240.0,
                                    boundary_pause_s=0.3, launch_interval_s=0.3))
    assert summary.pause is not None and summary.pause["phase"] == "woken", summary.pause
    assert summary.pause["runs_moved_before_wake"] is True
    held = set(summary.pause["held_runs"])  # type: ignore[arg-type]
    assert held

    fenced = [line for target in EFFECT_FILES for line in _lines(home / "targets" / target / "requests.jsonl")
              if line["result"] == "fenced"]
    assert fenced, "no target recorded a fenced request"
    store = open_store(None, home)
    try:
        for line in fenced:
            assert line["run_id"] in held
            assert int(line["epoch"]) < store.get_lease(str(line["run_id"])).epoch  # it really was stale
    finally:
        store.close()
    per_run = Counter(str(line["run_id"]) for target, name in EFFECT_FILES.items()
                      for line in _lines(home / "targets" / target / name))
    assert per_run and max(per_run.values()) == 1  # no run did anything twice, anywhere

    assert summary.stale_worker_rejections == len(fenced) and summary.stale_findings == []
    assert summary.active == 0 and summary.timed_out == [] and summary.oracle_failures == []
    assert summary.duplicate_side_effects == 0 and summary.excess_effects == {}

    # The same oracle fails the fleet once a target's file shows a second effect of a run, under a new key.
    _tamper_second_effect(home)
    store = open_store(None, home)
    try:
        runs = [store.get_run(run_id) for run_id in summary.run_status]
        effects = {"deploy": deploy_service.read_effects(home / "targets" / "deploy"),
                   "corpus": corpus_service.read_effects(home / "targets" / "corpus")}
    finally:
        store.close()
    excess = excess_effects(runs, effects)
    assert len(excess) == 1
    assert not fleet_ok(summary.model_copy(update={"excess_effects": excess}))


def _tamper_second_effect(home: Path) -> None:
    """Append to a target's file a copy of its first effect under a new key (what a bug would do)."""
    path = next(p for target in ("corpus", "deploy") if _lines(p := home / "targets" / target / EFFECT_FILES[target]))
    first = _lines(path)[0]
    extra = {**first, "seq": len(_lines(path)) + 1, "idempotency_key": "tampered-key", "operation_id": "op-tampered"}
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(extra) + "\n")


def _reach(point: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    code = f"from baton import fault_points; fault_points.reached({point!r}); print('passed')"
    return subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=60)


def test_one_point_can_be_armed_to_kill_and_an_unknown_name_is_refused(tmp_path: Path) -> None:
    mark = tmp_path / "mark"
    killed = _reach("before_send", {"BATON_KILL_POINT": "before_send", "BATON_KILL_POINT_MARK": str(mark)})
    assert killed.returncode == -9 and mark.read_text().split()[0] == "before_send"
    again = _reach("before_send", {"BATON_KILL_POINT": "before_send", "BATON_KILL_POINT_MARK": str(mark)})
    assert again.returncode == 0 and "passed" in again.stdout  # once per mark
    bogus = _reach("before_send", {"BATON_KILL_POINT": "befor_send"})
    assert bogus.returncode != 0 and "unknown fault point 'befor_send'" in bogus.stderr
    assert "prepare.requested" in bogus.stderr  # the message lists the known names
