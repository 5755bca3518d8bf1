"""Worlds in one process reuse the targets' apps (built once, reset per world): no record crosses worlds."""

from __future__ import annotations

import json

from baton.sim import world as sim_world
from baton.sim.faults import FaultPlan
from baton.sim.runner import config_for, run_seed
from baton.sim.world import SimRecords, run_world


def test_a_seed_replays_identically_on_fresh_and_on_reused_apps() -> None:
    sim_world._APP_CACHE.clear()
    fresh = run_seed(3, 5).trail_hash  # builds the apps
    run_seed(4, 5)
    again = run_seed(3, 5).trail_hash  # the same apps, reset
    assert sim_world._APP_CACHE, "the apps were not kept for the next world"
    assert again == fresh


def test_each_world_sees_only_its_own_target_records() -> None:
    seen: dict[int, set[str]] = {}

    def capture(seed: int):
        def tamper(records: SimRecords) -> None:
            path = records.root / "deploy" / "deployments.jsonl"
            lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
            seen[seed] = {str(line.get("run_id", "")) for line in lines}
        return tamper

    for seed in (11, 12, 13):
        run_world(config_for(seed, 0, plan=FaultPlan()), before_check=capture(seed))
    for seed, run_ids in seen.items():
        assert run_ids, f"seed {seed} deployed nothing"
        assert all(run_id.startswith(f"sim{seed}-") for run_id in run_ids), (seed, run_ids)
