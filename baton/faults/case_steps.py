"""Steps the case scripts share: kill the worker where it waits, stall it before it sends and wake it after the
move, and move the run or note why it stays."""

from __future__ import annotations

from typing import TYPE_CHECKING

from baton import fault_points
from baton.faults.rig import WAIT_S, Rig, RigError, sigkill, wait_until

if TYPE_CHECKING:
    from baton.faults.cases import CaseRun


def kill_at(run: CaseRun, rig: Rig, notes: list[str], point: str) -> int:
    """SIGKILL the run's worker once it is held at `point`; returns its pid."""
    pid = rig.wait_reached(point)
    sigkill(pid)
    notes.append(f"{run.strategy}: worker {pid} SIGKILLed at {point}")
    return pid


def kill_at_unless_refused(run: CaseRun, rig: Rig, notes: list[str], point: str) -> bool:
    """`kill_at`, unless the worker refused to host the run when it adopted it (noted); True when it was killed."""
    path = fault_points.marker(rig.fault_dir, point, "reached")
    wait_until(lambda: (path.exists() and path.read_text().strip()) or run.refused_at_adoption(),
               timeout_s=WAIT_S, what=f"fault point {point} or a refusal at adoption")
    refusal = run.refused_at_adoption()
    if refusal is not None and not (path.exists() and path.read_text().strip()):
        notes.append(f"{run.strategy}: the worker refused to host the run at adoption ({refusal}); nothing ran")
        return False
    kill_at(run, rig, notes, point)
    return True


def move_or_stay(run: CaseRun, notes: list[str], to: str, why: str = "") -> None:
    """Hand the run off to `to`; wait for its end, or note that it stays when the move was aborted."""
    moved = run.hand_off(to)
    notes.append(moved)
    if moved.endswith("aborted"):
        notes.append(f"the run stays unmoved: {why}" if why else "the run stays unmoved")
        return
    notes.append(f"ended {run.wait_end()}")


def stall_before_send(run: CaseRun, rig: Rig, notes: list[str], placement: str) -> int:
    """Start the run's worker on `placement`, launch, and SIGSTOP the worker once it holds a checked request
    (point `before_send`); returns its pid."""
    run.worker(placement, point="before_send")
    run.launch()
    rig.wait_reached("before_send")
    pid = run.freeze(placement)
    notes.append(f"{run.strategy}: worker {pid} SIGSTOPped at before_send")
    return pid


def wake_stalled(run: CaseRun, rig: Rig, notes: list[str], pid: int) -> None:
    """Let the stalled worker go on and note whether its stale request reached the target."""
    before = len(rig.requests_of(run.run_id))
    rig.release("before_send")
    run.thaw(pid)
    try:
        wait_until(lambda: len(rig.requests_of(run.run_id)) > before, timeout_s=60, what="the stale request")
        notes.append(f"woken worker's request reached the target: {rig.requests_of(run.run_id)[-1].get('result')}")
    except RigError:
        notes.append("the woken worker sent nothing to the target")
