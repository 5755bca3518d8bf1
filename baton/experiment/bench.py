"""The experiment's benchmark: wall time of a whole experiment, and the metrics over a >= 1M-event log."""

from __future__ import annotations

import os
import platform
import time
from typing import Any

import duckdb

from baton.experiment.calibration import load_calibration
from baton.experiment.engine import run_strategy
from baton.experiment.run import run_experiment
from baton.experiment.strategies import BY_ID
from baton.experiment.workload import Parameters, generate
from baton.metrics.definitions import handoff_metrics, verified_success

TARGET_EXPERIMENT_S = 60.0
TARGET_METRICS_S = 2.0


def _machine() -> dict[str, Any]:
    return {"nproc": os.cpu_count(), "load_average_1m": os.getloadavg()[0], "python": platform.python_version(),
            "duckdb": duckdb.__version__}


def metrics_over_log(events: int, seed: int) -> dict[str, Any]:
    """Simulate Baton's strategy until its log holds at least `events` events; time the metrics over it."""
    cal, params = load_calibration(), Parameters()
    runs = max(100, events // 130)
    timing: dict[str, Any] = {}

    def measure(con: duckdb.DuckDBPyConnection) -> None:
        count = int(con.execute("SELECT count(*) FROM events").fetchone()[0])  # type: ignore[index]
        start = time.perf_counter()
        handoff_metrics(con)
        verified_success(con)
        timing.update(events=count, runs=runs, metrics_s=time.perf_counter() - start)

    while True:
        w = generate(seed, runs, params)
        start = time.perf_counter()
        run_strategy(BY_ID["baton"], w, params, cal, seed=seed, keep_log=measure)
        timing["simulate_load_and_metrics_s"] = time.perf_counter() - start
        if timing["events"] >= events:
            return timing
        runs = int(runs * events / timing["events"]) + 50


def bench(runs: int, events: int, seed: int) -> dict[str, Any]:
    machine_before = _machine()
    start = time.perf_counter()
    run_experiment(runs, seed, command=f"baton experiment --runs {runs} --seed {seed}")
    experiment_s = time.perf_counter() - start
    cal, params = load_calibration(), Parameters()
    w = generate(seed, runs, params)
    start = time.perf_counter()
    for strategy in BY_ID.values():
        run_strategy(strategy, w, params, cal, seed=seed, with_metrics=False)
    simulate_s = time.perf_counter() - start
    metrics = metrics_over_log(events, seed)
    return {
        "benchmark": "experiment",
        "command": f"baton experiment-bench --runs {runs} --events {events} --seed {seed}",
        "machine": machine_before | {"load_average_1m_after": os.getloadavg()[0]},
        "experiment": {"runs": runs, "strategies": len(BY_ID), "seconds": experiment_s,
                       "simulation_only_s": simulate_s, "metrics_and_tables_s": experiment_s - simulate_s,
                       "target_s": TARGET_EXPERIMENT_S, "target_met": experiment_s < TARGET_EXPERIMENT_S},
        "metrics": metrics | {"target_s": TARGET_METRICS_S, "target_met": metrics["metrics_s"] < TARGET_METRICS_S},
    }
