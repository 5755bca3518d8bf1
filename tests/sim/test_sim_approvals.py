"""The world's approver keeps its own record, and the oracle reading it against the deploy service's own record."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from baton.approval_policy import ApprovalRequest
from baton.models import AuthorityLevel, RunKind
from baton.sim.approver import APPROVER_FILE, RecordingApprover
from baton.sim.faults import HOLD, Fault, FaultPlan
from baton.sim.oracles_approval import deployed_under_an_approval
from baton.sim.runner import config_for, run_seed
from baton.sim.sec27_plans import APART
from baton.sim.world import SimRecords, run_world

BOTH = (RunKind.DEPLOY, RunKind.RESEARCH)


def test_the_recording_approver_decides_as_the_policy_and_writes_what_it_granted(tmp_path: Path) -> None:
    approver = RecordingApprover(tmp_path / APPROVER_FILE)
    now = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    assert approver.approve(ApprovalRequest("r", "deploy", "sha256:x", AuthorityLevel.EXTERNAL_MUTATE, (), now)) is None
    assert not (tmp_path / APPROVER_FILE).exists()  # refused (no passing evidence): nothing granted, nothing written


def test_every_deployment_of_a_fault_free_world_lands_under_a_recorded_approval() -> None:
    seen: list[list[dict[str, object]]] = []

    def keep(records: SimRecords) -> None:
        seen.append([json.loads(line) for line in (records.root / APPROVER_FILE).read_text().splitlines()])

    outcome = run_world(config_for(0, 0, kinds=BOTH), before_check=keep)
    assert outcome.ok, outcome.violations
    [granted] = seen
    assert [(a["run_id"], a["operation"]) for a in granted] == [("sim0-deploy-0", "deploy"),
                                                                ("sim0-research-1", "publish")]
    assert all(dt.datetime.fromisoformat(str(a["expires_at"])) - dt.datetime.fromisoformat(str(a["at"]))
               == dt.timedelta(seconds=900) for a in granted)


def test_the_oracle_reads_the_approvers_record_not_the_store() -> None:
    """With the approver's record saying the approval ran out before the deployment, the same world is caught."""
    found: list[list[str]] = []

    def shorten(records: SimRecords) -> None:
        path = records.root / APPROVER_FILE
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        path.write_text("".join(json.dumps({**a, "expires_at": a["at"]}) + "\n" for a in lines))
        found.append(deployed_under_an_approval(records))

    run_world(config_for(0, 0, kinds=BOTH), before_check=shorten)
    assert len(found[0]) == 1 and found[0][0].startswith("expired_approval: deploy applied seq 1 of sim0-deploy-0")


def test_a_worker_held_past_its_approval_deploys_only_with_the_approval_check_off() -> None:
    plan = APART["approval-expired-in-hand"].plan
    assert plan == FaultPlan((Fault(HOLD, 1, "1000.0", on="sealed:deploy:COMMITTING"),))
    protected = run_seed(0, 0, plan=plan, kinds=BOTH)
    assert protected.ok and protected.statuses["sim0-deploy-0"] == "failed", protected.violations
    ablated = run_seed(0, 0, ("approval-check",), plan=plan, kinds=BOTH)
    assert [v.split(":", 1)[0] for v in ablated.violations] == ["expired_approval"], ablated.violations
    assert [f.describe() for f in ablated.fired] == ["hold@1[sealed:deploy:COMMITTING](1000.0)"]
