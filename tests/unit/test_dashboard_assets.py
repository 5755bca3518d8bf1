"""The two ops roll-ups materialize into the files the dashboard reads, and their metadata links back to it."""

from __future__ import annotations

from pathlib import Path

import pytest
from dagster import instance_for_test, materialize

from assets.experiment_assets import experiment_comparison
from assets.metrics_assets import handoff_metrics
from baton.experiment.results import experiment_path, read_experiment
from baton.metrics.export import analytics_path
from baton.metrics.history import read_history
from pipelines.resources import BatonResource
from tests.unit.dashboard_seed import seed_store


def test_materializing_both_rollups_writes_the_dashboards_files(baton_home: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BATON_DASHBOARD_URL", "http://dash.example:8600")
    seed_store(baton_home, exports=0)
    config = {"ops": {"experiment_comparison": {"config": {"runs": 30, "seed": 3, "sweep": False}}}}
    # An explicit instance: without one, Dagster may reach for the state storage of an instance an
    # earlier test in this process already closed ("undefined DagsterInstance weakref").
    with instance_for_test() as instance:
        first = materialize([handoff_metrics, experiment_comparison], resources={"baton": BatonResource()},
                            run_config=config, instance=instance)
        assert first.success
        second = materialize([handoff_metrics], resources={"baton": BatonResource()}, instance=instance)
        assert second.success

    history = read_history(analytics_path(baton_home))
    assert len({row["measured_at"] for row in history}) == 2  # the second export carried the first forward
    result = read_experiment(experiment_path(baton_home))
    assert result is not None and result.meta["command"] == "baton experiment --runs 30 --seed 3"
    assert {row["runs"] for row in result.summary} == {30} and not result.sweep

    links = {}
    for event in first.get_asset_materialization_events():
        materialization = event.event_specific_data.materialization  # type: ignore[union-attr]
        links[materialization.asset_key.to_user_string()] = materialization.metadata["dashboard"].value
    assert links == {"handoff_metrics": "http://dash.example:8600",
                     "experiment_comparison": "http://dash.example:8600/Strategies"}
