"""The second writer (`replan`): a VERIFIED checkpoint over a re-planned spec, and the verifier's record that judges it."""

from __future__ import annotations

import json

from baton.models import RunKind
from baton.sim.faults import REPLAN, Fault, FaultPlan, sealed_on
from baton.sim.oracles_verdicts import deployed_only_verified
from baton.sim.runner import config_for, invariants_of, run_seed
from baton.sim.sec27_plans import APART
from baton.sim.world import VERDICTS_FILE, SimRecords, run_world

BOTH = (RunKind.DEPLOY, RunKind.RESEARCH)
PLAN = APART["replanned-after-verify"].plan


def test_the_plan_kills_the_worker_at_its_verified_seal_and_a_second_writer_seals_over_it() -> None:
    verified = sealed_on("deploy", "VERIFIED")
    assert PLAN == FaultPlan((Fault("crash", 1, "after", on=verified), Fault(REPLAN, 1, on=verified)))
    outcome = run_seed(0, 0, plan=PLAN, kinds=BOTH, keep_trail=True)
    assert outcome.ok, outcome.violations
    assert [f.describe() for f in outcome.fired] == [f.describe() for f in PLAN.faults]
    sealed = [line for line in outcome.trail or [] if "a second writer at epoch" in line]
    assert len(sealed) == 1 and "re-planned candidate" in sealed[0]


def test_with_the_evidence_binding_off_the_moved_run_deploys_what_the_verifier_never_passed() -> None:
    ablated = run_seed(0, 0, ("evidence-binding",), plan=PLAN, kinds=BOTH)
    assert "unverified_effect" in invariants_of(ablated), ablated.violations
    assert run_seed(0, 0, ("gate:runtime_changed",), plan=PLAN, kinds=BOTH).ok


def test_the_oracle_reads_the_verifiers_record() -> None:
    """A fault-free world: every deployment's spec passed; with the PASS lines taken out of the verifier's record, the
    same deployment is reported."""
    found: list[list[str]] = []

    def without_passes(records: SimRecords) -> None:
        path = records.root / VERDICTS_FILE
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        assert any(line.get("result") == "PASS" and line.get("service") == "checkout" for line in lines)
        found.append(deployed_only_verified(records))
        path.write_text("".join(json.dumps(line) + "\n" for line in lines if line.get("result") != "PASS"))
        found.append(deployed_only_verified(records))

    run_world(config_for(0, 0, kinds=BOTH), before_check=without_passes)
    assert found[0] == []
    assert len(found[1]) == 1 and found[1][0].startswith("unverified_effect: deploy applied seq 1 of sim0-deploy-0")
