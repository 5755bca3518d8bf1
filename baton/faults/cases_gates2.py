"""Fault cases for the compatibility gate's portability constraints: the run's owner restricts where its state
may be worked on, and the run is moved where that restriction does not hold.

Each case writes two records outside Baton before the run starts: the operator's inventory of its
placements (region, provider, hardware attestation, data scopes, from the catalog the operator
seeded) and the run owner's portability rule (the same rule the run carries as its constraints).
After VERIFIED the worker dies and the run is moved to `cloud-eu`. The gate must refuse that
placement; the oracle (`constraint_breach`, baton/faults/oracles_gates.py) reads the targets'
presented-capability logs against those two records.

- `non-exportable-state-moved`: the state may not leave the region and provider it was created in
  (local-gpu-eu: eu-west, local); cloud-eu is eu-central on cloudco. The coordinator passes cloud-eu
  over and resumes the run where it was (its own trust domain).
- `attestation-required-moved`, `data-scope-required-moved`: the owner requires attested hardware, or
  a data scope (`eu-customer-records`) no placement of the default catalog holds. Since stop 25 the
  worker on local-gpu-eu judges its own placement when it adopts the run and refuses to host it, so
  under Baton the run never runs anywhere; with the reason switched off it runs there, and is moved to
  cloud-eu after VERIFIED: it must never mutate anything from a placement that breaks the rule.
- `unsafe-state-moved`: both rules at once (non-exportable state that needs attested hardware). No
  placement satisfies them, the source included: the worker refuses the run at adoption (the
  attestation it lacks); were it to run, the SDK would seal every checkpoint MIGRATION_UNSAFE and
  the move would abort. Ablating `gate:migration_unsafe` switches the two per-target
  findings off with it (`FaultCase.companions`), so that the sealed class alone stands in the way.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from baton.faults.case_steps import kill_at, kill_at_unless_refused, move_or_stay
from baton.faults.oracles_gates import INVENTORY_FILE, RULE_FILE
from baton.faults.rig import Rig
from baton.placements import DEFAULT_PLACEMENTS

if TYPE_CHECKING:
    from baton.faults.cases import CaseRun

SOURCE = "local-gpu-eu"
TARGET = "cloud-eu"
"""Runs model-v7 and reads schema 3 like the source: only the constraint the case sets stands between them."""
DATA_SCOPE = "eu-customer-records"

NON_EXPORTABLE: dict[str, Any] = {"contains_non_exportable_state": True}
ATTESTED: dict[str, Any] = {"requires_hardware_attestation": True}
SCOPED: dict[str, Any] = {"data_scope": DATA_SCOPE}
UNSAFE: dict[str, Any] = {**NON_EXPORTABLE, **ATTESTED}
"""Non-exportable state that also needs attested hardware: no placement, the source included, is both in its trust
domain and attested, so every checkpoint is sealed MIGRATION_UNSAFE."""
UNSAFE_COMPANIONS: dict[str, tuple[str, ...]] = {
    "gate:migration_unsafe": ("gate:hardware_attestation_missing", "gate:non_exportable_state")}
"""The gate's two per-target findings stand against the same move as the sealed class: off with it when it alone is
ablated (each alone holds: the case is clean with only these two off)."""


def write_inventory(rig: Rig) -> None:
    """The operator's own inventory of the placements it runs (what it seeded the catalog from)."""
    inventory = {p.name: {"region": p.region, "provider": p.provider, "hardware_attested": p.hardware_attested,
                          "data_scopes": list(p.data_scopes), "releases": list(p.supported_release_ids)}
                 for p in DEFAULT_PLACEMENTS}
    (rig.root / INVENTORY_FILE).write_text(json.dumps(inventory, sort_keys=True))


def write_rule(rig: Rig, constraints: dict[str, Any]) -> None:
    """The run owner's portability rule, in the owner's words (not Baton's constraint record)."""
    rule: dict[str, Any] = {}
    if constraints.get("contains_non_exportable_state"):
        rule["non_exportable_from"] = SOURCE
    if constraints.get("requires_hardware_attestation"):
        rule["requires_hardware_attestation"] = True
    if constraints.get("data_scope") is not None:
        rule["data_scope"] = constraints["data_scope"]
    (rig.root / RULE_FILE).write_text(json.dumps(rule, sort_keys=True))


def _moved_despite(constraints: dict[str, Any], why: str) -> Callable[[CaseRun, Rig, list[str]], None]:
    def script(run: CaseRun, rig: Rig, notes: list[str]) -> None:
        write_inventory(rig)
        write_rule(rig, constraints)
        run.worker(SOURCE, point="sealed:VERIFIED")
        run.launch()
        if not kill_at_unless_refused(run, rig, notes, "sealed:VERIFIED"):
            return  # the source cannot host the run either (attestation, data scope): it never ran anywhere
        run.wait_lease_lapsed()
        move_or_stay(run, notes, TARGET, why)

    script.__doc__ = f"After VERIFIED the worker dies; the run is moved to {TARGET}, although {why}."
    return script


non_exportable_state_moved = _moved_despite(
    NON_EXPORTABLE, f"its state is non-exportable out of {SOURCE}'s region and provider")
attestation_required_moved = _moved_despite(ATTESTED, "its owner requires attested hardware")
data_scope_required_moved = _moved_despite(SCOPED, f"its owner requires data scope {DATA_SCOPE}")
unsafe_state_moved = _moved_despite(UNSAFE, "its state is non-exportable and needs attested hardware, which no "
                                    "placement of its trust domain has")


V8_ONLY = "cloud-us"
"""Serves only model-v8: a v7 run moved there is a behavioral migration (the fleet policy allows and approves it)."""
BEHAVIORAL_COMPANIONS: dict[str, tuple[str, ...]] = {
    "gate:behavioral_migration_approved": ("gate:runtime_changed",),
    "gate:runtime_changed": ("gate:behavioral_migration_approved",)}
"""local-gpu-eu (baton-worker:1.4) -> cloud-us (1.5) changes the runtime too: either finding alone makes the gate
demand reverification, so each is switched off with the other (each alone holds: the case is clean with only its
companion off)."""


def behavioral_move(run: CaseRun, rig: Rig, notes: list[str]) -> None:
    """After VERIFIED the worker dies; the run (on model-v7) is moved to cloud-us, which serves only model-v8: an
    approved behavioral migration, after which the candidate and its evidence must be made again under v8."""
    write_inventory(rig)
    run.worker(SOURCE, point="sealed:VERIFIED")
    run.launch()
    kill_at(run, rig, notes, "sealed:VERIFIED")
    run.wait_lease_lapsed()
    move_or_stay(run, notes, V8_ONLY)
