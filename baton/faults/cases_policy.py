"""Fault cases for the handoff policy's own rules: a deployment that keeps runs in their region or with their
provider, and one that allows a behavioral migration whose approval has run out.

Baton's moves in these cases run under the fleet policy changed as the case says (`FaultCase.handoff_policy`),
as a deployment whose run owner asks for that would configure it. Each case writes the owner's own record first
(outside Baton), and the operator's inventory of its placements (`cases_gates2.write_inventory`).

- `region-change-forbidden-moved`, `provider-change-forbidden-moved`: the owner keeps the run in the region, or
  with the provider, of the placement it was launched on (local-gpu-eu: eu-west, local), written as its
  portability rule (`same_region_as` / `same_provider_as`); the policy sets only that one of
  `require_same_region` / `require_same_provider`. After VERIFIED the worker dies and the run is moved to cloud-eu
  (eu-central, cloudco). Only the one rule in force is broken by that move: the other is not part of the policy
  or of the owner's rule, so no second reason stands behind the one under test. (The default catalog has no
  placement in eu-west on another provider, and its one local placement in another region, browser-pool-eu,
  cannot deploy, so a target breaking only one of the two rules under a policy holding both does not exist.)
  With protections on the coordinator passes cloud-eu over and resumes the run where it was. The oracle
  `constraint_breach` holds the targets' presented-capability logs against the rule and the inventory.
- `behavioral-move-unapproved`: as `behavioral-move` (a model-v7 run moved to cloud-us, which serves only
  model-v8), under a policy that allows the v7 -> v8 migration but whose only approval of it expired before the
  case. The owner's record (`migration-approvals.json`) names the release the run is pinned to and that
  approval. With protections on the coordinator passes cloud-us over (the v7 placements remain); with the
  reason ablated the gate lets the run onto cloud-us. The oracle `unapproved_migration` holds the provider's
  bill and the targets' presented logs against the owner's record and the operator's inventory.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import TYPE_CHECKING, Any

from baton.catalog.releases import RELEASES
from baton.compat import MigrationApproval
from baton.faults.case_steps import kill_at, move_or_stay
from baton.faults.cases_gates2 import write_inventory
from baton.faults.oracles_gates import APPROVALS_FILE, RULE_FILE
from baton.faults.rig import Rig

if TYPE_CHECKING:
    from baton.faults.cases import CaseRun, Script

SOURCE = "local-gpu-eu"
TARGET = "cloud-eu"
"""eu-central on cloudco: another region and another provider than the source; runs model-v7 and reads schema 3."""
V8_ONLY = "cloud-us"

SAME_REGION: dict[str, Any] = {"require_same_region": True}
SAME_PROVIDER: dict[str, Any] = {"require_same_provider": True}

EXPIRED_APPROVAL = MigrationApproval(
    approval_id="release-board-model-v8-2026q1",
    from_release_id=RELEASES["model-v7"].release_id,
    to_release_id=RELEASES["model-v8"].release_id,
    approved_by="release-board",
    expires_at=dt.datetime(2026, 3, 31, tzinfo=dt.timezone.utc),
)
"""The release board's approval of the v7 -> v8 migration, which ran out before any case ran."""
UNAPPROVED: dict[str, Any] = {"approvals": (EXPIRED_APPROVAL,)}
"""The fleet policy (which allows v7 -> v8) with only that expired approval of the migration."""


def write_rule(rig: Rig, rule: dict[str, Any]) -> None:
    """The run owner's portability rule, in its own words."""
    (rig.root / RULE_FILE).write_text(json.dumps(rule, sort_keys=True))


def write_approvals(rig: Rig, approvals: tuple[MigrationApproval, ...]) -> None:
    """The run owner's record: the release its run is pinned to and the migrations off it that it approved."""
    record = {"pinned_release": RELEASES["model-v7"].release_id,
              "approvals": [a.model_dump(mode="json") for a in approvals]}
    (rig.root / APPROVALS_FILE).write_text(json.dumps(record, sort_keys=True))


def _kept_to(fact: str) -> Script:
    def script(run: CaseRun, rig: Rig, notes: list[str]) -> None:
        write_inventory(rig)
        write_rule(rig, {f"same_{fact}_as": SOURCE})
        run.worker(SOURCE, point="sealed:VERIFIED")
        run.launch()
        kill_at(run, rig, notes, "sealed:VERIFIED")
        run.wait_lease_lapsed()
        move_or_stay(run, notes, TARGET, f"its owner keeps it to {SOURCE}'s {fact}")

    script.__doc__ = (f"The owner keeps the run to {SOURCE}'s {fact}; after VERIFIED the worker dies; the run is "
                      f"moved to {TARGET}, in another {fact}.")
    return script


region_change_forbidden_moved = _kept_to("region")
provider_change_forbidden_moved = _kept_to("provider")


def behavioral_move_unapproved(run: CaseRun, rig: Rig, notes: list[str]) -> None:
    """After VERIFIED the worker dies; the model-v7 run is moved to cloud-us, which serves only model-v8, while the
    only approval of that migration has expired."""
    write_inventory(rig)
    write_approvals(rig, UNAPPROVED["approvals"])
    run.worker(SOURCE, point="sealed:VERIFIED")
    run.launch()
    kill_at(run, rig, notes, "sealed:VERIFIED")
    run.wait_lease_lapsed()
    move_or_stay(run, notes, V8_ONLY, "the migration to model-v8 is not approved")
