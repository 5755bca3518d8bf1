"""The stale-worker case whose request really reaches the epoch checks: a capability still valid after the move.

A worker holds a fresh capability for its deployment (fault point
`capability_issued`: the authority issued it, the gateway has not yet seen the
request) when it stalls (SIGSTOP). Its lease has not run out, so neither has
the capability. The operator moves the run: the coordinator asks the source to
quiesce, gets no answer, commits the move and fences the targets at the new
epoch. Then the stalled worker wakes and sends its request, before any new
owner runs. Three stacked protections stand in its way, each enough alone:
the gateway's epoch check, the store's epoch check in the same claim, and the
target's fence (`FaultCase.companions`). The oracle `stale_owner` reads the
deploy service's own request log, where the fence announcement is recorded
before the stale request.

The transcript controls have no capability; they hold at `before_send` (their
request in hand, about to go out), the same moment of their protocol.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from baton.faults.rig import Rig, RigError, wait_until
from baton.targets.mutation_log import FENCE_ADVANCED

if TYPE_CHECKING:
    from baton.faults.cases import CaseRun

SOURCE = "local-gpu-eu"
TARGET = "cloud-eu"
LEASE_TTL_S = 10.0
"""Long enough that the stalled worker's capability (bounded by its lease) outlives the move."""
EPOCH_LAYERS = ("gateway-epoch", "store-claim-epoch", "target-fence")
EPOCH_COMPANIONS = {layer: tuple(other for other in EPOCH_LAYERS if other != layer) for layer in EPOCH_LAYERS}
"""Each epoch layer is tested alone: ablating one switches the other two off with it."""


def _sent(rig: Rig, run_id: str) -> list[dict[str, object]]:
    return [r for r in rig.requests_of(run_id) if r.get("result") != FENCE_ADVANCED]


def stale_capability_after_move(run: CaseRun, rig: Rig, notes: list[str]) -> None:
    """Stalled with a valid capability, the run moved under it, woken before the new owner starts."""
    point = "capability_issued" if run.strategy == "baton" else "before_send"
    run.worker(SOURCE, point=point)
    run.launch()
    rig.wait_reached(point)
    pid = run.freeze(SOURCE)
    rig.release(point)
    notes.append(f"{run.strategy}: worker {pid} SIGSTOPped at {point}, its lease still held")
    notes.append(run.hand_off(TARGET, reason="operator_move", start_worker=False, source_alive=True))
    before = len(_sent(rig, run.run_id))
    run.thaw(pid)
    try:
        wait_until(lambda: len(_sent(rig, run.run_id)) > before, timeout_s=8.0, what="the stale request")
        notes.append(f"woken worker's request reached the target: {_sent(rig, run.run_id)[-1].get('result')}")
    except RigError:
        notes.append("the woken worker's request never reached the target")
    run.worker(TARGET)
    notes.append(f"ended {run.wait_end()}")
