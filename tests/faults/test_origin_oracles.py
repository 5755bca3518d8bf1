"""The placement oracles read where a mutation came from in the targets' origin record, the same for every strategy.

A transcript control's targets run unguarded: no capability, so nothing in `presented.jsonl`; its mutations show
only in `origins.jsonl` (the placement the control's scheduler started the process on). Hand-written files: each
oracle says yes on an origin-only mutation from a forbidden placement and no from an allowed one; the origin wins
over the capability's placement; without an origin (null, or no file) the capability's placement still counts.
Last, the control's scheduler (not the control) puts the placement in the process's environment.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from baton.faults.oracles import Question, answer
from baton.faults.oracles_gates import answer_gates
from baton.faults.rig import Rig
from baton.faults.transcript_side import TranscriptRun
from baton.targets.http_server import ORIGIN_ENV

RUN = "case-abc123"
AT = "2026-12-02T02:00:09Z"
V7, V8 = "sha256:" + "7" * 64, "sha256:" + "8" * 64
INVENTORY = {
    "local-gpu-eu": {"region": "eu-west", "provider": "local", "hardware_attested": False, "data_scopes": [],
                     "releases": [V7, V8]},
    "cloud-eu": {"region": "eu-central", "provider": "cloudco", "hardware_attested": False, "data_scopes": [],
                 "releases": [V7, V8]},
    "cloud-us": {"region": "us-east", "provider": "cloudco", "hardware_attested": False, "data_scopes": [],
                 "releases": [V8]},
}
NEEDS = {"state_schema": "3", "verifier_bundle": "citations-1+deploy-check-1", "tool_contract": "corpus-deploy-tools-2"}


def _write_lines(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def _origin(placement: str | None, run_id: str = RUN, operation_id: str = "op-1") -> dict[str, Any]:
    return {"at": AT, "operation_id": operation_id, "run_id": run_id, "epoch": 2, "origin": placement}


def _presented(placement: str, operation_id: str = "op-1") -> dict[str, Any]:
    return {"at": AT, "operation_id": operation_id, "run_id": RUN, "epoch": 2, "placement": placement,
            "level": "EXTERNAL_MUTATE", "capability_id": "cap-1", "expires_at": "2026-12-02T03:00:00+00:00"}


def _files(root: Path, *, origins: Sequence[dict[str, Any]] = (), presented: Sequence[dict[str, Any]] = (),
           target: str = "deploy", change: dict[str, Any] | None = None, residency: dict[str, list[str]] | None = None,
           rule: dict[str, Any] | None = None, approvals: dict[str, Any] | None = None,
           calls: Sequence[tuple[str, str]] = ()) -> Path:
    """A run's files: the target's origin and presented lines, the operator's change to cloud-eu at 02:00:05 and
    the owner's records given; another run's mutation from cloud-us is in the origin record too."""
    root.mkdir(parents=True)
    (root / "reported.json").write_text(json.dumps({"run_id": RUN, "status": "verified", "model_calls": len(calls),
                                                    "model_spend_usd": "0", "limits": {}}))
    directory = root / "home" / "targets" / target
    _write_lines(directory / "origins.jsonl", [*origins, _origin("cloud-us", run_id="other-run", operation_id="op-9")])
    if presented:
        _write_lines(directory / "presented.jsonl", presented)
    _write_lines(root / "placement-changes.jsonl",
                 [] if change is None else [{"at": "2026-12-02T02:00:05+00:00", "placement": "cloud-eu", **change}])
    (root / "residency.json").write_text(json.dumps(residency or {"regions": [], "providers": []}))
    (root / "run-needs.json").write_text(json.dumps(NEEDS))
    (root / "placement-inventory.json").write_text(json.dumps(INVENTORY))
    if rule is not None:
        (root / "portability-rule.json").write_text(json.dumps(rule))
    if approvals is not None:
        (root / "migration-approvals.json").write_text(json.dumps(approvals))
    _write_lines(root / "provider" / "bill.jsonl",
                 [{"account": RUN, "at": at, "model": "m", "release_id": release, "usd": "0"} for at, release in calls])
    return root


def _yes(root: Path) -> set[str]:
    found = {str(question) for question, evidence in answer(root).items() if evidence}
    return found | {name for name, evidence in answer_gates(root).items() if evidence}


EU = {"regions": ["eu-central", "eu-west"], "providers": []}
OWN = {"regions": [], "providers": ["cloudco", "local"]}


def test_an_unguarded_mutation_from_a_rehomed_placement_is_a_wrong_placement(tmp_path: Path) -> None:
    rehomed = _files(tmp_path / "a", origins=[_origin("cloud-eu")], change={"region": "us-east"}, residency=EU)
    assert Question.WRONG_PLACEMENT in _yes(rehomed)
    (said,) = answer(rehomed)[Question.WRONG_PLACEMENT]
    assert said.startswith("deploy admitted op-1 from cloud-eu, re-homed to us-east")
    moved = _files(tmp_path / "b", origins=[_origin("cloud-eu")], change={"provider": "othercloud"}, residency=OWN)
    assert Question.WRONG_PLACEMENT in _yes(moved)
    stayed = _files(tmp_path / "c", origins=[_origin("local-gpu-eu")], change={"region": "us-east"}, residency=EU)
    assert Question.WRONG_PLACEMENT not in _yes(stayed)
    unknown = _files(tmp_path / "d", origins=[_origin(None)], change={"region": "us-east"}, residency=EU)
    assert Question.WRONG_PLACEMENT not in _yes(unknown)  # no origin and no capability: nothing says where from
    lowered = {"authority_ceiling": "SANDBOX_MUTATE"}
    deployed = _files(tmp_path / "e", origins=[_origin("cloud-eu")], change=lowered)
    (said,) = answer(deployed)[Question.WRONG_PLACEMENT]  # a deployment acts at EXTERNAL_MUTATE, capability or not
    assert said.startswith("deploy admitted op-1 at EXTERNAL_MUTATE from cloud-eu, whose ceiling was lowered")
    published = _files(tmp_path / "f", origins=[_origin("cloud-eu")], target="corpus", change=lowered)
    assert Question.WRONG_PLACEMENT not in _yes(published)  # a publication stays within the sandbox
    assert Question.WRONG_PLACEMENT not in _yes(_files(tmp_path / "g", origins=[_origin("local-gpu-eu")],
                                                       change=lowered))


def test_an_unguarded_publication_from_a_placement_that_cannot_host_the_run_is_an_unfit_placement(
        tmp_path: Path) -> None:
    for name, change in (("schema", {"readable_schema_versions": ["1", "2"]}), ("verifier", {"verifiers": ["x-1"]}),
                         ("tools", {"tools": ["python"]})):
        unfit = _files(tmp_path / name, origins=[_origin("cloud-eu")], target="corpus", change=change)
        assert Question.UNFIT_PLACEMENT in _yes(unfit), name
    fit = _files(tmp_path / "fit", origins=[_origin("local-gpu-eu")], target="corpus", change={"tools": ["python"]})
    assert Question.UNFIT_PLACEMENT not in _yes(fit)


def test_the_origin_wins_over_the_capabilitys_placement_and_stands_in_where_none_was_recorded(tmp_path: Path) -> None:
    change, rule = {"region": "us-east"}, EU
    elsewhere = _files(tmp_path / "a", origins=[_origin("cloud-eu")], presented=[_presented("local-gpu-eu")],
                       change=change, residency=rule)
    assert Question.WRONG_PLACEMENT in _yes(elsewhere)  # the capability named the allowed source; it came from cloud-eu
    home = _files(tmp_path / "b", origins=[_origin("local-gpu-eu")], presented=[_presented("cloud-eu")],
                  change=change, residency=rule)
    assert Question.WRONG_PLACEMENT not in _yes(home)
    unnamed = _files(tmp_path / "c", origins=[_origin(None)], presented=[_presented("cloud-eu")], change=change,
                     residency=rule)
    (said,) = answer(unnamed)[Question.WRONG_PLACEMENT]
    assert "its capability's placement; no origin recorded" in said
    ceiling = _files(tmp_path / "d", origins=[_origin("cloud-eu")], presented=[_presented("cloud-eu")],
                     change={"authority_ceiling": "SANDBOX_MUTATE"})
    assert Question.WRONG_PLACEMENT in _yes(ceiling)  # the level still comes from the capability presented


def test_an_unguarded_mutation_outside_the_owners_rule_is_a_constraint_breach(tmp_path: Path) -> None:
    sealed = {"non_exportable_from": "local-gpu-eu"}
    assert "constraint_breach" in _yes(_files(tmp_path / "a", origins=[_origin("cloud-eu")], rule=sealed))
    assert "constraint_breach" not in _yes(_files(tmp_path / "b", origins=[_origin("local-gpu-eu")], rule=sealed))
    region = {"same_region_as": "local-gpu-eu"}
    assert "constraint_breach" in _yes(_files(tmp_path / "c", origins=[_origin("cloud-eu")], rule=region))
    assert "constraint_breach" not in _yes(_files(tmp_path / "d", origins=[_origin(None)], rule=region))


def test_an_unguarded_mutation_from_a_placement_off_the_runs_release_is_caught(tmp_path: Path) -> None:
    v7_call = [("2026-12-02T02:00:01+00:00", V7)]
    assert "foreign_release" in _yes(_files(tmp_path / "a", origins=[_origin("cloud-us")], calls=v7_call))
    assert "foreign_release" not in _yes(_files(tmp_path / "b", origins=[_origin("cloud-eu")], calls=v7_call))
    expired = {"pinned_release": V7, "approvals": [{"approval_id": "board-1", "from_release_id": V7,
                                                    "to_release_id": V8, "expires_at": "2026-12-02T01:00:00Z"}]}
    assert "unapproved_migration" in _yes(_files(tmp_path / "c", origins=[_origin("cloud-us")], approvals=expired,
                                                 calls=v7_call))
    assert "unapproved_migration" not in _yes(_files(tmp_path / "d", origins=[_origin("cloud-eu")], approvals=expired,
                                                     calls=v7_call))


def test_the_control_scheduler_names_the_placement_it_starts_a_control_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[dict[str, str]] = []

    class Recorded:
        pid = 1

        def __init__(self, command: list[str], **options: Any) -> None:
            started.append(options["env"])

    monkeypatch.setenv(ORIGIN_ENV, "somewhere-else")  # the matrix's own environment does not leak through
    monkeypatch.setattr(subprocess, "Popen", Recorded)
    rig = Rig(tmp_path, seed=0)
    run = TranscriptRun(rig, mode="naive", kind="deploy", case_id="c", limits={})
    run.worker("local-gpu-eu")
    run.worker("cloud-us")
    assert [env[ORIGIN_ENV] for env in started] == ["local-gpu-eu", "cloud-us"]
