"""`ceiling-lowered-downgrade-allowed`: a run moved, downgraded, to a placement whose ceiling was lowered never
deploys from there; each of the four ceiling layers alone holds.

The companion of `test_ablations`: there each layer, with the other three as
companions, lets the moved run deploy at EXTERNAL_MUTATE from the lowered
placement (oracle `wrong_placement`, from the deploy service's presented log
and the operator's record). Here, with every protection on, or with any one
layer left alone, the deploy service admits nothing for the run.

The target placement's worker is started before the ceiling is lowered. This
test failed before the executor read its placement from the catalog at each
resume (`RunExecutor.placement_of`): it resumed with its start-up copy of the
placement, whose ceiling still allowed deploying, and the deployment landed.
The gate's layer stood behind the others only until the resume also capped the
run's authority at the committed move's decided ceiling (stop 32): before, with
the other three off, the moved run deployed whatever the gate had found.
"""

from __future__ import annotations

import json
from contextlib import nullcontext
from pathlib import Path

import pytest

from baton.ablation import ablation_env
from baton.faults.cases import CASES
from baton.faults.matrix import isolated_companions, run_case

CASE = "ceiling-lowered-downgrade-allowed"


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


@pytest.mark.parametrize("off", [(), ("gate:authority_downgraded",), ("gateway-ceiling",), ("authority-ceiling",)],
                         ids=["all-on", "gate-reason-off-alone", "gateway-ceiling-off-alone",
                              "authority-ceiling-off-alone"])
def test_the_downgraded_run_never_deploys_from_the_lowered_placement(off: tuple[str, ...], tmp_path: Path) -> None:
    with ablation_env(*off) if off else nullcontext():
        result = run_case(CASES[CASE], "baton", 0, tmp_path)
    assert result.error is None and result.violated == [], (result.answers, result.notes)
    assert "handoff to cloud-eu: committed" in result.notes  # the policy let it move there, downgraded
    assert result.status == "escalated", result.notes  # it may not deploy at SANDBOX_MUTATE: a human decides
    deploy = tmp_path / f"{CASE}-baton" / "home" / "targets" / "deploy"
    assert _lines(deploy / "deployments.jsonl") == [] and _lines(deploy / "presented.jsonl") == []


@pytest.mark.parametrize("off", [("authority-downgrade", "authority-ceiling", "gate:authority_downgraded"),
                                 ("authority-downgrade", "gateway-ceiling", "gate:authority_downgraded"),
                                 ("authority-downgrade", "gateway-ceiling", "authority-ceiling")],
                         ids=["gateway-cap-alone", "authority-ceiling-alone", "gate-ceiling-alone"])
def test_each_cap_alone_keeps_the_undowngraded_run_from_deploying(off: tuple[str, ...], tmp_path: Path) -> None:
    """With the resume's own downgrade off, any one remaining layer alone keeps the run from deploying: the standing
    worker's gateway, which took the lowered ceiling from the catalog at the resume; the authority, which reads the
    ceiling from the store's catalog when asked; or the gate, whose decided ceiling the resume caps authority at."""
    with ablation_env(*off):
        result = run_case(CASES[CASE], "baton", 0, tmp_path)
    assert result.error is None and result.violated == [], (result.answers, result.notes)
    assert "handoff to cloud-eu: committed" in result.notes
    deploy = tmp_path / f"{CASE}-baton" / "home" / "targets" / "deploy"
    assert _lines(deploy / "deployments.jsonl") == [] and _lines(deploy / "presented.jsonl") == []


def test_the_case_lets_the_policy_allow_the_downgrade_and_names_its_companion() -> None:
    case = CASES[CASE]
    assert case.handoff_policy == {"allow_authority_downgrade": True}
    layers = {"gate:authority_downgraded", "authority-downgrade", "gateway-ceiling", "authority-ceiling"}
    for layer in layers:
        assert set(isolated_companions(case, (layer,))) == layers - {layer}


FORBIDDEN_CASE = "placement-ceiling-lowered"


@pytest.mark.parametrize("off", [(), ("authority-downgrade",), ("authority-downgrade", "gateway-ceiling", "authority-ceiling")],
                         ids=["all-on", "resume-downgrade-off", "every-ceiling-layer-off"])
