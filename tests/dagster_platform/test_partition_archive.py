"""Partition hygiene at the Dagster level: finished runs past the count leave Dagster's `runs` partitions.

The discovery sensor is ticked over a real Baton store on a persistent Dagster
instance; what is left is read back from Dagster's own dynamic partitions, and
the archived runs' history from Baton's store (every checkpoint, every event,
the checkpoint chain still verifying).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from dagster import DagsterInstance, build_sensor_context, instance_for_test

from assets.partitions import RUNS_PARTITIONS_NAME
from baton.models import EventType
from baton.platform.archive import KEEP_FINISHED_ENV, KeepFinishedError, keep_finished_from
from baton.platform.run_audit import checkpoint_integrity
from baton.platform.sensor_decisions import DEFAULT_KEEP_FINISHED
from baton.store.base import SqlStore
from baton.store.blobs import BlobStore
from pipelines.resources import BatonResource
from sensors.baton_sensors import run_discovery

from .platform_support import ResearchRun


def _discover(instance: DagsterInstance, cursor: str | None, home: Path) -> str | None:
    """One discovery tick, its asset events written as the daemon writes them; the new cursor."""
    result = run_discovery(build_sensor_context(instance=instance, cursor=cursor,
                                                resources={"baton": BatonResource(home=str(home))}))
    for event in result.asset_events:
        instance.report_runless_asset_event(event)
    return result.cursor


def _partitions(instance: DagsterInstance) -> set[str]:
    return set(instance.get_dynamic_partitions(RUNS_PARTITIONS_NAME))


def test_finished_runs_past_the_count_are_archived_with_their_history_kept(
        home: Path, store: SqlStore, blobs: BlobStore, monkeypatch: pytest.MonkeyPatch) -> None:
    active = ResearchRun.launch(store, blobs)
    active.draft()
    done = [ResearchRun.launch(store, blobs) for _ in range(3)]
    for run in done:  # finished oldest first: done[-1] is the newest finished run
        run.draft()
        run.verify()
        run.finish()
    chains = {run.run_id: [c.checkpoint_hash for c in store.list_checkpoints(run.run_id)] for run in done}
    monkeypatch.setenv(KEEP_FINISHED_ENV, "10")
    with instance_for_test() as instance:
        cursor = _discover(instance, None, home)
        assert _partitions(instance) == {active.run_id, *(r.run_id for r in done)}

        monkeypatch.setenv(KEEP_FINISHED_ENV, "1")
        cursor = _discover(instance, cursor, home)
        assert _partitions(instance) == {active.run_id, done[-1].run_id}

        for run in done[:2]:  # archived from Dagster, whole in Baton's store
            assert store.get_run(run.run_id).status == "verified"
            assert [c.checkpoint_hash for c in store.list_checkpoints(run.run_id)] == chains[run.run_id]
            kinds = [e.event_type for _, e in store.list_events(run_id=run.run_id)]
            assert kinds[0] is EventType.RUN_CREATED and kinds[-1] is EventType.RUN_FINISHED
            assert checkpoint_integrity(store, blobs, run.run_id).passed

        later = ResearchRun.launch(store, blobs)  # new runs still arrive; archived ones do not come back
        _discover(instance, cursor, home)
        assert _partitions(instance) == {active.run_id, done[-1].run_id, later.run_id}
        assert _discover(instance, None, home) is not None  # even from cursor 0
        assert _partitions(instance) == {active.run_id, done[-1].run_id, later.run_id}

        monkeypatch.setenv(KEEP_FINISHED_ENV, "0")  # active runs always stay
        _discover(instance, cursor, home)
        assert _partitions(instance) == {active.run_id, later.run_id}


def test_a_bad_keep_count_fails_the_tick_clearly_and_removes_nothing(
        home: Path, store: SqlStore, blobs: BlobStore, monkeypatch: pytest.MonkeyPatch) -> None:
    done = ResearchRun.launch(store, blobs)
    done.finish()
    with instance_for_test() as instance:
        cursor = _discover(instance, None, home)
        assert _partitions(instance) == {done.run_id}
        monkeypatch.setenv(KEEP_FINISHED_ENV, "-1")
        with pytest.raises(KeepFinishedError, match=KEEP_FINISHED_ENV):
            _discover(instance, cursor, home)
        assert _partitions(instance) == {done.run_id}


@pytest.mark.parametrize("text, expected", [(None, DEFAULT_KEEP_FINISHED), ("", DEFAULT_KEEP_FINISHED),
                                            (" 25 ", 25), ("0", 0)])
def test_keep_count_parses(text: str | None, expected: int) -> None:
    assert keep_finished_from(text) == expected


@pytest.mark.parametrize("text", ["-1", "1.5", "ten", "1e3"])
def test_keep_count_rejects_what_is_not_a_whole_count(text: str) -> None:
    with pytest.raises(KeepFinishedError, match=repr(text).replace("+", r"\+").replace(".", r"\.")):
        keep_finished_from(text)
