"""Smoke test of `baton bench dagster` at tiny size: it runs end to end, and its counts add up.

Nothing here asserts a time. At 20 seeded runs (5 active, 2 of them with a
lapsed lease) plus one new run per change round, the sensors must raise what
the changes call for, the archive step must leave exactly the active runs and
the kept finished ones, and every run must still be in Baton's store.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from baton.bench.dagster_bench import JSON_NAME, SECTION, Options, main
from baton.bench.dagster_seed import SeedPlan
from baton.cli import app

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RUNS, SAMPLES, KEEP = 20, 1, 5
SHARES = {"active_share": 0.25, "lapsed_share": 0.1}


def test_tiny_dagster_bench_runs_and_adds_up(tmp_path: Path) -> None:
    out = tmp_path / "docs"
    document = main(options=Options(sizes=(RUNS,), samples=SAMPLES, keep_finished=KEEP, reverify=1, **SHARES),
                    out=out, workdir=tmp_path, as_json=True)
    (result,) = document["results"]
    plan = SeedPlan(RUNS, **SHARES)
    kinds = [plan.kind_of(i) for i in range(RUNS + SAMPLES)]  # the change rounds seed one run each
    assert result["lapsed_runs"] == kinds[:RUNS].count("lapsed") == 2

    catch_up = result["catch_up"]
    assert catch_up["partitions"] == RUNS and catch_up["ticks"] >= 2 and catch_up["materializations_written"] > 0

    ticks = result["ticks"]
    assert set(ticks) == {"run_discovery", "release_change", "environment_change", "artifact_change",
                          "lease_expiry", "freshness_reverification"}
    assert all(t["idle"]["n"] == t["change"]["n"] == SAMPLES for t in ticks.values())
    assert ticks["artifact_change"]["requests_per_change_round"] == [1] * SAMPLES  # one new candidate per round
    assert ticks["lease_expiry"]["requests_per_change_round"] == [2] * SAMPLES  # the two lost workers' runs
    assert ticks["freshness_reverification"]["requests_per_change_round"][0] >= 1

    archive = result["archive"]
    live = kinds.count("active") + kinds.count("lapsed")
    finished = kinds.count("finished")
    assert archive["baton_runs"] == RUNS + SAMPLES and archive["baton_finished_runs"] == finished
    assert archive["partitions_before"] == RUNS + SAMPLES
    assert archive["partitions_after"] == live + min(KEEP, finished)
    assert archive["archived"] == finished - KEEP and archive["history_kept_in_baton_store"] is True

    assert set(result["graphql"]) >= {"asset_catalog", "lineage_of_one_run", "run_partition_page",
                                      "partition_statuses", "dagster_runs_list"}
    assert all(q["n"] == SAMPLES and q["p50_ms"] > 0 for q in result["graphql"].values())
    assert result["storage"] == result["dagster_storage"] == "sqlite"
    assert catch_up["observations_written"] > 0 and len(result["load_average_last"]) == 3
    daemon = result["daemon_ticks"]  # the real dagster-daemon's own tick records, read over GraphQL
    assert set(daemon) >= {"run_discovery", "lease_expiry"}
    assert all(daemon[name]["n"] >= 1 for name in ("run_discovery", "release_change", "environment_change",
                                                   "artifact_change", "lease_expiry"))

    written = json.loads((out / JSON_NAME).read_text())
    assert written["results"][0]["runs"] == RUNS
    markdown = (out / "benchmarks.md").read_text()
    assert f"<!-- bench:{SECTION}:start -->" in markdown and "partitions after" in markdown


@pytest.mark.parametrize("args, message", [(["--runs", "0"], "positive"), (["--runs", "ten"], "--runs"),
                                           (["--samples", "0"], "samples")])
def test_bad_options_are_refused_clearly(args: list[str], message: str) -> None:
    outcome = CliRunner().invoke(app, ["bench", "dagster", *args])
    assert outcome.exit_code != 0
    assert message in outcome.output
