"""Smoke tests of `baton bench handoff` and `baton bench gateway` at tiny size.

Benchmarks are not tests: nothing here asserts a time. They check that the
benchmarks run end to end, that their counts add up, that the handoffs
measured needed no revalidation, and that no stale mutation was accepted.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import typer
from rich.console import Console
from typer.testing import CliRunner

from baton.bench import SUBBENCHMARKS, handoff_bench, run_gateway, run_handoff
from baton.bench.gateway_bench import run_gateway_bench
from baton.bench.handoff_bench import PHASES, run_handoff_bench, select_systems

SAMPLES = 2
OBSERVATIONS = 3


def _app() -> typer.Typer:
    from baton.cli import bench_cmd

    app = typer.Typer()
    bench_cmd.register(app)

    @app.command("noop")
    def noop() -> None:  # a second command keeps `bench` a sub-command
        pass

    return app


def _check_handoff_result(result: handoff_bench.SystemResult) -> None:
    assert result.status == "ok", result.reason
    assert result.samples == SAMPLES
    for phase in (*PHASES, "total"):
        stats = result.stats(phase)
        assert stats.samples == SAMPLES
        assert 0 < stats.p50_ms <= stats.p99_ms <= stats.max_ms
        assert math.isfinite(stats.mean_ms)
    assert set(result.counts) == set(PHASES)
    assert result.counts["commit"]["write_transactions"] >= 1  # the epoch compare-and-set
    assert result.counts["restore"]["blob_reads"] >= OBSERVATIONS  # every observation is fetched and verified


def test_registry_lists_every_subbenchmark() -> None:
    assert list(SUBBENCHMARKS) == ["checkpoint", "handoff", "gateway", "bounds"]


def test_handoff_sqlite_runs_without_revalidation(tmp_path: Path) -> None:
    run = run_handoff_bench(SAMPLES, select_systems("sqlite"), observations=OBSERVATIONS, warmup=1, workdir=tmp_path)
    assert [r.system.key for r in run.results] == ["sqlite-default", "sqlite-files", "sqlite-sqlblobs"]
    for result in run.results:
        _check_handoff_result(result)


def test_handoff_postgres_runs_without_revalidation(
    tmp_path: Path, postgres_server_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BATON_BENCH_DATABASE_URL", postgres_server_url)
    run = run_handoff_bench(SAMPLES, select_systems("postgres"), observations=OBSERVATIONS, warmup=0, workdir=tmp_path)
    assert run.postgres == "env:BATON_BENCH_DATABASE_URL"
    assert [r.system.key for r in run.results] == ["postgres-default", "postgres-files", "postgres-sqlblobs"]
    for result in run.results:
        _check_handoff_result(result)


def test_handoff_that_needs_revalidation_is_reported_not_measured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Placements whose environments differ make observations need revalidation: the benchmark must refuse."""
    from baton.models import EnvironmentIdentity

    shared = handoff_bench.placements

    def distinct_environments():  # type: ignore[no-untyped-def]
        source, target = shared()
        env = EnvironmentIdentity.model_validate({**target.environment.model_dump(), "placement": target.name})
        return source, target.model_copy(update={"environment": env})

    monkeypatch.setattr(handoff_bench, "placements", distinct_environments)
    run = run_handoff_bench(1, select_systems("sqlite-sqlblobs"), observations=OBSERVATIONS, warmup=0, workdir=tmp_path)
    (result,) = run.results
    assert result.status == "failed"
    assert "not revalidation-free" in result.reason


