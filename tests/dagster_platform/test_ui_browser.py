"""What an analyst sees in the Dagster UI, driven in headless Chromium over a running dagster-webserver.

The scene (`pipelines.analyst_scene`) is built from scratch: a re-verified run,
a run with a new candidate, a run whose evidence names another hash. The
browser must find the four assets on the lineage graph, the STALE marker
(Dagster's UI says "Unsynced") on exactly the run with the new candidate with
its cause, and the failed evidence check on the broken run. Chromium is the
system's (/usr/bin/chromium); with CI set, its absence fails the test.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipelines import analyst_ui as ui
from pipelines.analyst_scene import BROKEN_RUN, LINEAGE_RUN, STALE_RUN, build_scene, start_webserver

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if not Path(ui.CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail(f"{ui.CHROMIUM} is missing (CI installs it: .ci/run)")
        pytest.skip(f"{ui.CHROMIUM} is not installed (apt-get install chromium)")
    root = tmp_path_factory.mktemp("analyst-ui")
    saved = {name: os.environ.get(name) for name in ("DAGSTER_HOME", "BATON_HOME")}
    try:
        scene = build_scene(root)
        procs, url = start_webserver(scene, root / "logs")
        try:
            yield url
        finally:
            procs.stop_all()
            assert not any(m.group_alive() for m in procs.services)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.fixture
def page(served: str) -> Iterator[object]:
    with ui.browser_page() as opened:
        ui.dismiss_welcome(opened, served)
        yield opened


def test_lineage_graph_shows_the_four_run_assets_in_order(served: str, page) -> None:  # type: ignore[no-untyped-def]
    ui.open_lineage(page, served)
    boxes = {}
    for name in ("observations", "candidates", "verifier_evidence", "checkpoints"):
        found = [b for b in (m.bounding_box() for m in page.get_by_text(name, exact=True).all()) if b is not None]
        assert found, name
        boxes[name] = max(found, key=lambda b: b["y"])  # the graph's node, below the breadcrumb and tabs
    assert len({round(b["y"]) for b in boxes.values()}) == 1, boxes  # one row of nodes
    xs = [boxes[name]["x"] for name in ("observations", "candidates", "verifier_evidence", "checkpoints")]
    assert xs == sorted(xs), boxes  # upstream to the left, in lineage order


def test_a_runs_versions_are_on_its_partition_page(served: str, page) -> None:  # type: ignore[no-untyped-def]
    ui.open_run_versions(page, served, LINEAGE_RUN)
    body = page.inner_text("body")
    assert f"baton inspect {LINEAGE_RUN}" in body and f"baton checkpoint show {LINEAGE_RUN}/" in body


def test_stale_marker_on_the_run_with_a_new_candidate_only(served: str, page) -> None:  # type: ignore[no-untyped-def]
    ui.open_stale(page, served, STALE_RUN)
    popover = page.get_by_text("has a new data version").first
    assert popover.is_visible()
    assert "candidates" in page.inner_text("body")
    # The re-verified run's partition page shows no such marker.
    page.goto(f"{served}/assets/verifier_evidence?view=partitions&partition={LINEAGE_RUN}", wait_until="networkidle")
    page.get_by_text("baton inspect " + LINEAGE_RUN).first.wait_for(timeout=ui.WAIT_MS)
    page.wait_for_load_state("networkidle")
    assert page.get_by_text("Unsynced").count() == 0


def test_failed_evidence_check_on_the_broken_run(served: str, page) -> None:  # type: ignore[no-untyped-def]
    ui.open_failed_check(page, served)
    body = page.inner_text("body")
    assert "evidence_bound_to_candidate" in body and "Failed" in body
    assert BROKEN_RUN in body and "not the current candidate" in body