def test_the_forbidding_policy_alone_keeps_the_run_off_the_lowered_placement(off: tuple[str, ...],
                                                                             tmp_path: Path) -> None:
    """Under the fleet policy the gate refuses the lowered placement; with the resume's downgrade off, that still holds."""
    with ablation_env(*off) if off else nullcontext():
        result = run_case(CASES[FORBIDDEN_CASE], "baton", 0, tmp_path)
    assert result.error is None and result.violated == [], (result.answers, result.notes)
    presented = _lines(tmp_path / f"{FORBIDDEN_CASE}-baton" / "home" / "targets" / "deploy" / "presented.jsonl")
    assert presented and {line.get("placement") for line in presented} == {"local-gpu-eu"}, presented


def test_the_refusal_names_the_resume_downgrade_as_its_companion() -> None:
    """Since the executor reads the lowered ceiling at resume, the refusal alone is shadowed by the downgrade."""
    case = CASES[FORBIDDEN_CASE]
    assert set(isolated_companions(case, ("gate:authority_downgrade_forbidden",))) == {
        "authority-downgrade", "gateway-ceiling", "authority-ceiling"}


APPROVAL_CASE = "approval-expired-in-hand"


def test_an_approval_that_ran_out_in_hand_gets_no_capability(tmp_path: Path) -> None:
    """All protections on: the authority refuses the capability (the approval expired after the SDK checked it)."""
    from baton.faults.cases_authority import APPROVAL_TTL_S

    result = run_case(CASES[APPROVAL_CASE], "baton", 0, tmp_path)
    assert result.error is None and result.violated == [], (result.answers, result.notes)
    assert result.status == "failed", result.notes
    home = tmp_path / f"{APPROVAL_CASE}-baton" / "home"
    assert _lines(home / "targets" / "deploy" / "deployments.jsonl") == []
    signed = _lines(home / "authority" / "approver" / "approvals.jsonl")  # the approver's own record (--approval-ttl)
    assert len(signed) == 1
    import datetime as dt

    lasted = dt.datetime.fromisoformat(str(signed[0]["expires_at"])) - dt.datetime.fromisoformat(str(signed[0]["at"]))
    assert lasted.total_seconds() == pytest.approx(APPROVAL_TTL_S, abs=0.01)


def _approval_case(root: Path, effect_at: str, approvals: list[dict[str, object]] | None) -> Path:
    deploy = root / "home" / "targets" / "deploy"
    deploy.mkdir(parents=True)
    (root / "reported.json").write_text(json.dumps({"run_id": "run-x", "status": "verified"}))
    (deploy / "deployments.jsonl").write_text(json.dumps({"seq": 1, "run_id": "run-x", "at": effect_at}) + "\n")
    if approvals is not None:
        approver = root / "home" / "authority" / "approver"
        approver.mkdir(parents=True)
        (approver / "approvals.jsonl").write_text("".join(json.dumps({"run_id": "run-x", "operation": "deploy", **a})
                                                          + "\n" for a in approvals))
    return root


def test_the_approval_oracle_reads_the_effect_time_against_the_approvers_record(tmp_path: Path) -> None:
    from baton.faults.oracles import CaseFiles, expired_approval

    window = {"at": "2026-12-02T10:00:00+00:00", "expires_at": "2026-12-02T10:00:04+00:00"}
    late = expired_approval(CaseFiles(_approval_case(tmp_path / "late", "2026-12-02T10:00:09.000000Z", [window])))
    assert len(late) == 1 and "seq 1" in late[0] and "10:00:04" in late[0]
    assert expired_approval(CaseFiles(_approval_case(tmp_path / "ok", "2026-12-02T10:00:02.000000Z", [window]))) == []
    unsigned = expired_approval(CaseFiles(_approval_case(tmp_path / "none", "2026-12-02T10:00:02.000000Z", [])))
    assert len(unsigned) == 1 and "0 deploy approval(s)" in unsigned[0]
    assert expired_approval(CaseFiles(_approval_case(tmp_path / "control", "2026-12-02T10:00:02.000000Z", None))) == []
