"""Named fault points: places in production code where a test harness may hold or kill the process.

Production code marks a point with one call, `reached(point)`. Unarmed (the
normal case) it costs two environment lookups and returns. A harness arms a
point in the environment of the process it targets, with one of two actions:

* **hold** (`BATON_FAULT_POINT=<point>`, `BATON_FAULT_DIR=<dir>`, set by
  `baton.faults` and the fleet's pause): the first arrival in the process writes
  `<dir>/<point>.reached` (holding the pid), then waits until `<dir>/<point>.go`
  exists. The harness SIGKILLs or SIGSTOPs the process meanwhile.
* **kill** (`BATON_KILL_POINT=<point>`, optional `BATON_KILL_POINT_MARK=<file>`,
  set by the crash tests): the process creates the mark file exclusively (the
  point fires once per mark, so a restarted process that inherited the
  environment carries on), writes the point and its pid there, and sends
  itself SIGKILL: no cleanup, no rollback by the code under test.

The points:

* every gap between two durable steps of a move and of a bundle import
  (`KillPoint`, see docs/kill-points.md);
* `sealed:<BOUNDARY>`: a checkpoint at that boundary was just made durable;
* `capability_issued`: the SDK holds a fresh capability for a mutation the
  gateway has not yet checked;
* `before_send`: a mutation passed every check of the gateway and is about to
  be sent to its target;
* `after_reply`: the target answered that it applied the mutation; the caller
  has recorded nothing of it yet;
* `reservation_read`: a worker read a run's reservation (the epoch its claim
  will compare-and-set on) and has not claimed it yet. A read, not a durable
  step: nothing to recover, only a stale view to act on later.

An armed name that is none of these is refused with the list of known names.
"""

from __future__ import annotations

import os
import re
import signal
import threading
from enum import StrEnum
from pathlib import Path

from baton import clock

POINT_ENV = "BATON_FAULT_POINT"
DIR_ENV = "BATON_FAULT_DIR"
KILL_POINT_ENV = "BATON_KILL_POINT"
MARK_ENV = "BATON_KILL_POINT_MARK"
BEFORE_SEND = "before_send"
CAPABILITY_ISSUED = "capability_issued"
AFTER_REPLY = "after_reply"
RESERVATION_READ = "reservation_read"
_MUTATION_POINTS = (CAPABILITY_ISSUED, BEFORE_SEND, AFTER_REPLY)
_NAMED_POINTS = (*_MUTATION_POINTS, RESERVATION_READ)
_SEALED = re.compile(r"^sealed:[A-Z][A-Z0-9_]*$")
_held: set[str] = set()
_lock = threading.Lock()


class KillPoint(StrEnum):
    """Every gap between durable steps of a move (and of a bundle import)."""

    PREPARE_REQUESTED = "prepare.requested"
    """The request is recorded; the sealed checkpoint, target and gate decision are not."""
    PREPARE_RESERVED = "prepare.reserved"
    """Prepare's findings are recorded (target selected, gate passed); the commit has not started."""
    COMMIT_TRANSFERRED = "commit.transferred"
    """The one-transaction commit is durable; the coordinator has not fenced the targets yet."""
    ADOPT_CLAIMED = "adopt.claimed"
    """A worker of the target won the reservation (targets fenced at its epoch); nothing restored yet."""
    RESTORE_STARTED = "restore.started"
    """The new owner recorded STATE_RESTORED / RESUME_STARTED; no open operation reconciled, no step taken."""
    CONFIRM_SEALED = "confirm.sealed"
    """The first resumed checkpoint is sealed; RESUME_VERIFIED is not recorded."""
    BUNDLE_ROWS = "bundle.rows"
    """A bundle import wrote the run and its first checkpoint inside its transaction, not the rest."""


def parse_point(value: str, *, variable: str = KILL_POINT_ENV) -> str:
    """The point named by `value` (a `KillPoint`, a mutation point or `sealed:<BOUNDARY>`); ValueError otherwise."""
    name = value.strip()
    if name in {point.value for point in KillPoint} or name in _NAMED_POINTS or _SEALED.match(name):
        return name
    known = ", ".join([*(point.value for point in KillPoint), *_NAMED_POINTS, "sealed:<BOUNDARY>"])
    raise ValueError(f"unknown fault point {value!r} in {variable}; known: {known}")


def marker(directory: Path, point: str, suffix: str) -> Path:
    """The file the hold action writes (`reached`) or waits for (`go`)."""
    return Path(directory) / f"{point.replace(':', '-')}.{suffix}"


def reached(point: str) -> None:
    """The process is at `point`: kill or hold here if the environment arms it, else return at once."""
    armed = os.environ.get(KILL_POINT_ENV)
    if armed and parse_point(armed) == point:
        _kill(point)
    if os.environ.get(POINT_ENV) == point and os.environ.get(DIR_ENV):
        _hold(point, Path(os.environ[DIR_ENV]))


def _kill(point: str) -> None:
    mark = os.environ.get(MARK_ENV)
    if mark:
        try:
            fd = os.open(mark, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return  # fired once already
        os.write(fd, f"{point} {os.getpid()}\n".encode())
        os.fsync(fd)
        os.close(fd)
    os.kill(os.getpid(), signal.SIGKILL)


def _hold(point: str, directory: Path) -> None:
    with _lock:
        if point in _held:
            return
        _held.add(point)
    marker(directory, point, "reached").write_text(str(os.getpid()))
    while not marker(directory, point, "go").exists():
        clock.sleep(0.05)
