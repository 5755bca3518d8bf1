"""Each metric of sec. 25 on a crafted event log whose values are known by construction."""

from __future__ import annotations

import datetime as dt
import itertools
from typing import Any

import pytest

from baton.metrics.definitions import Count, Distribution, Rate, handoff_metrics, verified_success
from baton.metrics.intervals import wilson
from baton.metrics.load import EffectRecord, load_event_log
from baton.models import Event, EventType

T0 = dt.datetime(2026, 12, 2, 12, 0, tzinfo=dt.UTC)
E = EventType


def _log() -> list[tuple[int, Event]]:
    seq = itertools.count(1)
    clock = {"ms": 0}

    def ev(kind: EventType, run: str, *, after_ms: int = 1, **fields: Any) -> tuple[int, Event]:
        clock["ms"] += after_ms
        return next(seq), Event(event_type=kind, run_id=run, at=T0 + dt.timedelta(milliseconds=clock["ms"]), **fields)

    def decision(migration: str | None, *reasons: str) -> dict[str, Any]:
        return {"allowed": not reasons, "migration_class": migration, "reasons": list(reasons)}

    return [
        ev(E.RUN_CREATED, "A", detail={"kind": "deploy"}),
        ev(E.RUN_CREATED, "B", detail={"kind": "research"}),
        ev(E.RUN_CREATED, "C", detail={"kind": "deploy"}),
        ev(E.RUN_CREATED, "D", detail={"kind": "deploy"}),
        ev(E.RUN_CREATED, "E", detail={"kind": "deploy"}),
        ev(E.RELEASE_PUBLISHED, "baton:catalog"),
        ev(E.CHECKPOINT_STARTED, "A"),
        ev(E.CHECKPOINT_SEALED, "A", after_ms=10),
        ev(E.CHECKPOINT_STARTED, "B"),
        ev(E.CHECKPOINT_SEALED, "B", after_ms=30),
        ev(E.HANDOFF_REQUESTED, "A"),
        ev(E.COMPATIBILITY_PASSED, "A", compatibility_decision=decision("PHYSICAL")),
        ev(E.OWNERSHIP_TRANSFERRED, "A"),
        ev(E.AUTHORITY_DOWNGRADED, "A"),
        ev(E.REVALIDATION_STARTED, "A"),
        ev(E.RESUME_VERIFIED, "A", after_ms=1996),  # 2 s after the request (4 events 1 ms apart, then 1996 ms)
        ev(E.RUN_FINISHED, "A", reason="verified"),
        ev(E.HANDOFF_REQUESTED, "B"),
        ev(E.COMPATIBILITY_FAILED, "B", compatibility_decision=decision(None, "state_schema_incompatible")),
        ev(E.HANDOFF_ABORTED, "B"),
        ev(E.RUN_FINISHED, "B", reason="failed"),
        ev(E.STALE_WORKER_REJECTED, "C"),
        ev(E.STALE_WORKER_REJECTED, "C"),
        ev(E.RUN_FINISHED, "C", reason="verified"),
        ev(E.HANDOFF_REQUESTED, "D"),
        ev(E.COMPATIBILITY_PASSED, "D", compatibility_decision=decision("BEHAVIORAL")),
        ev(E.OWNERSHIP_TRANSFERRED, "D"),
        ev(E.OPERATION_RECONCILED, "D", detail={"state": "UNKNOWN", "operation_id": "op-1"}),
        ev(E.REVALIDATION_FAILED, "D"),
        ev(E.RUN_FINISHED, "D", reason="escalated"),
        # E is asked to move again before its first new owner resumed: that resume belongs to the first move.
        ev(E.HANDOFF_REQUESTED, "E"),
        ev(E.OWNERSHIP_TRANSFERRED, "E"),
        ev(E.HANDOFF_REQUESTED, "E"),
        ev(E.RESUME_VERIFIED, "E"),
        ev(E.OWNERSHIP_TRANSFERRED, "E"),
        ev(E.RESUME_VERIFIED, "E"),
        ev(E.RUN_FINISHED, "E", reason="verified"),
    ]


