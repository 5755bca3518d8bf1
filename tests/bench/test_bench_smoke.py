"""Smoke test of `baton bench checkpoint` at tiny size: it runs, and its numbers are sane.

Benchmarks are not tests: nothing here asserts a time. It checks that every
available system runs the trajectory, that the bytes it stores are positive
and grow with the trajectory, and that observation bytes are counted right.
"""

from __future__ import annotations

import base64
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import typer
from rich.console import Console
from typer.testing import CliRunner

from baton.bench import report
from baton.bench.checkpoint_bench import SYSTEMS, CheckpointRun, System, run_checkpoint_bench, select_systems
from baton.bench.trajectory import OBSERVATION_BYTES, Trajectory, observation

STEPS = (3, 6)
POSTGRES_STEPS = (3, 24)
"""PostgreSQL counts whole 8 KiB pages of the system's relations; 3 more compressed steps may fit in pages already
allocated, so its legs grow from 3 to 24 steps."""
SQLITE_SYSTEMS = [s for s in SYSTEMS if s.backend == "sqlite"]
POSTGRES_SYSTEMS = [s for s in SYSTEMS if s.backend == "postgres"]


def test_observations_are_2kb_deterministic_and_distinct() -> None:
    first = observation(0)
    assert len(first) == OBSERVATION_BYTES == len(first.encode("ascii"))
    assert len(base64.b64decode(first)) == OBSERVATION_BYTES * 3 // 4
    assert observation(0) == first
    assert observation(1) != first
    assert observation(0, seed=2) != first
    trajectory = Trajectory(4)
    assert trajectory.materialize() == tuple(observation(i) for i in range(4))
    assert trajectory.observation_bytes == 4 * OBSERVATION_BYTES


def _check_system(run: CheckpointRun, system: System, steps: tuple[int, int] = STEPS) -> None:
    legs = [run.leg(system.key, n) for n in steps]
    assert all(leg is not None for leg in legs)
    for leg in legs:
        assert leg is not None
        if leg.status == "skipped" and "not installed" in leg.reason:
            pytest.skip(leg.reason)
        assert leg.status == "ok", leg.reason
        assert leg.observation_bytes == leg.steps * OBSERVATION_BYTES
        assert len(leg.step_ms) == leg.steps
        assert all(ms > 0 for ms in leg.step_ms)
        assert leg.stored.logical > 0
        assert leg.stored.logical == sum(fp.logical for fp in leg.components.values())
        assert leg.ratio_to_observations == pytest.approx(leg.stored.logical / (leg.steps * OBSERVATION_BYTES))
    short, long = legs
    assert short is not None and long is not None
    assert long.stored.logical > short.stored.logical, "bytes stored must grow with the trajectory"


def _run(systems: list[System], tmp_path: Path, steps: tuple[int, int] = STEPS) -> CheckpointRun:
    return run_checkpoint_bench(
        steps, systems, workdir=tmp_path, warmup=False, measure_floors=False, flush_between_legs=False
    )


@pytest.mark.parametrize("system", SQLITE_SYSTEMS, ids=lambda s: s.key)
def test_sqlite_system_runs_and_grows(system: System, tmp_path: Path) -> None:
    _check_system(_run([system], tmp_path), system)


