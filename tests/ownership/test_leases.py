"""Leases and epochs: the coordinator's compare-and-set under real process races, heartbeats, loss."""

from __future__ import annotations

import json
import multiprocessing
import time
from pathlib import Path

import pytest

from baton.checker import check
from baton.errors import LeaseLostError
from baton.history import JsonlHistory, ListHistory
from baton.models import EventType
from baton.ownership import Coordinator, LeaseHolder
from baton.store.base import SqlStore

from builders.authority import new_run
from .race_worker import race_contender

PROCESSES = 8
ROUNDS = 25


@pytest.mark.integration
def test_eight_processes_race_for_a_lapsed_lease_exactly_one_wins_every_round(
    store: SqlStore, store_url: str, tmp_path: Path
) -> None:
    run_id = new_run(store)
    history_path = tmp_path / "history.jsonl"
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(PROCESSES + 1)
    outputs = [tmp_path / f"contender-{index}.json" for index in range(PROCESSES)]
    contenders = [
        ctx.Process(
            target=race_contender,
            args=(store_url, run_id, f"contender-{index}", ROUNDS, barrier, str(outputs[index]), str(history_path)),
            daemon=True,
        )
        for index in range(PROCESSES)
    ]
    for process in contenders:
        process.start()
    coordinator = Coordinator(store)
    try:
        for round_no in range(ROUNDS):
            lapsed = coordinator.wait_until_expired(run_id, timeout_s=30)
            assert lapsed.epoch == round_no
            barrier.wait(120)  # start: all eight try at once
            barrier.wait(120)  # end of the round
            lease = store.get_lease(run_id)
            assert lease.epoch == round_no + 1, f"round {round_no}: {lease}"
    finally:
        for process in contenders:
            process.join(timeout=60)
            if process.is_alive():
                process.terminate()
    assert [process.exitcode for process in contenders] == [0] * PROCESSES

    reports = [json.loads(path.read_text()) for path in outputs]
    winners_per_round = []
    for round_no in range(ROUNDS):
        winners = [report["name"] for report in reports if report["results"][round_no]["won"]]
        epochs = [report["results"][round_no]["epoch"] for report in reports if report["results"][round_no]["won"]]
        assert len(winners) == 1, f"round {round_no}: {winners}"
        assert epochs == [round_no + 1]
        winners_per_round.append(winners[0])
    assert store.get_lease(run_id).owner == winners_per_round[-1]

    acquired = [event for _, event in store.list_events(run_id, event_types=[EventType.LEASE_ACQUIRED])]
    assert [event.target_epoch for event in acquired] == list(range(1, ROUNDS + 1))
    assert [event.detail["owner"] for event in acquired] == winners_per_round

    ops = JsonlHistory(history_path).ops
    assert sum(1 for op in ops if op.f == "acquire" and op.type.value == "ok") == ROUNDS
    assert sum(1 for op in ops if op.f == "acquire" and op.type.value == "fail") == ROUNDS * (PROCESSES - 1)
    assert check(ops, events=acquired) == []


def test_heartbeat_keeps_the_lease_and_flags_its_loss_after_a_takeover(store: SqlStore) -> None:
    run_id = new_run(store)
    history = ListHistory()
    coordinator = Coordinator(store, history=history)
    lease = coordinator.grant(run_id, "worker-a", ttl_s=0.4)
    assert lease is not None and lease.epoch == 1
    holder = LeaseHolder(store, lease, ttl_s=0.4)
    lost: list[LeaseLostError] = []
    with holder.heartbeat(interval_s=0.05, on_lost=lost.append) as heartbeat:
        time.sleep(0.8)  # twice the ttl: only the heartbeat keeps it alive
        assert coordinator.grant(run_id, "worker-b", ttl_s=5) is None, "a held lease must not be taken"
        assert store.get_lease(run_id).owner == "worker-a"
        taken = coordinator.grant(run_id, "worker-b", ttl_s=5, force=True)
        assert taken is not None and taken.epoch == 2
        assert heartbeat.lost.wait(2.0)
    assert lost and "epoch 1" in str(lost[0])
    with pytest.raises(LeaseLostError):
        holder.renew()
    assert holder.release() is False
    assert check(history.ops) == []


def test_a_lapsed_lease_is_taken_once_and_epochs_only_increase(store: SqlStore) -> None:
    run_id = new_run(store)
    history = ListHistory()
    coordinator = Coordinator(store, history=history)
    epochs = []
    for index in range(5):
        lease = coordinator.grant(run_id, f"owner-{index}", ttl_s=0.05)
        assert lease is not None
        epochs.append(lease.epoch)
        # The same observation cannot win twice: the compare-and-set moved the epoch on.
        assert coordinator.grant(run_id, "late", ttl_s=0.05, observed_epoch=lease.epoch - 1) is None
        coordinator.wait_until_expired(run_id, timeout_s=5)
    assert epochs == [1, 2, 3, 4, 5]
    released = coordinator.grant(run_id, "releaser", ttl_s=30)
    assert released is not None
    assert LeaseHolder(store, released, ttl_s=30).release() is True
    after = coordinator.grant(run_id, "next", ttl_s=30)
    assert after is not None and after.epoch == released.epoch + 1
    events = [event for _, event in store.list_events(run_id)]
    assert check(history.ops, events=events) == []
