"""`baton experiment`: one seeded workload, every strategy, the oracle's verdicts and the metrics."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from baton import clock
from baton.experiment.calibration import Calibration, load_calibration
from baton.experiment.engine import StrategyRuns, run_strategy
from baton.experiment.results import ExperimentResult
from baton.experiment.strategies import STRATEGIES
from baton.experiment.summary import metric_rows, outcome_columns, summary_row
from baton.experiment.sweep import FAULT_RATES, RUN_LENGTHS, run_sweep
from baton.experiment.workload import Parameters, generate

Tick = Callable[[int], None]


@dataclass(frozen=True)
class Experiment:
    result: ExperimentResult
    runs: list[StrategyRuns]
    fingerprint: str


def _git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).resolve().parent,
                             capture_output=True, text=True, check=False, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return out.stdout.strip() or "unknown"


def sweep_runs_per_cell(runs: int) -> int:
    return max(1000, runs // 4)


def run_experiment(runs: int, seed: int, *, sweep: bool = False, params: Parameters | None = None,
                   calibration: Calibration | None = None, command: str = "baton experiment",
                   tick: Tick | None = None) -> Experiment:
    """Generate the workload and fault schedule once, replay every strategy over it, judge and measure."""
    if runs < 1:
        raise ValueError(f"--runs must be at least 1, got {runs}")
    params = params or Parameters()
    cal = calibration or load_calibration()
    started, timer = clock.now(), time.perf_counter()
    experiment_id = f"exp-{seed}-{runs}-{uuid.uuid4().hex[:8]}"
    w = generate(seed, runs, params)
    results = [run_strategy(s, w, params, cal, seed=seed, tick=tick) for s in STRATEGIES]
    cells, groups = (run_sweep(experiment_id, seed, sweep_runs_per_cell(runs), params, cal, tick=tick)
                     if sweep else ([], []))
    parameters = {"workload": params.as_dict(), "calibration": cal.describe(), "workload_sha256": w.fingerprint(),
                  "events_per_strategy": {r.strategy.id: r.events for r in results},
                  "reported_verified": {r.strategy.id: int(r.reported_verified.sum()) for r in results},
                  "sweep": {"run_lengths": RUN_LENGTHS, "fault_rates": FAULT_RATES,
                            "runs_per_cell": sweep_runs_per_cell(runs) if sweep else 0,
                            "winner": "lowest cost per verified run among strategies with 0 duplicates "
                                      "and 0 stale evidence accepted"}}
    meta = {"experiment_id": experiment_id, "command": command, "seed": seed, "runs": runs, "sweep": sweep,
            "git_commit": _git_commit(), "started_at": started.isoformat(),
            "seconds": time.perf_counter() - timer, "parameters_json": json.dumps(parameters, default=list)}
    result = ExperimentResult(meta=meta, summary=[summary_row(experiment_id, r) for r in results],
                              outcomes=outcome_columns(experiment_id, w, results), sweep=cells, sweep_groups=groups,
                              metrics=[row for r in results for row in metric_rows(experiment_id, r)])
    return Experiment(result, results, w.fingerprint())