EFFECTS = [
    EffectRecord("A", "deploy", "deploy-1", "key-1"),
    EffectRecord("A", "deploy", "deploy-1", "key-2"),  # the same logical operation under a second key
    EffectRecord("C", "deploy", "deploy-1", "key-3"),
]


@pytest.fixture(scope="module")
def metrics() -> dict[str, Any]:
    con = load_event_log(_log(), effects=EFFECTS, checkpoint_sizes=[("A", "c1", 1000), ("B", "c2", 3000)])
    return {metric.name: metric for metric in handoff_metrics(con)} | {"_success": verified_success(con)}


def _rate(metrics: dict[str, Any], name: str) -> tuple[int, int]:
    metric = metrics[name]
    assert isinstance(metric, Rate)
    return metric.numerator, metric.denominator


def test_rates_over_handoffs(metrics: dict[str, Any]) -> None:
    assert _rate(metrics, "handoff success rate") == (3, 5)  # A, and both moves of E
    assert _rate(metrics, "resume failure rate") == (1, 4)  # D, of the transfers A, D, E, E
    assert _rate(metrics, "revalidation rate") == (1, 4)
    assert _rate(metrics, "handoff-induced UNKNOWN rate") == (1, 5)
    assert _rate(metrics, "state incompatibility rate") == (1, 3)
    assert _rate(metrics, "handoff rollback rate") == (1, 5)
    assert _rate(metrics, "authority downgrade rate") == (1, 4)


def test_distributions(metrics: dict[str, Any]) -> None:
    latency, size, recovery = (metrics[n] for n in ("checkpoint latency", "checkpoint size", "recovery time"))
    assert isinstance(latency, Distribution) and (latency.count, latency.p50) == (2, pytest.approx(20.0))
    assert isinstance(size, Distribution) and size.p50 == pytest.approx(2000.0)
    assert isinstance(recovery, Distribution) and (recovery.count, recovery.p50) == (3, pytest.approx(0.003))
    assert recovery.p95 == pytest.approx(0.003 + 0.9 * (2.0 - 0.003))  # linear interpolation towards A's 2 s


def test_counts_come_from_the_targets_records_and_the_log(metrics: dict[str, Any]) -> None:
    assert metrics["duplicate-side-effect incidents"] == Count("duplicate-side-effect incidents", 1)
    assert metrics["stale-worker rejections"] == Count("stale-worker rejections", 2)
    assert len([m for m in metrics if not m.startswith("_")]) == 12


def test_verified_success_with_and_without_handoff(metrics: dict[str, Any]) -> None:
    cells = {(s.kind, s.handoff, s.migration_class): (s.verified, s.finished) for s in metrics["_success"]}
    assert cells == {
        ("deploy", "with handoff", "BEHAVIORAL"): (0, 1),
        ("deploy", "with handoff", "PHYSICAL"): (1, 1),
        ("deploy", "with handoff", "unknown"): (1, 1),
        ("deploy", "without handoff", "none"): (1, 1),
        ("research", "without handoff", "none"): (0, 1),
    }


def test_an_empty_log_measures_nothing_rather_than_zero() -> None:
    metrics = handoff_metrics(load_event_log([]))
    rates = [m for m in metrics if isinstance(m, Rate)]
    assert rates and all(m.value is None and m.interval is None for m in rates)
    assert all(m.p50 is None for m in metrics if isinstance(m, Distribution))


def test_wilson_interval_matches_the_textbook_values() -> None:
    low, high = wilson(8, 10)  # type: ignore[misc]
    assert (round(low, 4), round(high, 4)) == (0.4902, 0.9433)
    assert wilson(0, 0) is None


def test_a_real_store_loads_on_both_backends(store: Any, blobs: Any) -> None:
    from baton.metrics.load import load_from_store
    from baton.scripted_run import run_scripted_research

    steps = run_scripted_research(store, blobs)
    with store._tx(write=False) as tx:  # the oracle: plain SQL over the events table, not the metrics code
        sealed = tx.one("SELECT count(*) FROM events WHERE event_type = 'checkpoint_sealed'", ())
    metrics = {m.name: m for m in handoff_metrics(load_from_store(store))}
    latency = metrics["checkpoint latency"]
    assert isinstance(latency, Distribution) and latency.count == int(sealed[0]) == len(steps)
