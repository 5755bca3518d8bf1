"""Data for the dashboard tests: a real store with a scripted run and a crafted handoff, and their exports."""

from __future__ import annotations

import datetime as dt
import itertools
from pathlib import Path

import duckdb

from baton.metrics.export import analytics_path, export_metrics
from baton.metrics.target_effects import target_effects
from baton.models import Event, EventType
from baton.scripted_run import run_scripted_research
from baton.store.factory import open_blobs, open_store

E = EventType
MOVED_REASON = "worker_lost"


def seed_store(home: Path, *, exports: int = 2) -> str:
    """A scripted research run that then moves once (PHYSICAL, committed, verified); `exports` metric exports.

    Returns the run id.
    """
    store = open_store(None, home)
    try:
        steps = run_scripted_research(store, open_blobs(home, store))
        run_id = steps[0].checkpoint.run_id
        at = dt.datetime.now(dt.UTC)
        tick = itertools.count(1)

        def ev(kind: EventType, **fields: object) -> Event:
            return Event(event_type=kind, run_id=run_id, at=at + dt.timedelta(milliseconds=next(tick) * 40),
                         **fields)  # type: ignore[arg-type]

        store.append_events([
            ev(E.HANDOFF_REQUESTED, reason=MOVED_REASON, source_placement="local-a", source_epoch=1),
            ev(E.COMPATIBILITY_PASSED, compatibility_decision={"allowed": True, "migration_class": "PHYSICAL",
                                                               "reasons": []}),
            ev(E.OWNERSHIP_TRANSFERRED, source_placement="local-a", target_placement="local-b", source_epoch=1,
               target_epoch=2),
            ev(E.RESUME_STARTED, target_placement="local-b", target_epoch=2),
            ev(E.RESUME_VERIFIED, target_placement="local-b", target_epoch=2),
            ev(E.RUN_FINISHED, reason="verified"),
        ])
        for _ in range(exports):
            export_metrics(store, target_effects(home), analytics_path(home))
        return run_id
    finally:
        store.close()


def write_contract_experiment(path: Path, *, sweep: bool = True) -> None:
    """An experiment file written by DuckDB strictly per contract-17 (until 17a's writer is merged)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE experiment_meta(experiment_id VARCHAR, command VARCHAR, seed BIGINT, runs BIGINT, "
                    "sweep BOOLEAN, git_commit VARCHAR, started_at VARCHAR, seconds DOUBLE, parameters_json VARCHAR)")
        con.execute("INSERT INTO experiment_meta VALUES ('exp-1', 'baton experiment --runs 4 --seed 7', 7, 4, ?, "
                    "'abc', '2026-12-02T04:00:00+00:00', 0.5, '{}')", [sweep])
        con.execute("CREATE TABLE strategy_summary(experiment_id VARCHAR, strategy VARCHAR, label VARCHAR, runs BIGINT, "
                    "verified BIGINT, success_rate DOUBLE, success_low DOUBLE, success_high DOUBLE, "
                    "duplicate_effects BIGINT, stale_evidence_accepted BIGINT, total_cost_usd DOUBLE, "
                    "cost_per_verified_usd DOUBLE, mean_completion_s DOUBLE, p95_completion_s DOUBLE, "
                    "compute_s DOUBLE, interventions BIGINT)")
        con.execute("INSERT INTO strategy_summary VALUES "
                    "('exp-1', 'baton', 'safe handoff', 4, 4, 1.0, 0.51, 1.0, 0, 0, 2.0, 0.5, 10, 12, 40, 0), "
                    "('exp-1', 'naive', 'naive transcript', 4, 3, 0.75, 0.3, 0.95, 2, 1, 2.4, 0.8, 9, 11, 38, 0), "
                    "('exp-1', 'restart', 'restart from start', 4, 3, 0.75, 0.3, 0.95, 0, 0, 1.8, 0.6, 14, 20, 50, 0)")
        con.execute("CREATE TABLE run_outcomes(experiment_id VARCHAR, strategy VARCHAR, run_index BIGINT, "
                    "agent_kind VARCHAR, length_class VARCHAR, steps BIGINT, faults BIGINT, consequential BOOLEAN, "
                    "verified BOOLEAN, duplicate_effects BIGINT, stale_evidence_accepted BIGINT, cost_usd DOUBLE, "
                    "compute_s DOUBLE, completion_s DOUBLE, handoffs BIGINT)")
        for strategy in ("baton", "naive", "restart"):
            for index in range(4):
                con.execute("INSERT INTO run_outcomes VALUES ('exp-1', ?, ?, ?, 'short', 5, ?, false, ?, 0, 0, "
                            "0.5, 10, 10, ?)", [strategy, index, "deploy" if index % 2 else "research", index % 2,
                                                strategy == "baton" or index > 0, index % 2])
        con.execute("CREATE TABLE sweep_cells(experiment_id VARCHAR, strategy VARCHAR, run_length BIGINT, "
                    "fault_rate DOUBLE, runs BIGINT, success_rate DOUBLE, cost_per_verified_usd DOUBLE, "
                    "mean_completion_s DOUBLE, duplicate_effects BIGINT, winner BOOLEAN)")
        if sweep:
            for length, rate in itertools.product((5, 50), (0.01, 0.2)):
                short_and_calm = length == 5 and rate == 0.01
                for strategy, cost in (("baton", 1.0), ("restart", 0.8 if short_and_calm else 1.5)):
                    con.execute("INSERT INTO sweep_cells VALUES ('exp-1', ?, ?, ?, 10, 0.9, ?, 10, 0, ?)",
                                [strategy, length, rate, cost, (strategy == "restart") == short_and_calm])
        con.execute("CREATE TABLE experiment_metrics(experiment_id VARCHAR, strategy VARCHAR, name VARCHAR, "
                    "kind VARCHAR, value DOUBLE, numerator BIGINT, denominator BIGINT, low DOUBLE, high DOUBLE, "
                    "p50 DOUBLE, p95 DOUBLE, unit VARCHAR, count BIGINT)")
