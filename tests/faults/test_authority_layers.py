"""`ceiling-lowered-downgrade-allowed`: a run moved, downgraded, to a placement whose ceiling was lowered never
deploys from there; the gate's downgrade finding alone (the resume's downgrade switched off) is not what holds.

The companion of `test_ablations`: there `authority-downgrade` (and
`gate:authority_downgraded` with it as companion) lets the moved run deploy at
EXTERNAL_MUTATE from the lowered placement (oracle `wrong_placement`, from the
deploy service's presented log and the operator's record). Here, with every
protection on, or with only the gate's reason switched off, the deploy service
admits nothing for the run.

The target placement's worker is started before the ceiling is lowered. This
test failed before the executor read its placement from the catalog at each
resume (`RunExecutor.placement_of`): it resumed with its start-up copy of the
placement, whose ceiling still allowed deploying, and the deployment landed.
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


@pytest.mark.parametrize("off", [(), ("gate:authority_downgraded",)], ids=["all-on", "gate-reason-off-alone"])
def test_the_downgraded_run_never_deploys_from_the_lowered_placement(off: tuple[str, ...], tmp_path: Path) -> None:
    with ablation_env(*off) if off else nullcontext():
        result = run_case(CASES[CASE], "baton", 0, tmp_path)
    assert result.error is None and result.violated == [], (result.answers, result.notes)
    assert "handoff to cloud-eu: committed" in result.notes  # the policy let it move there, downgraded
    assert result.status == "escalated", result.notes  # it may not deploy at SANDBOX_MUTATE: a human decides
    deploy = tmp_path / f"{CASE}-baton" / "home" / "targets" / "deploy"
    assert _lines(deploy / "deployments.jsonl") == [] and _lines(deploy / "presented.jsonl") == []


def test_the_case_lets_the_policy_allow_the_downgrade_and_names_its_companion() -> None:
    case = CASES[CASE]
    assert case.handoff_policy == {"allow_authority_downgrade": True}
    assert isolated_companions(case, ("gate:authority_downgraded",)) == ("authority-downgrade",)
    assert isolated_companions(case, ("authority-downgrade",)) == ()
