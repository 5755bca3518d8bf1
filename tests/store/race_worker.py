"""Body of one contender process in the lease race test (started with multiprocessing 'spawn')."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from baton.store.factory import open_store

TTL_S = 0.05
BARRIER_TIMEOUT_S = 120.0


def contend(url: str, run_id: str, name: str, rounds: int, barrier: Any, out_path: str) -> None:
    """Each round: wait until the lease has expired, then race everyone for the next epoch."""
    results: list[dict[str, Any]] = []
    store = open_store(url)
    try:
        for round_no in range(rounds):
            time.sleep(TTL_S * 2)  # the previous winner's lease is now expired
            barrier.wait(BARRIER_TIMEOUT_S)
            lease = store.acquire_lease(run_id, name, TTL_S, expected_epoch=round_no, require_expired=True)
            results.append(
                {"round": round_no, "won": lease is not None, "epoch": None if lease is None else lease.epoch}
            )
            barrier.wait(BARRIER_TIMEOUT_S)  # nobody starts the next round early
    finally:
        store.close()
        Path(out_path).write_text(json.dumps({"name": name, "results": results}))
