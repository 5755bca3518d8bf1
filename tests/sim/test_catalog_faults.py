"""Catalog faults (the sec.-27 placement and release cases) under the simulation.

Each sub-kind changes the catalog through the live catalog calls and asks to move the runs onto what changed.
With the protection that refuses such a move switched off, the oracle reading the operator's record, the owner's
record and the targets' logs catches it; with every protection on, the same schedule passes; and a replay gives
the same event trail.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest

from baton.faults.cases_authority import FORBIDDEN_DOWNGRADE_COMPANIONS
from baton.models import RunKind
from baton.sim.catalog_faults import CATALOG_CHANGE, OPERATOR_FILE, SUBKINDS
from baton.sim.faults import Fault, FaultPlan, generate
from baton.sim.oracles import moved_onto_a_changed_catalog
from baton.sim.runner import config_for, invariants_of, run_seed
from baton.sim.scheduler import START
from baton.sim.world import SimRecords, run_world

BOTH = (RunKind.DEPLOY, RunKind.RESEARCH)

CAUGHT = [
    ("release_withdrawn", "gate:release_incompatible", "withdrawn_release"),
    ("placement_left_region", "gate:region_not_allowed", "wrong_placement"),
    ("provider_changed", "gate:provider_not_allowed", "wrong_placement"),
    ("schema_lost", "schema-gate", "unfit_placement"),
    ("schema_lost", "gate:state_schema_incompatible", "unfit_placement"),
    ("verifier_lost", "verifier-gate", "unfit_placement"),
    ("verifier_lost", "gate:verifier_unavailable", "unfit_placement"),
    ("tools_lost", "gate:tool_contract_unavailable", "unfit_placement"),
    ("ceiling_lowered", "gate:authority_downgrade_forbidden", "wrong_placement"),
]


COMPANIONS = dict(FORBIDDEN_DOWNGRADE_COMPANIONS)
"""Since stop 32 the simulated worker reads its placement from the catalog at each resume, as the live one does
(`World.placement_now`): the resume's own downgrade, the authority's ceiling and the gateway's cap each keep a run moved
onto a lowered ceiling from deploying, so the gate's refusal is tested with those three off (the live case's
companions); with only they off, the refusal holds."""


def _plan(subkind: str, at: int = 3) -> FaultPlan:
    return FaultPlan((Fault(CATALOG_CHANGE, at, subkind),))


@pytest.mark.parametrize(("subkind", "ablation", "oracle"), CAUGHT)
def test_a_move_onto_a_changed_catalog_is_caught_only_with_the_protection_off(subkind: str, ablation: str,
                                                                               oracle: str) -> None:
    plan, companions = _plan(subkind), COMPANIONS.get(ablation, ())
    ablated = run_seed(1, 0, (ablation, *companions), plan=plan, kinds=BOTH)
    assert oracle in invariants_of(ablated), ablated.violations
    assert [f.describe() for f in ablated.fired] == [f"{CATALOG_CHANGE}@3({subkind})"]
    protected = run_seed(1, 0, plan=plan, kinds=BOTH)
    assert protected.ok, protected.violations
    assert protected.trail_hash != ablated.trail_hash
    if companions:
        alone = run_seed(1, 0, companions, plan=plan, kinds=BOTH)
        assert alone.ok, alone.violations


def test_a_catalog_fault_replays_to_the_same_trail() -> None:
    plan = _plan("placement_left_region")
    first = run_seed(1, 0, ("gate:region_not_allowed",), plan=plan, kinds=BOTH)
    second = run_seed(1, 0, ("gate:region_not_allowed",), plan=plan, kinds=BOTH)
    assert first.trail_hash == second.trail_hash and first.violations == second.violations


def test_the_change_goes_through_the_catalog_and_the_fleet_reads_it() -> None:
    outcome = run_seed(1, 0, plan=_plan("placement_left_region"), kinds=BOTH, keep_trail=True)
    trail = outcome.trail or []
    assert any("w catalog_update_placement" in line for line in trail)
    refused = [line for line in trail if "handoff sim1-deploy-0 scheduler_rebalance" in line]
    assert refused and "aborted" in refused[0] and "no compatible target" in refused[0]


def test_without_a_catalog_fault_the_world_never_changes_the_catalog() -> None:
    """The coordinator and the workers read the (empty, unseeded) catalog at each move and adoption; nothing writes it."""
    outcome = run_seed(1, 0, plan=FaultPlan((Fault("stall", 4, "12.0"),)), kinds=BOTH, keep_trail=True)
    trail = outcome.trail or []
    assert any(" r catalog_snapshot" in line for line in trail)
    assert not any(" w catalog" in line or "operator" in line for line in trail)


def test_a_run_stranded_by_a_withdrawn_release_is_escalated_by_the_coordinator() -> None:
    """Seed 39's shrunk schedule: the research run's lease lapses after v7 and v8 are withdrawn for good; no move
    passes the gate, and once the wait (`SimConfig.stranded_after_s`) is over the coordinator escalates the run (it
    stayed active for the whole 1,800 virtual seconds before, invariant 10). The escalation is the coordinator's
    seal of the run's ESCALATED checkpoint (`baton.handoff.escalation`)."""
    plan = FaultPlan.from_json('[{"arg": "", "at": 4, "kind": "drop_request"}, '
                               '{"arg": "release_withdrawn", "at": 20, "kind": "catalog_change"}]')
    outcome = run_seed(39, 0, plan=plan, kinds=BOTH, keep_trail=True)
    assert outcome.ok, outcome.violations
    assert outcome.statuses["sim39-research-1"] == "escalated" and outcome.virtual_s < 120
    assert any("coordinator w append_checkpoint" in line for line in outcome.trail or [])