def test_handoff_report_outputs(tmp_path: Path) -> None:
    run = run_handoff_bench(SAMPLES, select_systems("sqlite-files"), observations=OBSERVATIONS, warmup=0,
                            workdir=tmp_path / "work")
    out = tmp_path / "docs"
    out.mkdir()
    (out / "benchmarks.md").write_text("# Benchmarks\n\nprose kept\n")
    machine = {"nproc": 2, "packages": {}, "disk": {}}
    for _ in range(2):
        run_handoff.write_outputs(run, machine, "baton bench handoff", out)
    text = (out / "benchmarks.md").read_text()
    assert "prose kept" in text and text.count("<!-- bench:handoff:start -->") == 1
    document = json.loads((out / run_handoff.JSON_NAME).read_text())
    (system,) = document["systems"]
    assert system["samples"] == SAMPLES and len(system["samples_ms"]["restore"]) == SAMPLES
    with (tmp_path / "tables.txt").open("w") as handle:
        run_handoff.print_tables(run, Console(file=handle, width=200))
    assert "SQLite, file blobs" in (tmp_path / "tables.txt").read_text()


def test_handoff_cli_json(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        _app(), ["bench", "handoff", "--samples", "1", "--systems", "sqlite-sqlblobs", "--json",
                 "--workdir", str(tmp_path)],
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert [(s["key"], s["status"], s["samples"]) for s in document["systems"]] == [("sqlite-sqlblobs", "ok", 1)]


def test_gateway_runs_and_accepts_no_stale_mutation(
    tmp_path: Path, postgres_server_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BATON_BENCH_DATABASE_URL", postgres_server_url)
    run = run_gateway_bench((1, 2), duration_s=0.3, repeat=1, warmup=2, profile_ops=5, workdir=tmp_path)
    assert run.status == "ok", run.reason
    assert run.postgres == "env:BATON_BENCH_DATABASE_URL"
    assert [level.concurrency for level in run.levels] == [1, 2]
    for level in run.levels:
        assert len(level.gateway) == len(level.floor) == len(level.per_key) == 1  # per-key: the baseline
        assert level.ops("gateway") > 0 and level.ops("floor") > 0 and level.ops("per-key") > 0
        assert level.per_key[0].kind == "per-key" and level.per_key[0].stale_attempts > 0
        assert level.gateway_throughput > 0 and level.floor_throughput > 0
        assert len(level.gateway[0].latencies_ms) == level.ops("gateway")
        assert level.stale_attempts > 0
        assert level.stale_accepted == 0
        (round_,) = level.gateway
        assert round_.stale_rejected_events == round_.stale_attempts
        assert any("committed operations in the store" in check for check in round_.checks)
    profile = run.profile
    assert profile is not None and profile.ops == 5
    # PREPARED before the target and the outcome after it are two durable writes, whatever else is trimmed.
    assert profile.write_transactions_per_op == 2 and profile.statements_per_op >= 2
    assert profile.round_trips_per_op >= profile.statements_per_op
    document = run_gateway.to_json(run, {"nproc": 2, "packages": {}, "disk": {}}, "baton bench gateway")
    assert [level["stale_accepted"] for level in document["levels"]] == [0, 0]
    section = run_gateway.markdown_section(run, {"nproc": 2, "packages": {}, "disk": {}}, "baton bench gateway")
    assert "stale accepted" in section and "gateway / per-key" in section


def test_gateway_cli_json(tmp_path: Path, postgres_server_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BATON_BENCH_DATABASE_URL", postgres_server_url)
    result = CliRunner().invoke(
        _app(), ["bench", "gateway", "--concurrency", "1", "--duration", "0.2", "--repeat", "1", "--profile-ops", "0",
                 "--json", "--workdir", str(tmp_path)],
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["status"] == "ok"
    (level,) = document["levels"]
    assert level["concurrency"] == 1 and level["gateway_mutations"] > 0 and level["stale_accepted"] == 0


def test_gateway_is_skipped_not_failed_without_a_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import baton.bench.pg as pg

    for var in pg.ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(pg, "SCRIPT", tmp_path / "missing.sh")
    run = run_gateway_bench((1,), duration_s=0.1, repeat=1, profile_ops=0, workdir=tmp_path)
    assert run.status == "skipped" and run.reason.startswith("skipped: no PostgreSQL")
