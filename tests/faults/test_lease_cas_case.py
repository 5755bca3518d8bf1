"""`stale-claim-after-move`: a claim on a reservation read before the run moved wins nothing; without the
compare-and-set on the epoch it moves the run's epoch back, and only the targets' fences still stand.

The companion of `test_ablations`: there `lease-cas`, switched off with `target-fence`, lets the stale worker's
deployment land at the regressed epoch (oracle `stale_owner`, from the deploy service's own request log). Here:
the oracle on hand-written request logs of the three ways the case ends, the case with every protection on,
and each of the two layers alone (the other switched off) holding.
"""

from __future__ import annotations

import json
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest

from baton.ablation import ablation_env
from baton.faults.ablations import CATCHING_CASE, run_ablation
from baton.faults.cases import CASES
from baton.faults.matrix import isolated_companions, run_case
from baton.faults.oracles import Question, answer

CASE = "stale-claim-after-move"
RUN = "stale-claim-after-move-abc123"


def _fence(epoch: int, mark: int) -> dict[str, Any]:
    return {"run_id": RUN, "epoch": epoch, "result": "fence_advanced", "operation_id": "", "detail": f"mark now {mark}"}


def _deploy(epoch: int, result: str) -> dict[str, Any]:
    return {"run_id": RUN, "epoch": epoch, "result": result, "operation_id": f"op-{epoch}", "idempotency_key": "k"}


ENDINGS = {
    # the move fences at 2, the new owner at 3; the stale claim (regressed to 2) fences at 2 and deploys there
    "regressed-and-applied": [_fence(2, 2), _fence(3, 3), _fence(2, 3), _deploy(2, "applied")],
    # the stale claim won nothing: the new owner deploys at 3
    "claim-refused": [_fence(2, 2), _fence(3, 3), _deploy(3, "applied")],
    # regressed, but the target's fence refused it; the operator moved the run on, its worker deployed at 4
    "regressed-and-fenced": [_fence(2, 2), _fence(3, 3), _fence(2, 3), _deploy(2, "fenced"), _fence(3, 3),
                             _fence(4, 4), _deploy(4, "applied")],
}


def _root(tmp_path: Path, requests: list[dict[str, Any]]) -> Path:
    (tmp_path / "reported.json").write_text(json.dumps({"run_id": RUN, "status": "verified", "model_calls": 0}))
    log = tmp_path / "home" / "targets" / "deploy" / "requests.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text("".join(json.dumps(row) + "\n" for row in requests))
    return tmp_path


@pytest.mark.parametrize("ending", sorted(ENDINGS))
def test_stale_owner_flags_only_the_deployment_applied_at_the_regressed_epoch(ending: str, tmp_path: Path) -> None:
    evidence = answer(_root(tmp_path, ENDINGS[ending]))[Question.STALE_OWNER]
    if ending == "regressed-and-applied":
        assert evidence == ["deploy applied op-2 at epoch 2 after it had seen epoch 3"]
    else:
        assert evidence == []


def test_the_table_names_the_case_and_the_fence_is_its_companion() -> None:
    assert CATCHING_CASE["lease-cas"] == CASE
    assert isolated_companions(CASES[CASE], ("lease-cas",)) == ("target-fence",)
    assert isolated_companions(CASES[CASE], ("target-fence",)) == ()


def _requests(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / f"{CASE}-baton" / "home" / "targets" / "deploy" / "requests.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("off", [(), ("target-fence",), ("lease-cas",)],
                         ids=["all-on", "compare-and-set-alone", "fence-alone"])
@pytest.mark.integration
@pytest.mark.slow
def test_each_layer_alone_keeps_the_stale_claim_from_deploying(off: tuple[str, ...], tmp_path: Path) -> None:
    with ablation_env(*off) if off else nullcontext():
        result = run_case(CASES[CASE], "baton", 0, tmp_path)
    assert result.error is None and result.violated == [], (result.answers, result.notes)
    assert result.status == "verified", result.notes
    lines = _requests(tmp_path)
    applied = [line for line in lines if line["result"] == "applied"]
    assert len(applied) == 1, lines  # one deployment, by an owner the store and the targets agree on
    if "lease-cas" in off:  # the claim regressed the epoch to 2; the target, which had seen 3, refused it
        assert "stalled claim on epoch 1: ok at epoch 2" in result.notes
        refused = [(line["epoch"], line["result"]) for line in lines if line["result"] not in ("applied", "fence_advanced")]
        assert refused == [(2, "fenced")], lines
        assert applied[0]["epoch"] == 4  # moved on by the operator after every owner was fenced
    else:  # the compare-and-set refused the claim: the run's new owner deployed at epoch 3
        assert "stalled claim on epoch 1: fail at epoch 1" in result.notes
        assert applied[0]["epoch"] == 3


@pytest.mark.integration
@pytest.mark.slow
def test_without_the_compare_and_set_the_stale_claim_deploys_at_a_regressed_epoch(tmp_path: Path) -> None:
    result = run_ablation("lease-cas", cases=[CASE], root=tmp_path)
    assert result.caught.get(CASE) == ["stale_owner"], (result.evidence, result.errors)
    evidence = result.evidence[CASE]
    assert evidence and all("at epoch 2 after it had seen epoch 3" in line for line in evidence), evidence
