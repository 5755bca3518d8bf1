"""Data for the dashboard tests: a real store with a scripted run and a crafted handoff, and their exports."""

from __future__ import annotations

import datetime as dt
import itertools
from pathlib import Path

from baton.experiment.results import write_experiment
from baton.experiment.run import run_experiment
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


def write_real_experiment(path: Path, *, runs: int, sweep: bool) -> dict[str, int]:
    """Run 17a's `baton experiment` engine (seed 7) and write its file with its own writer."""
    done = run_experiment(runs, 7, sweep=sweep, command=f"baton experiment --runs {runs} --seed 7"
                          + (" --sweep" if sweep else ""))
    return write_experiment(done.result, path)