@pytest.mark.parametrize("seed", [258, 162])
def test_the_seeds_that_found_the_catalog_races_pass(seed: int) -> None:
    """Seed 258 (a move committed onto a placement that had lost the run's schema) and seed 162 (a research run
    adopted on a placement that had lost its verifier bundle), with every protection on and no simulation wait."""
    outcome = run_seed(seed, 0, plan=generate(seed, 5), kinds=BOTH)  # the random schedule that found it
    assert outcome.ok and not outcome.errors, (outcome.violations, outcome.errors)
    assert set(outcome.statuses.values()) <= {"verified", "failed", "escalated"}


def test_the_oracle_reads_the_operators_record() -> None:
    """An accepted mutation from a placement the operator's record re-homed before the run was reserved there is
    a violation; the same change recorded after the reservation is not (the move was decided on the old catalog)."""
    seen: dict[str, list[str]] = {}

    def tamper(records: SimRecords) -> None:
        seen["clean"] = moved_onto_a_changed_catalog(records)
        path = records.root / OPERATOR_FILE
        original = path.read_text()
        adopted = [(when, owner) for when, run, owner, _e in records.lease_history
                   if run == "sim1-deploy-0" and str(owner).startswith("placement:")]
        last_when, last_owner = adopted[-1]
        placement = str(last_owner).removeprefix("placement:")
        for label, offset in (("before", -1e-3), ("after", 1e-3)):
            at = (START + dt.timedelta(seconds=last_when + offset)).isoformat()
            line = {"at": at, "subkind": "placement_left_region", "placement": placement,
                    "facts": {"region": "us-east"}}
            path.write_text(original + json.dumps(line) + "\n")
            seen[label] = moved_onto_a_changed_catalog(records)
        path.write_text(original)

    # an environment change (no oracle fact) makes sure the operator's record exists
    run_world(config_for(1, 0, plan=_plan("runtime_changed"), kinds=BOTH), before_check=tamper)
    assert seen["clean"] == []
    assert seen["before"] and all(v.startswith("wrong_placement:") for v in seen["before"])
    assert seen["after"] == []


def test_the_generator_draws_every_catalog_case() -> None:
    drawn = {f.arg for seed in range(400) for f in generate(seed, 5).faults if f.kind == CATALOG_CHANGE}
    assert drawn == set(SUBKINDS)


def test_two_withdrawals_end_without_an_actor_error() -> None:
    """Seed 220 withdraws the releases twice; the second withdrawal is refused by the catalog (no actor error)."""
    outcome = run_seed(220, 0, plan=generate(220, 5), kinds=BOTH)
    assert [f.arg for f in outcome.plan.faults if f.kind == CATALOG_CHANGE] == ["release_withdrawn"] * 2
    assert outcome.ok and not outcome.errors, (outcome.violations, outcome.errors)


def test_a_change_after_the_move_strikes_the_destination_of_the_committed_move() -> None:
    """`verifier_lost_after_move`: the fleet's move onto the other placement commits first; the operator then takes the
    verifier off that placement (its record names it), before that placement's worker adopts the run."""
    from baton.sim.catalog_faults import AFTER_MOVE

    plan = _plan(AFTER_MOVE)
    records: list[list[dict[str, object]]] = []

    def keep(found: SimRecords) -> None:
        path = found.root / OPERATOR_FILE
        records.append([json.loads(line) for line in path.read_text().splitlines()])

    outcome = run_world(config_for(1, 0, plan=plan, kinds=BOTH, keep_trail=True), before_check=keep)
    assert outcome.ok, outcome.violations
    trail = outcome.trail or []
    moved = "handoff sim1-deploy-0 scheduler_rebalance: committed"
    committed = next(i for i, line in enumerate(trail) if moved in line)
    changed = next(i for i, line in enumerate(trail) if f"catalog {AFTER_MOVE}: placement" in line)
    assert committed < changed
    destination = trail[committed].split("committed ")[1].split()[0]
    assert [(r["subkind"], r["placement"]) for r in records[0]] == [(AFTER_MOVE, destination)]
    assert records[0][0]["facts"] == {"verifiers": ["citations-1"]}


def test_an_owner_allowing_the_downgrade_lets_the_move_commit_and_each_layer_keeps_the_run_from_deploying() -> None:
    """`downgrade_allowed` (the owner's handoff policy allows a downgrade): the move onto the lowered ceiling commits;
    the resume's downgrade, the authority's ceiling and the gateway's cap each alone keep the run from deploying there
    (each reads the ceiling from the store's catalog at the resume, `World.placement_now`); with all three off, it
    does."""
    from baton.faults.cases_authority import DOWNGRADE_COMPANIONS
    from baton.sim.faults import DOWNGRADE_ALLOWED, OWNER_RULE

    plan = FaultPlan((Fault(OWNER_RULE, 0, DOWNGRADE_ALLOWED), Fault(CATALOG_CHANGE, 3, "ceiling_lowered")))
    protected = run_seed(1, 0, plan=plan, kinds=BOTH, keep_trail=True)
    assert protected.ok, protected.violations
    assert any("handoff sim1-deploy-0 scheduler_rebalance: committed" in line for line in protected.trail or [])
    layers = DOWNGRADE_COMPANIONS["authority-downgrade"] + ("authority-downgrade",)
    for layer in layers:
        others = tuple(name for name in layers if name != layer)
        assert run_seed(1, 0, others, plan=plan, kinds=BOTH).ok, layer
    ablated = run_seed(1, 0, layers, plan=plan, kinds=BOTH)
    assert "wrong_placement" in invariants_of(ablated), ablated.violations
