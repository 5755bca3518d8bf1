"""Fault cases of the coding and browser agents: a real git remote with pytest, a real web application.

Each script acts from outside, as the deploy and research cases do: a fault
point named to the worker (or control) process, SIGKILL there, an upstream
commit to the git remote, a person editing the server-side draft, then a move.
The oracles read the remote's push log and bare repository and the
application's submissions and draft history (`baton.faults.oracles_agents`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from baton.faults.case_steps import kill_at
from baton.faults.rig import Rig, TargetOptions
from baton.faults.rig_agents import BROWSER_SOURCE, REPOSITORY, commit_upstream, person_edits_draft

if TYPE_CHECKING:
    from baton.faults.cases import CaseRun, FaultCase

SOURCE = "local-gpu-eu"
SAME_RELEASE = "cloud-eu"
UPSTREAM_TEST = "tests/test_upstream.py"
UPSTREAM_TEXT = (
    "from calc.stats import mean\n"
    "\n"
    "\n"
    "def test_mean_of_nothing_is_zero():\n"
    "    assert mean([]) == 0\n"
)
"""Upstream's new test while the run's patch waits: the mean of no values is 0. The run's fix (divide by the
count) raises on it; the buggy code it replaces (divide by count - 1) happens to pass it."""
PERSON_SEATS = "99"


def coding_killed_after_push(run: CaseRun, rig: Rig, notes: list[str]) -> None:
    """The git remote applied the push and answered; the worker dies before recording it; the run moves."""
    run.worker(SOURCE, point="after_reply")
    run.launch()
    kill_at(run, rig, notes, "after_reply")
    run.wait_lease_lapsed()
    notes.append(run.hand_off(SAME_RELEASE))
    notes.append(f"ended {run.wait_end()}")


def coding_remote_moved_after_verify(run: CaseRun, rig: Rig, notes: list[str]) -> None:
    """The patch passed pytest; while the worker pauses (lease kept) upstream commits a new test the patch
    fails; it goes on without moving: the tree it would push is no longer the tree it tested."""
    run.worker(SOURCE, point="sealed:VERIFIED")
    run.launch()
    rig.wait_reached("sealed:VERIFIED")
    commit = commit_upstream(rig.home, REPOSITORY, UPSTREAM_TEST, UPSTREAM_TEXT, "Upstream: the mean of nothing is 0")
    notes.append(f"{run.strategy}: paused at sealed:VERIFIED; upstream committed {commit[:12]} ({UPSTREAM_TEST})")
    rig.release("sealed:VERIFIED")
    notes.append(f"ended {run.wait_end()}")


def browser_killed_awaiting_reply(run: CaseRun, rig: Rig, notes: list[str]) -> None:
    """The application recorded the submission and answered; the worker dies before recording the answer;
    the run moves to a new worker of the browser pool."""
    run.worker(BROWSER_SOURCE, point="after_reply")
    run.launch()
    kill_at(run, rig, notes, "after_reply")
    run.wait_lease_lapsed()
    notes.append(run.hand_off(BROWSER_SOURCE, start_worker=False))
    run.worker(BROWSER_SOURCE)
    notes.append(f"ended {run.wait_end()}")


def browser_draft_changed_during_move(run: CaseRun, rig: Rig, notes: list[str]) -> None:
    """The filled draft is verified; the worker dies; a person of the account changes an answer in the
    server-side draft; the run moves to a new worker of the browser pool."""
    run.worker(BROWSER_SOURCE, point="sealed:VERIFIED")
    run.launch()
    kill_at(run, rig, notes, "sealed:VERIFIED")
    notes.append(person_edits_draft(rig.home, run.run_id, {"seats": PERSON_SEATS}))
    run.wait_lease_lapsed()
    notes.append(run.hand_off(BROWSER_SOURCE, start_worker=False))
    run.worker(BROWSER_SOURCE)
    notes.append(f"ended {run.wait_end()}")


_GIT = TargetOptions(agents=("git",))
_WEBAPP = TargetOptions(agents=("webapp",))


def agent_cases() -> tuple[FaultCase, ...]:
    """The coding and browser cases, appended to `baton.faults.cases.CASE_LIST`."""
    from baton.faults.cases import FaultCase  # the case type is defined there, before it calls this

    return (
        FaultCase("coding-killed-after-push", "coding worker SIGKILLed after the remote applied its push, before "
                  "recording it", "coding", coding_killed_after_push, _GIT),
        FaultCase("coding-remote-moved-after-verify", "upstream commits a test the verified patch fails while the "
                  "worker pauses before pushing", "coding", coding_remote_moved_after_verify, _GIT),
        FaultCase("browser-killed-awaiting-reply", "browser worker SIGKILLed after the application recorded its "
                  "submission, before recording the answer", "browser", browser_killed_awaiting_reply, _WEBAPP),
        FaultCase("browser-draft-changed-during-move", "a person changes the verified server-side draft while the "
                  "run is moved", "browser", browser_draft_changed_during_move, _WEBAPP),
    )


__all__ = ["agent_cases"]
