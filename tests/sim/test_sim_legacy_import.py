"""The operator's import of an older site's run (`legacy_import`), and the check that reads the workers' restore record."""

from __future__ import annotations

import json

from baton.models import RunKind
from baton.sim.faults import LEGACY_IMPORT, Fault, FaultPlan
from baton.sim.legacy_import import NO_TRANSFORM, RESTORED_FILE, SCHEMAS_FILE
from baton.sim.oracles_restore import acted_on_readable_state
from baton.sim.runner import config_for, invariants_of, run_seed
from baton.sim.scenarios import LEGACY_SHARE, LEGACY_STREAM, draw_legacy_import
from baton.sim.world import SimRecords, run_world

BOTH = (RunKind.DEPLOY, RunKind.RESEARCH)
ALLOWED = FaultPlan((Fault(LEGACY_IMPORT, 0),))
FORBIDDEN = FaultPlan((Fault(LEGACY_IMPORT, 0, NO_TRANSFORM),))


def _restored(outcome_root: list[list[dict[str, object]]]) -> object:
    def keep(records: SimRecords) -> None:
        path = records.root / RESTORED_FILE
        outcome_root.append([json.loads(line) for line in path.read_text().splitlines()])
    return keep


def test_the_imported_run_is_moved_migrated_when_the_policy_allows_the_transform() -> None:
    seen: list[list[dict[str, object]]] = []
    outcome = run_world(config_for(1, 0, plan=ALLOWED, kinds=BOTH, keep_trail=True), before_check=_restored(seen))
    assert outcome.ok, outcome.violations
    trail = outcome.trail or []
    assert any("imported sim1-deploy-0 from the older site's bundle onto local-gpu-eu" in line for line in trail)
    assert any("operator's move of sim1-deploy-0: committed cloud-eu" in line for line in trail)
    first = next(r for r in seen[0] if r["run_id"] == "sim1-deploy-0")
    checkpoint = first["checkpoint"]
    assert isinstance(checkpoint, dict)
    assert (first["placement"], checkpoint["schema_version"]) == ("cloud-eu", "3")
    assert checkpoint["migrated_from_hash"] is not None  # the schema 2 head, migrated at the move's commit


def test_the_imported_run_stays_where_it_was_imported_when_the_policy_forbids_the_transform() -> None:
    seen: list[list[dict[str, object]]] = []
    outcome = run_world(config_for(1, 0, plan=FORBIDDEN, kinds=BOTH, keep_trail=True), before_check=_restored(seen))
    assert outcome.ok, outcome.violations
    trail = outcome.trail or []
    assert any("operator's move of sim1-deploy-0: aborted" in line for line in trail)
    assert any("operator's move of sim1-deploy-0: committed local-gpu-eu" in line for line in trail)
    first = next(r for r in seen[0] if r["run_id"] == "sim1-deploy-0")
    checkpoint = first["checkpoint"]
    assert isinstance(checkpoint, dict)
    assert (first["placement"], checkpoint["schema_version"]) == ("local-gpu-eu", "2")


def test_each_gate_reason_off_lets_the_run_deploy_from_a_placement_that_cannot_read_its_state() -> None:
    for plan, reason in ((ALLOWED, "gate:schema_transform_required"), (FORBIDDEN, "gate:schema_transform_forbidden")):
        ablated = run_seed(1, 0, (reason,), plan=plan, kinds=BOTH)
        assert invariants_of(ablated) == {"unfit_placement"}, ablated.violations
        assert "from cloud-eu (epoch 2), whose worker restored" in ablated.violations[0]
        assert "at state_schema 2" in ablated.violations[0]


def test_the_oracle_reads_the_restore_record_against_the_operators_record() -> None:
    """The protected world, then its records tampered: the restored state said to be schema 2, or the operator's record
    saying cloud-eu's workers read only a schema the run never had."""
    found: list[list[str]] = []

    def tamper(records: SimRecords) -> None:
        found.append(acted_on_readable_state(records))
        path = records.root / RESTORED_FILE
        original = path.read_text()
        lines = [json.loads(line) for line in original.splitlines()]
        for line in lines:
            if line["run_id"] == "sim1-deploy-0":
                line["checkpoint"]["schema_version"] = "2"
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
        found.append(acted_on_readable_state(records))
        path.write_text(original)
        schemas = records.root / SCHEMAS_FILE
        read = json.loads(schemas.read_text())
        schemas.write_text(json.dumps({**read, "cloud-eu": ["4"]}))
        found.append(acted_on_readable_state(records))

    run_world(config_for(1, 0, plan=ALLOWED, kinds=BOTH), before_check=tamper)
    assert found[0] == []
    assert len(found[1]) == 1 and found[1][0].startswith("unfit_placement: deploy accepted message")
    assert "from cloud-eu" in found[1][0] and "read only ['3']" in found[1][0]
    assert any(v.startswith("unfit_placement: deploy accepted") and "read only ['4']" in v for v in found[2])


