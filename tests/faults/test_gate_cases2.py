"""The gate's portability and behavioral-migration cases (baton/faults/cases_gates2.py) and their oracles.

Oracle tests first, on hand-written files (each question says yes on files that show the breach and
no on files that do not). Then one live test per gate reason: with the reason switched off, Baton
only, the case's named oracle sees the harm in the targets' own records; with every protection on,
the gate raised that reason in the same case and no oracle says anything. Cases whose reason is
backed by a companion finding (`FaultCase.companions`) also show each finding alone holds.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from baton.ablation import ablation_env
from baton.faults.ablations import CATCHING_CASE, run_ablation
from baton.faults.cases import CASES
from baton.faults.matrix import run_case
from baton.faults.oracles_gates import answer_gates

RUN = "case-abc123"
V7, V8 = "sha256:" + "7" * 64, "sha256:" + "8" * 64
INVENTORY = {
    "local-gpu-eu": {"region": "eu-west", "provider": "local", "hardware_attested": False, "data_scopes": [],
                     "releases": [V7, V8]},
    "cloud-eu": {"region": "eu-central", "provider": "cloudco", "hardware_attested": False, "data_scopes": [],
                 "releases": [V7, V8]},
    "cloud-us": {"region": "us-east", "provider": "cloudco", "hardware_attested": False, "data_scopes": [],
                 "releases": [V8]},
    "vault-eu": {"region": "eu-west", "provider": "local", "hardware_attested": True,
                 "data_scopes": ["eu-customer-records"], "releases": [V7]},
}


def _write_lines(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def _files(root: Path, placement: str, *, rule: dict[str, Any] | None = None,
           calls: Sequence[tuple[str, str]] = (), changes: Sequence[dict[str, Any]] = ()) -> Path:
    """One admitted deploy from `placement` at 02:00:05; provider calls (time, release) for the run."""
    root.mkdir(parents=True)
    (root / "reported.json").write_text(json.dumps({"run_id": RUN, "status": "verified"}))
    (root / "placement-inventory.json").write_text(json.dumps(INVENTORY))
    if rule is not None:
        (root / "portability-rule.json").write_text(json.dumps(rule))
    _write_lines(root / "placement-changes.jsonl", list(changes))
    _write_lines(root / "provider" / "bill.jsonl",
                 [{"account": RUN, "at": at, "model": "m", "release_id": release} for at, release in calls]
                 + [{"account": "someone-else", "at": "2026-12-02T02:00:04+00:00", "release_id": "sha256:x"}])
    _write_lines(root / "home" / "targets" / "deploy" / "presented.jsonl", [
        {"at": "2026-12-02T02:00:05Z", "operation_id": "op-1", "run_id": RUN, "placement": placement,
         "level": "EXTERNAL_MUTATE"},
        {"at": "2026-12-02T02:00:05Z", "operation_id": "op-9", "run_id": "other-run", "placement": "cloud-us",
         "level": "EXTERNAL_MUTATE"}])
    return root


def _yes(root: Path) -> set[str]:
    return {name for name, evidence in answer_gates(root).items() if evidence}


def test_a_mutation_outside_the_owners_portability_rule_is_a_constraint_breach(tmp_path: Path) -> None:
    sealed = {"non_exportable_from": "local-gpu-eu"}
    assert "constraint_breach" in _yes(_files(tmp_path / "a", "cloud-eu", rule=sealed))
    assert "constraint_breach" not in _yes(_files(tmp_path / "b", "local-gpu-eu", rule=sealed))
    assert "constraint_breach" not in _yes(_files(tmp_path / "c", "vault-eu", rule=sealed))  # same region, provider
    attested = {"requires_hardware_attestation": True}
    assert "constraint_breach" in _yes(_files(tmp_path / "d", "cloud-eu", rule=attested))
    assert "constraint_breach" not in _yes(_files(tmp_path / "e", "vault-eu", rule=attested))
    scoped = {"data_scope": "eu-customer-records"}
    assert "constraint_breach" in _yes(_files(tmp_path / "f", "cloud-eu", rule=scoped))
    assert "constraint_breach" not in _yes(_files(tmp_path / "g", "vault-eu", rule=scoped))
    assert "constraint_breach" not in _yes(_files(tmp_path / "h", "cloud-eu"))  # no rule: nothing to breach
    moved = _files(tmp_path / "i", "local-gpu-eu", rule=sealed, changes=[
        {"at": "2026-12-02T02:00:01+00:00", "placement": "local-gpu-eu", "region": "us-east"}])
    assert "constraint_breach" in _yes(moved)  # the operator re-homed it before the target admitted the mutation
    late = _files(tmp_path / "j", "local-gpu-eu", rule=sealed, changes=[
        {"at": "2026-12-02T02:00:09+00:00", "placement": "local-gpu-eu", "region": "us-east"}])
    assert "constraint_breach" not in _yes(late)


def test_a_mutation_resting_on_a_release_its_placement_does_not_serve_is_a_foreign_release(tmp_path: Path) -> None:
    assert "foreign_release" in _yes(_files(tmp_path / "a", "cloud-us", calls=[("2026-12-02T02:00:01+00:00", V7)]))
    replanned = [("2026-12-02T02:00:01+00:00", V7), ("2026-12-02T02:00:03+00:00", V8)]
    assert "foreign_release" not in _yes(_files(tmp_path / "b", "cloud-us", calls=replanned))
    assert "foreign_release" not in _yes(_files(tmp_path / "c", "cloud-eu", calls=[("2026-12-02T02:00:01+00:00", V7)]))
    after = [("2026-12-02T02:00:01+00:00", V8), ("2026-12-02T02:00:07+00:00", V7)]  # the v7 call came later
    assert "foreign_release" not in _yes(_files(tmp_path / "d", "cloud-us", calls=after))


# -- live: one case per gate reason -----------------------------------------------------------------

CAUGHT_BY: dict[str, tuple[str, str]] = {
    "gate:non_exportable_state": ("non-exportable-state-moved", "constraint_breach"),
    "gate:hardware_attestation_missing": ("attestation-required-moved", "constraint_breach"),
    "gate:data_scope_unavailable": ("data-scope-required-moved", "constraint_breach"),
    "gate:migration_unsafe": ("unsafe-state-moved", "constraint_breach"),
    "gate:behavioral_migration_approved": ("behavioral-move", "foreign_release"),
    "gate:runtime_changed": ("behavioral-move", "foreign_release"),
}


def test_the_ablation_table_names_these_cases() -> None:
    for name, (case, _question) in CAUGHT_BY.items():
        assert CATCHING_CASE[name] == case


@pytest.mark.parametrize("name", sorted(CAUGHT_BY))
@pytest.mark.integration
@pytest.mark.slow
def test_the_reason_switched_off_is_caught_by_the_cases_oracle(name: str, tmp_path: Path) -> None:
    case, question = CAUGHT_BY[name]
    result = run_ablation(name, cases=[case], root=tmp_path)
    assert question in result.caught.get(case, []), f"{name} went uncaught by {case}: {result.evidence} {result.errors}"


@pytest.mark.parametrize("case", sorted({case for case, _ in CAUGHT_BY.values()}))
@pytest.mark.integration
@pytest.mark.slow
def test_with_every_protection_on_the_gate_raises_the_reason_and_baton_is_clean(case: str, tmp_path: Path) -> None:
    result = run_case(CASES[case], "baton", 0, tmp_path)
    assert result.error is None, result.error
    assert result.violated == [], {q.value: result.answers[q] for q in result.violated}
    passed_over = any(note.endswith(" instead") for note in result.notes)
    for name, (caught_by, _question) in CAUGHT_BY.items():
        if caught_by == case:
            reason = name.removeprefix("gate:")
            # A refusal is recorded when the move aborts; a placement the coordinator passes over for another is
            # not (the case declares the reason it exercises, and the run ends up elsewhere than it was sent).
            assert reason in result.gate_reasons or (reason in CASES[case].exercises and passed_over), (
                name, result.gate_reasons, result.notes)


@pytest.mark.parametrize("name", ["gate:migration_unsafe", "gate:behavioral_migration_approved",
                                  "gate:runtime_changed"])
@pytest.mark.integration
@pytest.mark.slow
def test_each_stacked_finding_alone_holds(name: str, tmp_path: Path) -> None:
    """The case with only the reason's companions off (the reason itself on) stays clean."""
    case = CASES[CAUGHT_BY[name][0]]
    with ablation_env(*case.companions[name]):
        result = run_case(case, "baton", 0, tmp_path)
    assert result.error is None, result.error
    assert result.violated == [], {q.value: result.answers[q] for q in result.violated}
