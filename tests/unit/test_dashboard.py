"""Every dashboard page under Streamlit's AppTest: on an empty store it says what to run; on data it shows it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from baton.metrics.export import analytics_path
from baton.metrics.links import dagster_partition_url
from baton.experiment.results import experiment_path, read_experiment
from tests.unit.dashboard_seed import MOVED_REASON, seed_store, write_real_experiment

DASHBOARD = Path(__file__).resolve().parents[2] / "dashboard"
PAGES = {
    "headline": DASHBOARD / "app.py",
    "verified success": DASHBOARD / "pages" / "1_Verified_success.py",
    "strategies": DASHBOARD / "pages" / "2_Strategies.py",
    "timeline": DASHBOARD / "pages" / "3_Run_timeline.py",
    "faults": DASHBOARD / "pages" / "4_Fault_matrix.py",
    "fleet": DASHBOARD / "pages" / "5_Live_fleet.py",
}
EMPTY_SAYS = {
    "headline": ["No metrics yet", "No runs in this store yet"],
    "verified success": ["No metrics yet", "No strategy experiment yet"],
    "strategies": ["No strategy experiment yet"],
    "timeline": ["No runs in this store yet"],
    "faults": ["No fault matrix yet"],
    "fleet": ["No runs in this store yet"],
}


def _run(page: str) -> AppTest:
    app = AppTest.from_file(str(PAGES[page]), default_timeout=90).run()
    assert not app.exception, app.exception
    return app


def _charts(app: AppTest) -> int:
    return len(app.get("plotly_chart"))


@pytest.fixture
def empty_home(baton_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BATON_FAULT_MATRIX", str(tmp_path / "no-fault-matrix.json"))
    return baton_home


@pytest.mark.parametrize("page", sorted(PAGES))
def test_on_an_empty_store_every_page_says_what_to_run(empty_home: Path, page: str) -> None:
    app = _run(page)
    said = " ".join(info.value for info in app.info)
    for expected in EMPTY_SAYS[page]:
        assert expected in said
    assert _charts(app) == 0


@pytest.fixture(scope="module")
def experiment_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real `baton experiment --runs 60 --seed 7 --sweep` file for this module (17a's engine and writer)."""
    path = tmp_path_factory.mktemp("experiment") / "experiment.duckdb"
    write_real_experiment(path, runs=60, sweep=True)
    return path


@pytest.fixture
def seeded(baton_home: Path, experiment_file: Path) -> str:
    run_id = seed_store(baton_home)
    experiment_path(baton_home).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(experiment_file, experiment_path(baton_home))
    return run_id


def test_headline_shows_the_twelve_metrics_their_trend_and_the_handoff(seeded: str) -> None:
    app = _run("headline")
    metrics = {metric.label: metric.value for metric in app.metric}
    assert len([label for label in metrics if not label.startswith("handoffs ")]) == 12
    assert metrics["handoff success rate"] == "100.0%"  # the crafted move committed and resumed verified
    assert metrics["handoffs requested"] == "1" and metrics["handoffs committed"] == "1"
    assert _charts(app) == 1  # the trend over the two exports


def test_headline_filters_select_handoffs_by_reason_and_class(seeded: str) -> None:
    app = _run("headline")
    app.sidebar.multiselect(key="filter_reason").set_value([MOVED_REASON]).run()
    assert {m.label: m.value for m in app.metric}["handoffs requested"] == "1"
    app.sidebar.multiselect(key="filter_class").set_value(["PHYSICAL"]).run()
    assert {m.label: m.value for m in app.metric}["handoffs requested"] == "1"
    assert app.sidebar.multiselect(key="filter_class").options == ["PHYSICAL"]


def test_verified_success_live_and_simulated(seeded: str) -> None:
    app = _run("verified success")
    assert _charts(app) == 2
    live = app.dataframe[0].value
    assert set(live["handoff"]) == {"with handoff"} and set(live["migration_class"]) == {"PHYSICAL"}
    assert int(live["verified"].sum()) == 1
    assert app.selectbox(key="success_strategy").value == "baton"


