"""The gate's informational reasons and the resume-side checks behind them, each layer alone.

Three gate reasons only shape the resume, and the resume has its own check against the same fault:

- `gate:environment_changed` (the decision's `requires_revalidation`) and `resume-environment-check`
  (`prepare_resume` compares the environment ids): in `corpus-changed` either one makes the new owner
  revalidate the report's observations, and it sees the rewritten document. Both off: the report is
  published quoting the superseded version (oracle `stale_evidence`, the corpus's document history).
- `gate:unresolved_operations` (the decision's RECONCILE_THEN_RESUME, with the checkpoint's R5 class, which
  records the same open operation) and `resume-open-operations` (the executor settles what the store lists
  PREPARED or UNKNOWN): in `killed-awaiting-reply` either one settles
  the committed deployment before the agent runs. Both off: the run resumes at COMMITTING, cannot go on and
  reports failed while the deploy service holds its deployment (oracle `unknown_hidden`).
- `gate:checkpoint_not_resumable` (the gate refuses to move an ended run) and `resume-terminal-guard` (the
  executor finishes a run adopted at a terminal boundary without running its agent), in
  `terminal_checkpoint_moved` below: with both off the move commits and the agent runs, but its loop ends at the
  terminal boundary at once and nothing rewinds one. A third layer, with no switch; nothing catches the pair
  (docs/fault-matrix.md). That script is not a matrix case: it has no oracle to show.

The two cases name each layer's partner as its companion (`FaultCase.companions`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from baton.faults.cases import CaseRun
    from baton.faults.rig import Rig

SOURCE = "local-gpu-eu"
TARGET = "cloud-eu"
ENDED = "sealed:POSTCONDITION_VERIFIED"

ENVIRONMENT_COMPANIONS: dict[str, tuple[str, ...]] = {
    "gate:environment_changed": ("resume-environment-check",),
    "resume-environment-check": ("gate:environment_changed",),
}
OPEN_OPERATION_COMPANIONS: dict[str, tuple[str, ...]] = {
    "gate:unresolved_operations": ("resume-open-operations",),
    "resume-open-operations": ("gate:unresolved_operations",),
}


def terminal_checkpoint_moved(run: CaseRun, rig: Rig, notes: list[str]) -> None:
    """The run has ended (POSTCONDITION_VERIFIED sealed); its worker is held there, lease kept, before recording the
    end; a planned move to another placement is asked for; then the worker goes on."""
    run.worker(SOURCE, point=ENDED)
    run.launch()
    rig.wait_reached(ENDED)
    notes.append(f"{run.strategy}: held at {ENDED}, lease kept")
    notes.append(run.hand_off(TARGET, reason="operator_move", source_alive=True))
    rig.release(ENDED)
    notes.append(f"ended {run.wait_end()}")
