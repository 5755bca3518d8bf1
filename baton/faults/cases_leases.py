"""A claim made on a reservation read before the run moved: the compare-and-set on the epoch (`lease-cas`).

A worker of the source placement reads the run's reservation (epoch 1) and
stalls before it claims it (fault point `reservation_read`). Meanwhile the
operator moves the run to another placement (epoch 2, reserved there), and a
worker there claims it (epoch 3), fences the targets at 3 and holds before it
restores anything (`adopt.claimed`). Then the stalled worker makes its claim on
what it read. The claim is a compare-and-set on that epoch: the store holds 3,
not 1, so the claim wins nothing and the rightful owner goes on.

Without the compare-and-set the claim takes epoch 1+1 = 2, an epoch already
issued, and the run's epoch goes back from 3 to 2. The gateway's and the store
claim's epoch checks compare with the store's epoch, now 2, and pass the stale
worker's deployment; only the targets' fences, which saw epoch 3, still stand
in its way (`FaultCase.companions`). The oracle `stale_owner` reads the deploy
service's own request log: the fence announced at epoch 3, then a deployment
applied at epoch 2. With the fence on and the compare-and-set off, both workers
end fenced and the run owns nobody; the operator moves it on once its lease has
lapsed, as after any lost owner.

Two workers of one placement racing for one reservation hold the same epoch
instead, and nothing outside tells them apart: traced live (lease-cas off), both
ran at epoch 2, the store's checkpoint chain refused the second one's seal
(wrong seq), the run failed before it deployed, and the targets recorded only
two fence announcements at epoch 2. That is why this case moves the run between
the read and the claim.

The transcript controls have no reservation and no claim: their source worker
stalls at `before_send` (the request it built from its earlier read in hand),
the run moves, and it wakes after the new worker is done.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from baton.fault_points import RESERVATION_READ, KillPoint
from baton.faults.baton_side import TERMINAL, BatonRun
from baton.faults.case_steps import stall_before_send, wake_stalled
from baton.faults.rig import Rig, wait_until
from baton.runtime.supervisor import WORKER_OWNER_PREFIX, WorkerSlot

if TYPE_CHECKING:
    from baton.faults.cases import CaseRun

SOURCE = "local-gpu-eu"
TARGET = "cloud-eu"
HELD = KillPoint.ADOPT_CLAIMED.value
LEASE_CAS_COMPANIONS = {"lease-cas": ("target-fence",)}
"""The targets' fences are the one other layer in the way of a regressed epoch (the gateway and the store claim
compare with the regressed epoch itself); ablating `lease-cas` switches them off with it."""


def _claim_answer(run: BatonRun, owner: str) -> dict[str, object] | None:
    """The completion the history records for `owner`'s claim (acquire) on the run, once there is one."""
    if not run.history_path.exists():
        return None
    for line in run.history_path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line) if line.strip() else {}
        if (record.get("f") == "acquire" and record.get("process") == owner and record.get("run_id") == run.run_id
                and record.get("type") in ("ok", "fail", "info")):
            return record
    return None


def _ended_or_ownerless(run: BatonRun) -> str | None:
    """The run's final status, "lapsed" once nobody holds its lease while it is still active, else None."""
    status = run.store.get_run(run.run_id).status
    if status in TERMINAL:
        return status
    if run.store.get_lease(run.run_id).held_at(run.store.db_now()):
        return None
    status = run.store.get_run(run.run_id).status  # the owner may have finished and released in between
    return status if status in TERMINAL else "lapsed"


def stale_claim_after_move(run: CaseRun, rig: Rig, notes: list[str]) -> None:
    """A worker stalled between reading the run's reservation and claiming it claims after the run moved on."""
    if not isinstance(run, BatonRun):
        _control(run, rig, notes)
        return
    stalled = run.worker(SOURCE, point=RESERVATION_READ)
    assert isinstance(stalled, WorkerSlot)
    run.launch()
    rig.wait_reached(RESERVATION_READ)
    observed = run.store.get_lease(run.run_id).epoch
    notes.append(f"baton: worker {stalled.worker_id} read the reservation at epoch {observed} and stalled")
    notes.append(run.hand_off(TARGET, reason="operator_move", start_worker=False))
    run.worker(TARGET, point=HELD)
    rig.wait_reached(HELD)
    notes.append(f"{TARGET} worker claimed epoch {run.store.get_lease(run.run_id).epoch}, targets fenced; held")
    owner = WORKER_OWNER_PREFIX + stalled.worker_id
    rig.release(RESERVATION_READ)
    answer = wait_until(lambda: _claim_answer(run, owner), timeout_s=30.0, what="the stalled worker's claim")
    notes.append(f"stalled claim on epoch {observed}: {answer.get('type')} at epoch {answer.get('epoch')}")
    rig.release(HELD)
    state = wait_until(lambda: _ended_or_ownerless(run), timeout_s=120.0, what="the run to end or lose its owner")
    if state == "lapsed":
        notes.append("every owner was fenced; the lease lapsed")
        notes.append(run.hand_off(TARGET, reason="lease_expired"))
    notes.append(f"ended {run.wait_end()}")


def _control(run: CaseRun, rig: Rig, notes: list[str]) -> None:
    """The controls' moment: the source worker stalls with a request built on its earlier read; woken after the move."""
    pid = stall_before_send(run, rig, notes, SOURCE)
    notes.append(run.hand_off(TARGET, reason="operator_move"))
    notes.append(f"moved run ended {run.wait_end()}")
    wake_stalled(run, rig, notes, pid)
    notes.append(f"ended {run.wait_end()}")