def test_strategies_page_draws_every_chart_and_names_where_a_simpler_strategy_wins(
        seeded: str, baton_home: Path) -> None:
    app = _run("strategies")
    assert _charts(app) == 4
    result = read_experiment(experiment_path(baton_home))
    assert result is not None
    assert {row["strategy"] for row in result.summary} <= set(app.dataframe[0].value["strategy"])
    others = [c for c in result.sweep if c["winner"] and c["strategy"] != "baton"]
    text = " ".join(m.value for m in app.markdown)
    if others:
        assert f"A simpler strategy wins {len(others)} of 16 cells" in text
        for cell in others:
            assert f"{cell['strategy']} at length {cell['run_length']}, fault rate {cell['fault_rate']:g}" in text
    else:
        assert "wins all 16 cells" in text


def test_strategies_page_without_a_sweep_says_how_to_get_one(baton_home: Path) -> None:
    write_real_experiment(experiment_path(baton_home), runs=20, sweep=False)
    app = _run("strategies")
    assert _charts(app) == 2
    assert any("ran without a sweep" in info.value for info in app.info)


def test_timeline_of_the_run_links_to_its_dagster_partition(seeded: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BATON_DAGSTER_URL", "http://dagster.example:3000/")
    app = _run("timeline")
    assert app.selectbox(key="timeline_run").value == seeded
    link = dagster_partition_url("http://dagster.example:3000", seeded)
    assert any(link in m.value for m in app.markdown)
    assert {m.label: m.value for m in app.metric}["committed"] == "1"
    events = list(app.dataframe[0].value["event"])
    assert events.index("handoff_requested") < events.index("ownership_transferred") < events.index("resume_verified")
    assert _charts(app) == 1


def test_fault_matrix_page_reads_a_real_faults_run(baton_home: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "matrix.json"
    root = DASHBOARD.parent
    done = subprocess.run([str(Path(sys.executable).parent / "baton"), "faults", "--json", "--case", "killed-after-seal",
                           "--strategy", "baton", "--strategy", "naive"], capture_output=True, text=True, cwd=root,
                          timeout=900, check=False)
    assert done.returncode in (0, 2), done.stderr[-2000:]
    out.write_text(done.stdout)
    monkeypatch.setenv("BATON_FAULT_MATRIX", str(out))
    app = _run("faults")
    assert _charts(app) == 1
    matrix = app.dataframe[0].value
    assert list(matrix["strategy"]) == ["baton", "naive"]
    assert int(matrix.loc[matrix["strategy"] == "baton", "violations"].iloc[0]) == 0
    metrics = {m.label: m.value for m in app.metric}
    assert metrics["baton violations"] == "0"
    assert json.loads(done.stdout)["violations"]["naive"] == int(metrics["naive violations"])
    ablations = app.dataframe[1].value
    assert "reconcile-before-retry" in set(ablations["ablation"])


def test_fault_matrix_page_names_a_file_that_is_not_a_matrix(baton_home: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"seed": 0}')
    monkeypatch.setenv("BATON_FAULT_MATRIX", str(bad))
    app = AppTest.from_file(str(PAGES["faults"]), default_timeout=90).run()
    assert app.exception and "not `baton faults --json` output" in app.exception[0].message


def test_live_fleet_counts_runs_by_status(seeded: str) -> None:
    app = _run("fleet")
    metrics = {m.label: m.value for m in app.metric}
    assert sum(int(v) for v in metrics.values()) == 1
    assert _charts(app) == 1


def test_the_export_keeps_a_history_of_snapshots(seeded: str, baton_home: Path) -> None:
    from baton.metrics.history import read_history

    history = read_history(analytics_path(baton_home))
    assert len({row["measured_at"] for row in history}) == 2 and len(history) == 24


def test_the_claims_page_without_and_with_a_generated_audit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import datetime as dt

    from baton.report.generate import write_report

    monkeypatch.setenv("BATON_EVIDENCE_REPORT", str(tmp_path / "evidence-report.json"))
    claims_page = str(DASHBOARD / "pages" / "6_Claims.py")
    page = AppTest.from_file(claims_page, default_timeout=60).run()
    assert not page.exception and any("No evidence report yet" in info.value for info in page.info)

    spec = tmp_path / "chapter.txt"
    spec.write_text("chapter\n")
    findings = write_report(repo=DASHBOARD.parent, spec=spec, out=tmp_path / "evidence-report.md",
                            only=["bench-gateway"], today=dt.date(2026, 12, 2))
    page = AppTest.from_file(claims_page, default_timeout=60).run()
    assert not page.exception
    counts = {metric.label: int(metric.value) for metric in page.metric}
    assert sum(counts.values()) == len(findings)
    assert counts["unresolved"] == sum(1 for f in findings if f.verdict.value == "unresolved")
