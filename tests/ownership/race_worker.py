"""Body of one contender in the lease race (multiprocessing 'spawn'); imports only what it needs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from baton.history import JsonlHistory
from baton.ownership import Coordinator
from baton.store.factory import open_store

RACE_TTL_S = 0.05
WAIT_S = 120.0


def race_contender(url: str, run_id: str, name: str, rounds: int, barrier: Any, out_path: str, history_path: str) -> None:
    """Each round: wait for the start, then try to take the lapsed lease from the epoch of that round."""
    store = open_store(url)
    coordinator = Coordinator(store, name=name, history=JsonlHistory(history_path))
    results: list[dict[str, Any]] = []
    try:
        for round_no in range(rounds):
            barrier.wait(WAIT_S)
            lease = coordinator.grant(run_id, name, ttl_s=RACE_TTL_S, observed_epoch=round_no)
            results.append({"round": round_no, "won": lease is not None, "epoch": None if lease is None else lease.epoch})
            barrier.wait(WAIT_S)
    finally:
        store.close()
        Path(out_path).write_text(json.dumps({"name": name, "results": results}))
