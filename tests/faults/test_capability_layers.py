"""Each check against an expired capability holds alone in `capability-expired-in-hand` (the other switched off).

The companion of `test_ablations`: there `capability-check` and `store-claim-expiry`,
each switched off with the other, let the deployment land under a capability
that had run out (oracle `expired_capability`). Here, with all checks on or with
only one of the two left, nothing reaches the deploy service: its own request
log and presented log hold nothing for the run, and no oracle says yes.
"""

from __future__ import annotations

import json
from contextlib import nullcontext
from pathlib import Path

import pytest

from baton.ablation import ablation_env
from baton.faults.cases import CASES
from baton.faults.cases_authority import EXPIRY_COMPANIONS
from baton.faults.matrix import run_case
from baton.faults.oracles import Question

CASE = "capability-expired-in-hand"


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


@pytest.mark.parametrize("kept", [None, *sorted(EXPIRY_COMPANIONS)], ids=lambda k: f"only-{k}-on" if k else "all-on")
def test_the_check_left_on_holds(kept: str | None, tmp_path: Path) -> None:
    off = EXPIRY_COMPANIONS[kept] if kept else ()
    with ablation_env(*off) if off else nullcontext():
        result = run_case(CASES[CASE], "baton", 0, tmp_path)
    assert result.error is None and result.violated == [], (result.answers, result.notes)
    assert result.status == "failed", result.notes  # the refused capability ends the run; nothing was deployed
    deploy = tmp_path / f"{CASE}-baton" / "home" / "targets" / "deploy"
    assert _lines(deploy / "deployments.jsonl") == []
    assert _lines(deploy / "presented.jsonl") == []
    assert [line for line in _lines(deploy / "requests.jsonl") if line.get("result") != "fence_advanced"] == []


def test_the_companions_name_each_other() -> None:
    assert CASES[CASE].companions == {"capability-check": ("store-claim-expiry",),
                                      "store-claim-expiry": ("capability-check",)}
    assert Question.EXPIRED_CAPABILITY.value == "expired_capability"


def _presented_case(root: Path, *lines: dict[str, object]) -> Path:
    root.mkdir(parents=True)
    (root / "reported.json").write_text(json.dumps({"run_id": "run-x", "status": "verified"}))
    deploy = root / "home" / "targets" / "deploy"
    deploy.mkdir(parents=True)
    (deploy / "presented.jsonl").write_text("".join(json.dumps({"run_id": "run-x", **line}) + "\n" for line in lines))
    return root


def test_the_oracle_reads_arrival_against_expiry_from_the_targets_log(tmp_path: Path) -> None:
    from baton.faults.oracles import CaseFiles, expired_capability

    late = {"operation_id": "op-1", "at": "2026-12-02T10:00:05.000000Z", "expires_at": "2026-12-02T10:00:01+00:00"}
    in_time = {"operation_id": "op-2", "at": "2026-12-02T10:00:00.500000Z", "expires_at": "2026-12-02T10:00:01+00:00"}
    caught = expired_capability(CaseFiles(_presented_case(tmp_path / "late", late)))
    assert len(caught) == 1 and "op-1" in caught[0] and "4.0 s before" in caught[0]
    assert expired_capability(CaseFiles(_presented_case(tmp_path / "ok", in_time))) == []
    assert expired_capability(CaseFiles(_presented_case(tmp_path / "old", {"operation_id": "op-3",
                                                                            "at": late["at"]}))) == []
