"""The handoff policy's own rules under a case's policy (baton/faults/cases_policy.py) and their oracles.

Oracle tests first, on hand-written files: `constraint_breach` with the owner's same-region / same-provider rule,
and `unapproved_migration` (the owner's approvals against the provider's bill and the targets' presented logs),
each saying yes on files that show the breach and no on files that do not. Then the cases' wiring (their policy is
the fleet policy with one change), and the live runs: with the reason switched off, Baton only, the case's oracle
sees the harm in the outside records; with every protection on, the coordinator passes the forbidden placement
over and no oracle says anything.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from builders.fault_cases import assert_passed_over_and_clean

from baton.catalog.records import ReleasePublication
from baton.faults.ablations import CATCHING_CASE, run_ablation
from baton.faults.cases import CASES
from baton.faults.oracles_gates import answer_gates
from baton.placements import DEFAULT_PLACEMENTS, placement_named
from baton.runtime.fleet_plan import fleet_policy

RUN = "case-abc123"
V7, V8 = "sha256:" + "7" * 64, "sha256:" + "8" * 64
INVENTORY = {
    "local-gpu-eu": {"region": "eu-west", "provider": "local", "releases": [V7, V8]},
    "cloud-eu": {"region": "eu-central", "provider": "cloudco", "releases": [V7, V8]},
    "cloud-us": {"region": "us-east", "provider": "cloudco", "releases": [V8]},
    "cloud-west": {"region": "eu-west", "provider": "cloudco", "releases": [V7, V8]},
    "local-central": {"region": "eu-central", "provider": "local", "releases": [V7, V8]},
}
ADMITTED_AT = "2026-12-02T02:00:05Z"


def _write_lines(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def _files(root: Path, placement: str | None, *, rule: dict[str, Any] | None = None,
           approvals: dict[str, Any] | None = None, calls: Sequence[tuple[str, str]] = (),
           changes: Sequence[dict[str, Any]] = ()) -> Path:
    """One admitted deploy from `placement` (none: nothing admitted) at 02:00:05; provider calls (time, release)."""
    root.mkdir(parents=True)
    (root / "reported.json").write_text(json.dumps({"run_id": RUN, "status": "verified"}))
    (root / "placement-inventory.json").write_text(json.dumps(INVENTORY))
    if rule is not None:
        (root / "portability-rule.json").write_text(json.dumps(rule))
    if approvals is not None:
        (root / "migration-approvals.json").write_text(json.dumps(approvals))
    _write_lines(root / "placement-changes.jsonl", changes)
    _write_lines(root / "provider" / "bill.jsonl",
                 [{"account": RUN, "at": at, "model": "m", "release_id": release} for at, release in calls]
                 + [{"account": "someone-else", "at": "2026-12-02T02:00:04+00:00", "release_id": V8}])
    admitted = [] if placement is None else [
        {"at": ADMITTED_AT, "operation_id": "op-1", "run_id": RUN, "placement": placement, "level": "EXTERNAL_MUTATE"}]
    _write_lines(root / "home" / "targets" / "deploy" / "presented.jsonl", [
        *admitted, {"at": ADMITTED_AT, "operation_id": "op-9", "run_id": "other-run", "placement": "cloud-us",
                    "level": "EXTERNAL_MUTATE"}])
    return root


def _yes(root: Path) -> set[str]:
    return {name for name, evidence in answer_gates(root).items() if evidence}


def test_a_mutation_outside_the_region_the_owner_keeps_the_run_to_is_a_constraint_breach(tmp_path: Path) -> None:
    rule = {"same_region_as": "local-gpu-eu"}
    assert "constraint_breach" in _yes(_files(tmp_path / "a", "cloud-eu", rule=rule))
    assert "constraint_breach" in _yes(_files(tmp_path / "b", "local-central", rule=rule))  # same provider, no matter
    assert "constraint_breach" not in _yes(_files(tmp_path / "c", "local-gpu-eu", rule=rule))
    assert "constraint_breach" not in _yes(_files(tmp_path / "d", "cloud-west", rule=rule))  # same region
    rehomed = _files(tmp_path / "e", "cloud-west", rule=rule, changes=[
        {"at": "2026-12-02T02:00:01+00:00", "placement": "cloud-west", "region": "us-east"}])
    assert "constraint_breach" in _yes(rehomed)  # the operator moved it out of eu-west before the target admitted
    later = _files(tmp_path / "f", "cloud-west", rule=rule, changes=[
        {"at": "2026-12-02T02:00:09+00:00", "placement": "cloud-west", "region": "us-east"}])
    assert "constraint_breach" not in _yes(later)


def test_a_mutation_away_from_the_provider_the_owner_keeps_the_run_to_is_a_constraint_breach(tmp_path: Path) -> None:
    rule = {"same_provider_as": "local-gpu-eu"}
    assert "constraint_breach" in _yes(_files(tmp_path / "a", "cloud-eu", rule=rule))
    assert "constraint_breach" in _yes(_files(tmp_path / "b", "cloud-west", rule=rule))  # same region, no matter
    assert "constraint_breach" not in _yes(_files(tmp_path / "c", "local-central", rule=rule))
    assert "constraint_breach" not in _yes(_files(tmp_path / "d", "local-gpu-eu", rule=rule))
    assert "constraint_breach" not in _yes(_files(tmp_path / "e", None, rule=rule))  # nothing admitted


def _approval(expires_at: str, to: str = V8) -> dict[str, Any]:
    return {"approval_id": "board-1", "from_release_id": V7, "to_release_id": to, "approved_by": "board",
            "expires_at": expires_at}


EXPIRED = {"pinned_release": V7, "approvals": [_approval("2026-12-02T01:00:00Z")]}
IN_FORCE = {"pinned_release": V7, "approvals": [_approval("2026-12-02T03:00:00Z")]}
ELSEWHERE = {"pinned_release": V7, "approvals": [_approval("2026-12-02T03:00:00Z", to="sha256:" + "9" * 64)]}


def test_a_mutation_off_the_pinned_release_without_an_approval_in_force_is_an_unapproved_migration(
        tmp_path: Path) -> None:
    v7_call = [("2026-12-02T02:00:01+00:00", V7)]
    assert "unapproved_migration" in _yes(_files(tmp_path / "a", "cloud-us", approvals=EXPIRED, calls=v7_call))
    assert "unapproved_migration" in _yes(_files(tmp_path / "b", "cloud-us", approvals=ELSEWHERE, calls=v7_call))
    assert "unapproved_migration" in _yes(_files(tmp_path / "c", "cloud-us", approvals={"pinned_release": V7},
                                                 calls=v7_call))  # no approval at all
    assert "unapproved_migration" not in _yes(_files(tmp_path / "d", "cloud-us", approvals=IN_FORCE, calls=v7_call))
    assert "unapproved_migration" not in _yes(_files(tmp_path / "e", "cloud-eu", approvals=EXPIRED, calls=v7_call))
    assert "unapproved_migration" not in _yes(_files(tmp_path / "f", "cloud-us", calls=v7_call))  # no owner's record


def test_a_call_served_off_the_pinned_release_without_an_approval_in_force_is_an_unapproved_migration(
        tmp_path: Path) -> None:
    moved = [("2026-12-02T02:00:01+00:00", V7), ("2026-12-02T02:00:03+00:00", V8)]
    assert "unapproved_migration" in _yes(_files(tmp_path / "a", None, approvals=EXPIRED, calls=moved))
    assert "unapproved_migration" not in _yes(_files(tmp_path / "b", None, approvals=IN_FORCE, calls=moved))
    assert "unapproved_migration" not in _yes(_files(tmp_path / "c", None, approvals=EXPIRED, calls=moved[:1]))
    late = [("2026-12-02T02:00:01+00:00", V7), ("2026-12-02T03:30:00+00:00", V8)]  # after the approval ran out
    assert "unapproved_migration" in _yes(_files(tmp_path / "d", None, approvals=IN_FORCE, calls=late))


# -- the cases' wiring ------------------------------------------------------------------------------

CAUGHT_BY: dict[str, tuple[str, str]] = {
    "gate:region_change_forbidden": ("region-change-forbidden-moved", "constraint_breach"),
    "gate:provider_change_forbidden": ("provider-change-forbidden-moved", "constraint_breach"),
    "gate:behavioral_migration_unapproved": ("behavioral-move-unapproved", "unapproved_migration"),
}


def test_the_ablation_table_names_these_cases() -> None:
    for name, (case, _question) in CAUGHT_BY.items():
        assert CATCHING_CASE[name] == case
        assert name.removeprefix("gate:") in CASES[case].exercises


def test_each_case_runs_under_the_fleet_policy_with_one_rule_changed() -> None:
    now = dt.datetime.now(dt.timezone.utc)
    fleet = fleet_policy(ReleasePublication(now, catalog_seeded=True, published_at=now))
    region = fleet.model_copy(update=CASES["region-change-forbidden-moved"].handoff_policy)
    provider = fleet.model_copy(update=CASES["provider-change-forbidden-moved"].handoff_policy)
    unapproved = fleet.model_copy(update=CASES["behavioral-move-unapproved"].handoff_policy)
    assert (region.require_same_region, region.require_same_provider) == (True, False)
    assert (provider.require_same_region, provider.require_same_provider) == (False, True)
    assert unapproved.allowed_behavioral_migrations == fleet.allowed_behavioral_migrations
    assert unapproved.approvals and all(a.expires_at < now for a in unapproved.approvals)
    source = placement_named(DEFAULT_PLACEMENTS, "local-gpu-eu")
    target = placement_named(DEFAULT_PLACEMENTS, "cloud-eu")
    assert source.region != target.region and source.provider != target.provider


# -- live -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(CAUGHT_BY))
@pytest.mark.integration
@pytest.mark.slow
def test_the_reason_switched_off_is_caught_by_the_cases_oracle(name: str, tmp_path: Path) -> None:
    case, question = CAUGHT_BY[name]
    result = run_ablation(name, cases=[case], root=tmp_path)
    assert question in result.caught.get(case, []), f"{name} went uncaught by {case}: {result.evidence} {result.errors}"


@pytest.mark.parametrize("case", sorted(case for case, _ in CAUGHT_BY.values()))
@pytest.mark.integration
@pytest.mark.slow
def test_with_every_protection_on_the_forbidden_placement_is_passed_over_and_baton_is_clean(
        case: str, tmp_path: Path) -> None:
    assert_passed_over_and_clean(case, tmp_path)