@pytest.mark.parametrize("system", POSTGRES_SYSTEMS, ids=lambda s: s.key)
def test_postgres_system_runs_and_grows(
    system: System, tmp_path: Path, postgres_server_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BATON_BENCH_DATABASE_URL", postgres_server_url)
    run = _run([system], tmp_path, POSTGRES_STEPS)
    assert run.postgres == "env:BATON_BENCH_DATABASE_URL"
    _check_system(run, system, POSTGRES_STEPS)


def test_baton_stores_each_observation_once(tmp_path: Path) -> None:
    """Baton's blob bytes grow by at least the observation bytes and far less than LangGraph's rewrite."""
    system = select_systems("baton-sqlite")[0]
    run = _run([system], tmp_path)
    short, long = (run.leg(system.key, n) for n in STEPS)
    assert short is not None and long is not None and short.status == long.status == "ok"
    added_blob_bytes = long.components["blobs"].logical - short.components["blobs"].logical
    added_observation_bytes = (long.steps - short.steps) * OBSERVATION_BYTES
    assert added_observation_bytes <= added_blob_bytes < 3 * added_observation_bytes


def test_postgres_legs_are_skipped_not_failed_without_a_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import baton.bench.pg as pg

    for var in pg.ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(pg, "SCRIPT", tmp_path / "missing.sh")
    run = _run(list(select_systems("baton-postgres")), tmp_path)
    leg = run.leg("baton-postgres", STEPS[0])
    assert leg is not None and leg.status == "skipped"
    assert leg.reason.startswith("skipped: no PostgreSQL")


def test_select_systems() -> None:
    assert select_systems(None) == SYSTEMS
    assert select_systems("all") == SYSTEMS
    assert [s.key for s in select_systems("baton")] == [
        "baton-sdk-sqlite", "baton-seal-sqlite", "baton-sqlite", "baton-sqlblobs-sqlite",
        "baton-sdk-postgres", "baton-seal-postgres", "baton-postgres", "baton-sqlblobs-postgres",
    ]
    assert all(s.backend == "sqlite" for s in select_systems("sqlite"))
    with pytest.raises(ValueError, match="unknown system"):
        select_systems("nope")


def test_report_outputs(tmp_path: Path) -> None:
    run = _run(list(select_systems("baton-sqlite,dbos-sqlite")), tmp_path / "work")
    out = tmp_path / "docs"
    out.mkdir()
    (out / "benchmarks.md").write_text("# Benchmarks\n\nprose kept\n")
    written = report.write_outputs(run, {"nproc": 2, "packages": {}, "disk": {}}, "baton bench checkpoint", out)
    assert {p.name for p in written} >= {"benchmarks-checkpoint.json", "benchmarks.md"}
    document = json.loads((out / "benchmarks-checkpoint.json").read_text())
    assert document["observation_bytes_per_step"] == OBSERVATION_BYTES
    assert {leg["system"] for leg in document["legs"]} == {"baton-sqlite", "dbos-sqlite"}
    for svg in (out / report.IMG_BYTES, out / report.IMG_MS):
        assert ET.parse(svg).getroot().tag.endswith("svg")
    text = (out / "benchmarks.md").read_text()
    assert "prose kept" in text and text.count("<!-- bench:checkpoint:start -->") == 1
    report.write_outputs(run, {"nproc": 2, "packages": {}, "disk": {}}, "baton bench checkpoint", out)
    assert (out / "benchmarks.md").read_text().count("<!-- bench:checkpoint:start -->") == 1
    with (tmp_path / "tables.txt").open("w") as handle:
        report.print_tables(run, Console(file=handle, width=160))
    assert "Baton" in (tmp_path / "tables.txt").read_text()


def test_cli_json(tmp_path: Path) -> None:
    from baton.cli import bench_cmd

    app = typer.Typer()
    bench_cmd.register(app)

    @app.command("noop")
    def noop() -> None:  # a second command keeps `bench` a sub-command
        pass

    result = CliRunner().invoke(
        app, ["bench", "checkpoint", "--steps", "2,4", "--systems", "baton-sqlite", "--json", "--workdir", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["steps"] == [2, 4]
    assert [leg["status"] for leg in document["legs"]] == ["ok", "ok"]


@pytest.mark.parametrize("blobs", ["files", "sql", "default", "sdk"])
def test_checkpoint_profile_runs(blobs: str) -> None:
    """The profile's timers and counters still fit the sealing code: every step is one append transaction."""
    from baton.bench.checkpoint_profile import profile_baton

    profile = profile_baton(steps=4, backend="sqlite", blobs=blobs, top=5)
    assert profile.steps == 4 and profile.ms_per_step > 0
    by_name = {phase.name: phase for phase in profile.phases}
    append = by_name["SqlStore.append_checkpoint (one transaction)"]
    # Calls count the SDK leg's launch seal too (outside the steps); transactions count only inside steps.
    assert append.calls_per_step >= 1 and append.transactions_per_step == 1 and append.statements_per_step >= 2
    assert sum(phase.share for phase in profile.phases) == pytest.approx(1.0)
    assert "ncalls" in profile.top_functions
    header, rows = report.profile_rows(profile)
    assert len(rows[0]) == len(header)


def test_sdk_profile_times_one_durable_commit_per_boundary() -> None:
    """The SDK boundary: one write transaction per observe (the seal), its handoff lookup inside it."""
    from baton.bench.checkpoint_profile import profile_baton

    profile = profile_baton(steps=4, backend="sqlite", blobs="sdk", top=5)
    by_name = {phase.name: phase for phase in profile.phases}
    assert by_name["secret scan of the observed content (SDK)"].calls_per_step == 1
    lookup = by_name["pending-handoff lookup queued in the seal transaction (HandoffWatch)"]
    assert lookup.calls_per_step == 1 and lookup.transactions_per_step == 0
    assert by_name["pending-handoff lookup's rows folded in, after the commit (HandoffWatch)"].calls_per_step == 1
    assert "pending-handoff lookup (HandoffWatch, own read)" not in by_name
    assert by_name["store clock reads (db_now)"].calls_per_step >= 1
