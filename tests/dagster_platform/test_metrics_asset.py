"""The `handoff_metrics` asset materialized by Dagster over a real store, read back as the dashboard reads it."""

from __future__ import annotations

from pathlib import Path

import duckdb
from dagster import instance_for_test, materialize

from assets.metrics_assets import handoff_metrics
from baton.metrics.export import analytics_path
from baton.scripted_run import run_scripted_research
from baton.store.base import SqlStore
from baton.store.blobs import BlobStore
from pipelines.resources import BatonResource


def test_materializing_the_asset_writes_every_metric_for_the_dashboard(home: Path, store: SqlStore,
                                                                      blobs: BlobStore) -> None:
    steps = run_scripted_research(store, blobs)
    with instance_for_test() as instance:
        result = materialize([handoff_metrics], resources={"baton": BatonResource(home=str(home))}, instance=instance)
    assert result.success
    with duckdb.connect(str(analytics_path(home)), read_only=True) as con:
        names = [row[0] for row in con.execute("SELECT name FROM handoff_metrics").fetchall()]
        latency = con.execute("SELECT count FROM handoff_metrics WHERE name = 'checkpoint latency'").fetchone()
        finished = con.execute("SELECT sum(finished) FROM verified_success").fetchone()
    assert len(names) == 12 and "handoff success rate" in names
    assert latency is not None and latency[0] == len(steps)
    with store._tx(write=False) as tx:  # the oracle: runs that finished, by plain SQL
        ended = tx.one("SELECT count(DISTINCT run_id) FROM events WHERE event_type = 'run_finished'", ())
    assert finished is not None and finished[0] == ended[0]
