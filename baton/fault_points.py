"""A test-harness hook: freeze a process at one named point so the fault matrix can kill or stop it.

`BATON_FAULT_POINT=<point>` and `BATON_FAULT_DIR=<dir>` (both set only by
`baton.faults`) make the first arrival at `<point>` write `<dir>/<point>.reached`
(holding the pid) and then wait until `<dir>/<point>.go` exists. The harness
SIGKILLs or SIGSTOPs the process meanwhile. Without the variables `reached`
returns at once. Points: `sealed:<BOUNDARY>` (a checkpoint was just made
durable), `capability_issued` (the SDK holds a fresh capability for a mutation
the gateway has not yet checked), `before_send` (a mutation passed every
check and is about to be sent to its target) and `after_reply` (the target
answered that it applied the mutation; the caller has recorded nothing of it yet).
"""

from __future__ import annotations

import os
import threading
from baton import clock
from pathlib import Path

POINT_ENV = "BATON_FAULT_POINT"
DIR_ENV = "BATON_FAULT_DIR"
_fired: set[str] = set()
_lock = threading.Lock()


def marker(directory: Path, point: str, suffix: str) -> Path:
    """The file the hook writes (`reached`) or waits for (`go`)."""
    return Path(directory) / f"{point.replace(':', '-')}.{suffix}"


def reached(point: str) -> None:
    """Hold here once when the harness named `point`; return at once otherwise."""
    if os.environ.get(POINT_ENV) != point or not os.environ.get(DIR_ENV):
        return
    with _lock:
        if point in _fired:
            return
        _fired.add(point)
    directory = Path(os.environ[DIR_ENV])
    marker(directory, point, "reached").write_text(str(os.getpid()))
    while not marker(directory, point, "go").exists():
        clock.sleep(0.05)
