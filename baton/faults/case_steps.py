"""Steps the case scripts share: kill the worker where it waits, and move the run or note why it stays."""

from __future__ import annotations

from typing import TYPE_CHECKING

from baton.faults.rig import Rig, sigkill

if TYPE_CHECKING:
    from baton.faults.cases import CaseRun


def kill_at(run: CaseRun, rig: Rig, notes: list[str], point: str) -> int:
    """SIGKILL the run's worker once it is held at `point`; returns its pid."""
    pid = rig.wait_reached(point)
    sigkill(pid)
    notes.append(f"{run.strategy}: worker {pid} SIGKILLed at {point}")
    return pid


def move_or_stay(run: CaseRun, notes: list[str], to: str, why: str = "") -> None:
    """Hand the run off to `to`; wait for its end, or note that it stays when the move was aborted."""
    moved = run.hand_off(to)
    notes.append(moved)
    if moved.endswith("aborted"):
        notes.append(f"the run stays unmoved: {why}" if why else "the run stays unmoved")
        return
    notes.append(f"ended {run.wait_end()}")
