"""Body of the process the seal kill-point test SIGKILLs: SDK boundaries in a loop, as fast as it can.

Usage: python seal_kill_worker.py <store url> <home> <run id>. Every third
observation is large enough to go to a blob file (BATON_BLOBS_LARGE_BYTES is
set small by the test), so both write paths of the default backend run.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from baton.bench.ckpt_sdk import start_sdk_run
from baton.store.factory import open_blobs, open_store


def main(url: str, home: str, run_id: str) -> None:
    store = open_store(url, Path(home))
    ctx = start_sdk_run(store, open_blobs(Path(home), store), run_id)
    print("ready", flush=True)
    step = 0
    while True:
        size = 6000 if step % 3 == 0 else 300
        content = os.urandom(size // 2).hex().encode()
        ctx.observe("kill://loop", {"step": step}, content, freshness_s=3600)
        step += 1


if __name__ == "__main__":
    main(*sys.argv[1:4])
