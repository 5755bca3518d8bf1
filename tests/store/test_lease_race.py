"""Real processes race for one expired lease: exactly one wins each round, on every backend."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest

from baton.store.base import SqlStore

from builders.fixtures import Backend
from builders.rows import new_run
from .race_worker import contend

PROCESSES = 8
ROUNDS = 20


@pytest.mark.slow
@pytest.mark.integration
def test_processes_race_for_an_expired_lease(store: SqlStore, backend: Backend, tmp_path: Path) -> None:
    run_id = new_run(store).run_id
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(PROCESSES)
    outputs = [tmp_path / f"worker-{index}.json" for index in range(PROCESSES)]
    workers = [
        ctx.Process(
            target=contend,
            args=(backend.url, run_id, f"worker-{index}", ROUNDS, barrier, str(outputs[index])),
            daemon=True,
        )
        for index in range(PROCESSES)
    ]
    for worker in workers:
        worker.start()
    try:
        for worker in workers:
            worker.join(timeout=300)
    finally:
        for worker in workers:
            if worker.is_alive():
                worker.terminate()
                worker.join(timeout=10)
    assert [worker.exitcode for worker in workers] == [0] * PROCESSES

    reports = [json.loads(path.read_text()) for path in outputs]
    assert all(len(report["results"]) == ROUNDS for report in reports)
    for round_no in range(ROUNDS):
        winners = [
            (report["name"], report["results"][round_no]["epoch"])
            for report in reports
            if report["results"][round_no]["won"]
        ]
        assert len(winners) == 1, f"round {round_no}: winners {winners}"
        assert winners[0][1] == round_no + 1
    final = store.get_lease(run_id)
    assert final.epoch == ROUNDS
    last_winner = next(report["name"] for report in reports if report["results"][-1]["won"])
    assert final.owner == last_winner
