"""A coordinator as its own process, so a crash test can SIGKILL it mid-move (`baton.fault_points`).

    python tests/crash/mover.py --home DIR [--database-url URL] --run RUN --target PLACEMENT

Waits until the deploy target's own record file holds a deployment of RUN (so
the move happens after the side effect, where a duplicate could arise), then
moves the run with a live source through `baton.runtime.dispatch.run_handoff`,
the path the fleet and Dagster's handoff job take, and prints the outcome as
JSON. With BATON_KILL_POINT set in its environment it dies at that point instead.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from baton.catalog.changes import current_placements
from baton.handoff.coordinator import HandoffRequest
from baton.runtime.dispatch import DispatchSettings, run_handoff
from baton.store.factory import open_blobs, open_store
from baton.targets.deploy_service import DEPLOYMENTS_FILE
from baton.targets.service_process import target_data_dir


def _deployed(home: Path, run_id: str) -> bool:
    path = target_data_dir("deploy", home) / DEPLOYMENTS_FILE
    if not path.exists():
        return False
    for line in path.read_text().splitlines():
        try:
            if json.loads(line).get("run_id") == run_id:
                return True
        except json.JSONDecodeError:
            continue  # a line being written
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--run", required=True)
    parser.add_argument("--target", required=True)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--ready", type=Path, default=None, help="file to create once polling (imports done)")
    args = parser.parse_args(argv)
    store = open_store(args.database_url, args.home)
    if args.ready is not None:
        args.ready.write_text("ready\n")
    deadline = time.monotonic() + args.timeout
    while not _deployed(args.home, args.run):
        if time.monotonic() > deadline:
            print(json.dumps({"error": "no deployment of the run appeared"}))
            return 2
        time.sleep(0.02)
    try:
        request = HandoffRequest(args.run, "crash-test", preferred_targets=(args.target,), source_alive=True)
        outcome = run_handoff(store, open_blobs(args.home, store), args.home, current_placements(store), request,
                              DispatchSettings(reservation_ttl_s=10.0, quiesce_timeout_s=5.0))
    finally:
        store.close()
    print(json.dumps({"status": outcome.status.value, "target": outcome.target_placement,
                      "epoch": outcome.target_epoch, "abort_reason": outcome.abort_reason}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
