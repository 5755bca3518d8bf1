"""The ops dashboard renders a real store's runs, and the metrics Dagster's asset exported."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from baton.metrics.export import analytics_path, export_metrics
from baton.metrics.target_effects import target_effects
from baton.scripted_run import run_scripted_research
from baton.store.factory import open_blobs, open_store

APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"
STATUSES = {"active", "verified", "failed", "escalated"}


def _seed(home: Path, *, export: bool) -> str:
    store = open_store(None, home)
    try:
        steps = run_scripted_research(store, open_blobs(home, store))
        if export:
            export_metrics(store, target_effects(home), analytics_path(home))
        return store.get_run(steps[0].checkpoint.run_id).status
    finally:
        store.close()


def test_without_an_export_the_page_says_so_and_counts_runs(baton_home: Path) -> None:
    status = _seed(baton_home, export=False)
    page = AppTest.from_file(str(APP), default_timeout=60).run()
    assert not page.exception
    assert any("No metrics yet" in info.value for info in page.info)
    metrics = {metric.label: metric.value for metric in page.metric}
    assert set(metrics) == STATUSES and metrics[status] == "1"


def test_with_an_export_the_page_shows_the_twelve_metrics(baton_home: Path) -> None:
    _seed(baton_home, export=True)
    page = AppTest.from_file(str(APP), default_timeout=60).run()
    assert not page.exception
    metrics = {metric.label: metric.value for metric in page.metric}
    shown = set(metrics) - STATUSES
    assert len(shown) == 12 and "handoff success rate" in shown
    assert metrics["checkpoint latency"].endswith(" ms")  # the scripted run sealed checkpoints
    assert metrics["handoff success rate"] == "n/a"  # no handoff happened: nothing measured, not 0%


def test_the_claims_page_without_and_with_a_generated_audit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import datetime as dt

    from baton.report.generate import write_report

    monkeypatch.setenv("BATON_EVIDENCE_REPORT", str(tmp_path / "evidence-report.json"))
    claims_page = str(APP.parent / "pages" / "1_Claims.py")
    page = AppTest.from_file(claims_page, default_timeout=60).run()
    assert not page.exception and any("No evidence report yet" in info.value for info in page.info)

    spec = tmp_path / "chapter.txt"
    spec.write_text("chapter\n")
    repo = APP.parents[1]
    findings = write_report(repo=repo, spec=spec, out=tmp_path / "evidence-report.md", only=["bench-gateway"],
                            today=dt.date(2026, 12, 2))
    page = AppTest.from_file(claims_page, default_timeout=60).run()
    assert not page.exception
    counts = {metric.label: int(metric.value) for metric in page.metric}
    assert sum(counts.values()) == len(findings)
    assert counts["unresolved"] == sum(1 for f in findings if f.verdict.value == "unresolved")
