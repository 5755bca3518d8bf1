"""Named kill points: a test-only SIGKILL in a gap between two durable steps.

A crash test names one point in `BATON_KILL_POINT` (and a mark file in
`BATON_KILL_POINT_MARK`) in the environment of the process it wants dead.
When that process reaches `kill_point(point)` it creates the mark file
(exclusively: the point fires once per mark, so a restarted process that
inherited the environment carries on), writes the point and its pid there,
and sends itself SIGKILL: no cleanup, no rollback by the code under test.
Unset, `kill_point` costs one environment lookup and does nothing.
"""

from __future__ import annotations

import os
import signal
from enum import StrEnum

KILL_POINT_ENV = "BATON_KILL_POINT"
MARK_ENV = "BATON_KILL_POINT_MARK"


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


def parse_kill_point(value: str) -> KillPoint:
    """The point named by `value`; ValueError listing the known names otherwise."""
    try:
        return KillPoint(value.strip())
    except ValueError:
        known = ", ".join(point.value for point in KillPoint)
        raise ValueError(f"unknown kill point {value!r} in {KILL_POINT_ENV}; known: {known}") from None


def kill_point(point: KillPoint) -> None:
    """SIGKILL this process here if the environment names `point` and its mark is not taken yet."""
    armed = os.environ.get(KILL_POINT_ENV)
    if not armed or parse_kill_point(armed) is not point:
        return
    mark = os.environ.get(MARK_ENV)
    if mark:
        try:
            fd = os.open(mark, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return  # fired once already
        os.write(fd, f"{point.value} {os.getpid()}\n".encode())
        os.fsync(fd)
        os.close(fd)
    os.kill(os.getpid(), signal.SIGKILL)
