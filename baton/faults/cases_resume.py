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
  executor records the end of a run adopted at a terminal boundary before it weighs anything else), in
  `ended_run_moved_to_unfit` below: the run has ended, its worker is held before recording the end, and a
  planned move is asked for; before the target's worker adopts it, the operator takes the release's verifier
  off the target. Either layer records the run's end. Both off: the move commits, the adopting worker refuses
  the unfit placement and lets the run go, the old worker is fenced, and the run never reports its outcome
  while the deploy service holds its deployment (oracle `unknown_hidden`). The simulation found this first
  (seed 37: a withdrawn release instead of a lost verifier, and the coordinator re-reserving the ended run
  every poll, a new epoch each time). `terminal_checkpoint_moved` is the same move onto a fit placement: there
  the agent's loop ends at the terminal boundary at once, so nothing shows (not a matrix case).

The two cases name each layer's partner as its companion (`FaultCase.companions`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from baton.faults.cases_gates import WITHOUT_VERIFIER
from baton.faults.rig import RigError

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
TERMINAL_COMPANIONS: dict[str, tuple[str, ...]] = {
    "gate:checkpoint_not_resumable": ("resume-terminal-guard",),
    "resume-terminal-guard": ("gate:checkpoint_not_resumable",),
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


END_WAIT_S = 20.0
"""How long the case waits for the run to report its end once its held worker goes on (it ends in about a second)."""


def ended_run_moved_to_unfit(run: CaseRun, rig: Rig, notes: list[str]) -> None:
    """The run has ended (POSTCONDITION_VERIFIED sealed; a control: COMMITTED, its last step); its worker is held
    there, lease kept, before recording the end; a planned move to cloud-eu is asked for; before cloud-eu's worker
    starts, the operator takes the release's verifier off cloud-eu; then the held worker goes on."""
    point = ENDED if run.strategy == "baton" else "sealed:COMMITTED"
    run.worker(SOURCE, point=point)
    run.launch()
    rig.wait_reached(point)
    notes.append(f"{run.strategy}: held at {point}, lease kept")
    notes.append(run.hand_off(TARGET, reason="operator_move", start_worker=False, source_alive=True))
    notes.append(run.change_placement(TARGET, verifiers=WITHOUT_VERIFIER))  # type: ignore[arg-type]
    run.worker(TARGET)
    rig.release(point)
    try:
        notes.append(f"ended {run.wait_end(timeout_s=END_WAIT_S)}")
    except RigError:
        notes.append(f"no end reported within {END_WAIT_S:.0f} s")
