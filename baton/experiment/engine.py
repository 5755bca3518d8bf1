"""Replay every strategy over one seeded workload and fault schedule; judge each run by the oracle."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import duckdb
import numpy as np

from baton.experiment.calibration import Calibration
from baton.experiment.events import Recorder, load_tables
from baton.experiment.oracle import EvidenceSource, TargetLedger
from baton.experiment.strategies import RunSimulation, Strategy, boundary_ms, gateway_overhead_s
from baton.experiment.workload import AGENT_KINDS, Parameters, Workload
from baton.metrics.definitions import Metric, handoff_metrics, verified_success


@dataclass(frozen=True)
class StrategyRuns:
    """Per-run columns of one strategy (index = run), as the oracle judged them, and its metrics."""

    strategy: Strategy
    verified: np.ndarray
    reported_verified: np.ndarray
    duplicates: np.ndarray
    stale: np.ndarray
    faults: np.ndarray
    cost_usd: np.ndarray
    compute_s: np.ndarray
    completion_s: np.ndarray
    handoffs: np.ndarray
    interventions: np.ndarray
    metrics: list[Metric]
    success_cells: list[tuple[str, str, str, int, int]]
    events: int
    reasons: np.ndarray            # per run: the first fault recovered from, "none" if none struck
    migration_classes: np.ndarray  # per run: PHYSICAL | BEHAVIORAL of the first move, "none" if it never moved


def run_strategy(strategy: Strategy, w: Workload, params: Parameters, cal: Calibration, *, seed: int,
                 with_metrics: bool = True, tick: Callable[[int], None] | None = None,
                 keep_log: Callable[[duckdb.DuckDBPyConnection], None] | None = None) -> StrategyRuns:
    """Every run of the workload under one strategy; the ledger and evidence source are fresh per strategy."""
    ledger, evidence = TargetLedger(), EvidenceSource()
    rec = Recorder(cal.seal_ms, strategy.boundary == "seal")
    runs = w.runs
    cols = {name: np.zeros(runs) for name in ("faults", "cost", "compute", "completion", "handoffs", "help")}
    reported = np.zeros(runs, dtype=bool)
    stale = np.zeros(runs, dtype=np.int64)
    duplicates = np.zeros(runs, dtype=np.int64)
    statuses: list[str] = []
    reasons = np.full(runs, "none", dtype=object)
    classes = np.full(runs, "none", dtype=object)
    for i in range(runs):
        out = RunSimulation(strategy, w, i, params, cal, ledger, evidence, rec).run()
        cols["faults"][i], cols["cost"][i], cols["compute"][i] = out.faults, out.cost_usd, out.compute_s
        cols["completion"][i], cols["handoffs"][i], cols["help"][i] = out.completion_s, out.handoffs, out.interventions
        reported[i] = out.reported == "verified"
        statuses.append(out.reported)
        reasons[i], classes[i] = out.reason, out.migration_class
        # The oracle: the target's own ledger and the evidence source's current version.
        duplicates[i] = ledger.duplicates(i)
        stale[i] = int(out.reported == "verified" and evidence.stale(i, out.quoted))
        if tick is not None and i % 500 == 499:
            tick(500)
    if tick is not None:
        tick(runs % 500)
    # Baton's own measured step costs, added to each run's compute and wall time.
    rng = np.random.default_rng([seed, 17])
    checkpoints = rec.expand(rng, boundary_ms(strategy, cal))
    per_run = np.bincount(checkpoints[0], weights=checkpoints[2], minlength=runs) / 1000.0
    per_run = per_run + gateway_overhead_s(strategy, w, cal)
    compute = cols["compute"] + per_run
    completion = cols["completion"] + per_run
    cost = cols["cost"] + compute * params.compute_usd_per_s
    metrics: list[Metric] = []
    cells: list[tuple[str, str, str, int, int]] = []
    events = len(rec.run) + 2 * int(checkpoints[0].size)
    if with_metrics:
        con = load_tables(rec, checkpoints, [AGENT_KINDS[int(k)] for k in w.kind], statuses,
                          ledger.all_effects(), cal.checkpoint_bytes)
        if keep_log is not None:
            keep_log(con)
        metrics = handoff_metrics(con)
        cells = [(c.kind, c.handoff, c.migration_class, c.verified, c.finished) for c in verified_success(con)]
        con.close()
    verified = reported & (duplicates == 0) & (stale == 0)
    return StrategyRuns(strategy, verified, reported, duplicates, stale, cols["faults"].astype(np.int64), cost,
                        compute, completion, cols["handoffs"].astype(np.int64), cols["help"].astype(np.int64),
                        metrics, cells, events, reasons, classes)
