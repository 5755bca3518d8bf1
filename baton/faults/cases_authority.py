"""Fault cases for the authority checks: a capability or an approval that runs out in the worker's hand.

`capability-expired-in-hand`: the authority issues a capability for the
deployment (fault point `capability_issued`) and the worker is then held
there, its lease kept alive by its heartbeat, until well past the
capability's lifetime (which the authority bounds by the lease it was issued
against). Nobody moves the run: its epoch is still current when the worker
goes on and presents that capability. Two stacked checks refuse it, each
enough alone: the capability check (the gateway's and the target's own guard:
one switch, `capability-check`) and the store claim's own expiry check
(`store-claim-expiry`); each names the other as its companion. The oracle
`expired_capability` reads the deploy service's `presented.jsonl`: the
expiry it read from the token and the time it admitted the request.

The transcript controls carry no capability: they hold at `before_send` for
the same time (their request in hand).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from baton.faults.rig import Rig, wait_until

if TYPE_CHECKING:
    from baton.faults.cases import CaseRun

SOURCE = "local-gpu-eu"
HELD_S = 8.0
"""How long the worker holds the issued capability: four of the matrix's 2 s leases, so it has run out."""
EXPIRY_COMPANIONS = {"capability-check": ("store-claim-expiry",), "store-claim-expiry": ("capability-check",)}
"""The two checks that refuse an expired capability; each is tested alone (ablating one switches the other off)."""


def _held_past(run: CaseRun, rig: Rig, notes: list[str], point: str, seconds: float, what: str) -> None:
    """Start the run's worker held at `point` (a control at `before_send`), keep it there `seconds` with its lease
    kept, let it go on, and wait for the run's end."""
    point = point if run.strategy == "baton" else "before_send"
    run.worker(SOURCE, point=point)
    run.launch()
    rig.wait_reached(point)
    held = time.monotonic()
    wait_until(lambda: time.monotonic() - held > seconds, timeout_s=seconds + 30.0, what=what)
    rig.release(point)
    notes.append(f"{run.strategy}: held at {point} for {seconds:.0f} s (lease kept), then let go on")
    notes.append(f"ended {run.wait_end()}")


def capability_expired_in_hand(run: CaseRun, rig: Rig, notes: list[str]) -> None:
    """A worker holds a fresh capability, its lease kept, until the capability expires; then it presents it."""
    _held_past(run, rig, notes, "capability_issued", HELD_S, "the held capability to run out")


_CEILING_LAYERS = ("gate:authority_downgraded", "authority-downgrade", "gateway-ceiling", "authority-ceiling")
DOWNGRADE_COMPANIONS = {layer: tuple(other for other in _CEILING_LAYERS if other != layer) for layer in _CEILING_LAYERS}
"""Four layers keep a run from acting above a placement's lowered ceiling, each enough alone: the gate's downgrade
finding (the committed move's decided ceiling, which the resume also caps the run's authority at, and which drops
approvals for re-authorization), the resume's own downgrade of the run's authority to the target's ceiling as the
catalog has it then, the authority's refusal to issue above the ceiling the store's catalog has at issue time, and
the standing worker's gateway, which caps capabilities at the ceiling the catalog has at each resume. Ablating one
switches the others off with it. (`ceiling-lowered-downgrade-allowed` runs the script of `placement-ceiling-lowered`,
`cases_gates`, under a handoff policy that allows the downgrade.)"""

FORBIDDEN_DOWNGRADE_COMPANIONS = {
    "gate:authority_downgrade_forbidden": ("authority-downgrade", "gateway-ceiling", "authority-ceiling"),
}
"""Under the fleet policy the gate refuses a downgrade outright; with that reason off the move commits, and the
resume's own downgrade (the executor reads the lowered ceiling from the catalog), the authority's ceiling check and
the gateway's cap at the lowered ceiling each still keep the run from deploying. Ablating the refusal switches all
three off with it, so the refusal alone is tested."""


APPROVAL_TTL_S = 4.0
"""The approvals the authority's approver signs in `approval-expired-in-hand` last this long."""
APPROVAL_HELD_S = 2 * APPROVAL_TTL_S


def approval_expired_in_hand(run: CaseRun, rig: Rig, notes: list[str]) -> None:
    """The deployment is approved and the worker has checked its approval and sealed its intent (COMMITTING); it is
    held there, its lease kept, until the approval has expired; then it asks for its capability and goes on."""
    _held_past(run, rig, notes, "sealed:COMMITTING", APPROVAL_HELD_S, "the approval to run out")
