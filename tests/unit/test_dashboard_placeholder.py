"""The placeholder dashboard page renders the runs of a real store by status."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from baton.scripted_run import run_scripted_research
from baton.store.factory import open_blobs, open_store

APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"


def test_the_page_counts_the_stores_runs_by_status(baton_home: Path) -> None:
    store = open_store(None, baton_home)
    try:
        steps = run_scripted_research(store, open_blobs(baton_home, store))
        status = store.get_run(steps[0].checkpoint.run_id).status
    finally:
        store.close()
    page = AppTest.from_file(str(APP), default_timeout=60).run()
    assert not page.exception
    metrics = {metric.label: metric.value for metric in page.metric}
    assert metrics[status] == "1"
    assert sum(int(value) for value in metrics.values()) == 1
