"""Per-strategy summary rows, metric rows and run-outcome columns, in the experiment file's shape."""

from __future__ import annotations

from typing import Any

import numpy as np

from baton.experiment.engine import StrategyRuns
from baton.experiment.workload import AGENT_KINDS, Workload
from baton.metrics.definitions import Count, Distribution, Metric, Rate
from baton.metrics.experiment_outcomes import strategy_figure
from baton.metrics.intervals import wilson


def summary_row(experiment_id: str, r: StrategyRuns) -> dict[str, Any]:
    return {"experiment_id": experiment_id, "strategy": r.strategy.id, "label": r.strategy.label} | strategy_figure(
        r.verified, r.duplicates, r.stale, r.cost_usd, r.completion_s, r.compute_s, r.interventions)


def metric_rows(experiment_id: str, r: StrategyRuns) -> list[dict[str, Any]]:
    rows = [_metric_row(m) for m in r.metrics]
    for kind, handoff, migration, verified, finished in r.success_cells:
        low, high = wilson(verified, finished) or (None, None)
        rows.append({"name": f"verified success, {kind}, {handoff}, {migration}", "kind": "rate",
                     "value": verified / finished if finished else None, "numerator": verified,
                     "denominator": finished, "low": low, "high": high, "p50": None, "p95": None, "unit": None,
                     "count": finished})
    return [{"experiment_id": experiment_id, "strategy": r.strategy.id} | row for row in rows]


def _metric_row(metric: Metric) -> dict[str, Any]:
    empty = {"value": None, "numerator": None, "denominator": None, "low": None, "high": None, "p50": None,
             "p95": None, "unit": None, "count": None}
    if isinstance(metric, Rate):
        low, high = metric.interval or (None, None)
        return empty | {"name": metric.name, "kind": "rate", "value": metric.value, "numerator": metric.numerator,
                        "denominator": metric.denominator, "low": low, "high": high, "count": metric.denominator}
    if isinstance(metric, Distribution):
        return empty | {"name": metric.name, "kind": "distribution", "value": metric.p50, "p50": metric.p50,
                        "p95": metric.p95, "unit": metric.unit, "count": metric.count}
    assert isinstance(metric, Count)
    return empty | {"name": metric.name, "kind": "count", "value": float(metric.value), "numerator": metric.value}


def outcome_columns(experiment_id: str, w: Workload, results: list[StrategyRuns]) -> dict[str, Any]:
    n, k = w.runs, len(results)
    kinds = np.asarray(AGENT_KINDS, dtype=object)[w.kind]
    return {
        "experiment_id": np.full(n * k, experiment_id, dtype=object),
        "strategy": np.repeat(np.asarray([r.strategy.id for r in results], dtype=object), n),
        "run_index": np.tile(np.arange(n), k), "agent_kind": np.tile(kinds, k),
        "length_class": np.tile(np.where(w.long, "long", "short").astype(object), k),
        "steps": np.tile(w.steps, k), "faults": np.concatenate([r.faults for r in results]),
        "consequential": np.tile(w.effect_step >= 0, k),
        "verified": np.concatenate([r.verified for r in results]),
        "duplicate_effects": np.concatenate([r.duplicates for r in results]),
        "stale_evidence_accepted": np.concatenate([r.stale for r in results]),
        "cost_usd": np.concatenate([r.cost_usd for r in results]),
        "compute_s": np.concatenate([r.compute_s for r in results]),
        "completion_s": np.concatenate([r.completion_s for r in results]),
        "handoffs": np.concatenate([r.handoffs for r in results]),
        "reason": np.concatenate([r.reasons for r in results]),
        "migration_class": np.concatenate([r.migration_classes for r in results]),
        "interventions": np.concatenate([r.interventions for r in results]),
    }