def test_no_record_no_check() -> None:
    """A world without the import has no operator's schema record: the check finds nothing to judge."""
    found: list[list[str]] = []
    run_world(config_for(0, 0, kinds=BOTH), before_check=lambda records: found.append(acted_on_readable_state(records)))
    assert found == [[]]


def test_the_draw_is_on_its_own_stream_and_skips_the_pinned_first_seeds() -> None:
    assert (LEGACY_STREAM, LEGACY_SHARE) == ("legacy_imported", 0.05)
    first_seeds = {26, 33, 37, 44, 47, 63, 64, 75, 80, 85, 92, 137, 197}  # of stop 32's sweep's rows, STOP31, STOP32
    pinned = first_seeds | set(range(24)) | {30}  # and the seeds other tests run with random faults
    assert not any(draw_legacy_import(seed, BOTH) for seed in pinned)
    assert draw_legacy_import(28, BOTH) == Fault(LEGACY_IMPORT, 0, NO_TRANSFORM)
    assert draw_legacy_import(78, BOTH) == Fault(LEGACY_IMPORT, 0, "")
    assert draw_legacy_import(28, (RunKind.RESEARCH,)) is None  # no deploy run to import


def test_an_import_the_runs_constraints_refuse_leaves_the_run_launched_here() -> None:
    """The owner's rule asks for attested hardware: the bundle may not be imported onto local-gpu-eu, nothing of it is
    written, and the operator launches the run here instead (no move)."""
    plan = FaultPlan((Fault("owner_rule", 0, "attested"), Fault(LEGACY_IMPORT, 0)))
    outcome = run_seed(1, 0, plan=plan, kinds=BOTH, keep_trail=True)
    assert outcome.ok, outcome.violations
    trail = outcome.trail or []
    assert any("export or import of sim1-deploy-0 onto local-gpu-eu refused: BundlePlacementError" in line
               for line in trail)
    assert not any("operator's move" in line for line in trail)


def test_an_imported_run_no_placement_can_take_is_escalated_not_left_unowned() -> None:
    """Seed 1758 of the 10,000-seed run, shrunk: the owner keeps the run in its launch region, so local-gpu-eu (another
    region) refuses it, and cloud-eu needs the forbidden schema transform. The import granted no lease (epoch 0), and
    the coordinator's scan skipped epoch 0, so nobody asked again and the run stayed active and unowned for good
    (I10). Now the scan counts an imported run as waiting for an owner, and the stranded run is escalated."""
    plan = FaultPlan((Fault(LEGACY_IMPORT, 0, NO_TRANSFORM), Fault("owner_rule", 0, "same_region")))
    outcome = run_seed(1758, 0, plan=plan, keep_trail=True)
    assert outcome.ok, outcome.violations
    assert outcome.statuses == {"sim1758-deploy-0": "escalated"}
    trail = outcome.trail or []
    assert sum("operator's move of sim1758-deploy-0: aborted" in line for line in trail) == 2


def test_the_owner_of_an_imported_run_declares_the_schema_it_arrived_at() -> None:
    """Seed 2072 of the 10,000-seed run: the operator's schema change leaves cloud-eu reading schemas 1 and 2, then its
    move of the imported run (state at schema 2) to cloud-eu commits, rightly. The owner's record used to say every run
    needs this site's schema 3, so the catalog oracle flagged the deploy from cloud-eu; the owner of a run an older
    site sealed declares that site's schema, as the live case's need (`cases_schema.write_needs`) does."""
    from baton.sim.catalog_faults import OWNER_FILE

    plan = FaultPlan.from_json(
        '[{"arg": "no_transform", "at": 0, "kind": "legacy_import"}, {"arg": "downgrade_allowed", "at": 0, '
        '"kind": "owner_rule"}, {"arg": "schema_lost", "at": 2, "kind": "catalog_change"}, {"arg": "", "at": 3, '
        '"kind": "drop_request"}, {"arg": "", "at": 5, "kind": "drop_response"}, {"arg": "2.0", "at": 6, '
        '"kind": "delay"}, {"arg": "", "at": 10, "kind": "duplicate"}]')
    needs: list[dict[str, object]] = []
    outcome = run_world(config_for(2072, 0, plan=plan, keep_trail=True),
                        before_check=lambda records: needs.append(json.loads((records.root / OWNER_FILE).read_text())))
    assert outcome.ok, outcome.violations
    trail = outcome.trail or []
    assert any("catalog schema_lost: placement cloud-eu now {'readable_schema_versions': ['1', '2']}" in line
               for line in trail)
    assert any("committed cloud-eu" in line for line in trail)
    assert needs[0]["sim2072-deploy-0"]["state_schema"] == "2"  # type: ignore[index]
