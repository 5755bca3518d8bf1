"""A run an older Baton sealed at checkpoint schema 2, imported and moved to a schema-3-only placement
(baton/faults/cases_schema.py), and the oracle that judges it.

`schema-transform-moved` (the transform allowed): `unfit_placement` judges the checkpoint the worker recorded it
restored against the state handed over (`state_from`), on hand-written files first, then live: clean with every
protection on (the worker on cloud-eu restored the schema 3 migration of the bundle's head), and, in
tests/faults/test_ablations.py, caught with `gate:schema_transform_required` switched off.

Oracle tests first, on hand-written files: `unfit_placement` with the run's need read from the bundle it was
imported from and the operator's record of what each placement reads. Then the older site's writer: its bundle
is one the current import takes, and the gate weighs a schema transform for it on cloud-eu. Then the case's
wiring and the live runs: with `gate:schema_transform_forbidden` switched off, Baton only, the oracle sees the
deployment from cloud-eu; with every protection on, the coordinator passes cloud-eu over and no oracle says
anything.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import shutil
import tarfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from builders.fault_cases import assert_passed_over_and_clean

from baton.bundle import export_run
from baton.bundle_admission import import_bundle
from baton.catalog.releases import RELEASES
from baton.checkpoints import restore
from baton.compat import GateReason, HandoffPolicy, MigrationClass, evaluate_restored
from baton.faults.ablations import CATCHING_CASE, run_ablation
from baton.faults.cases import CASES
from baton.faults.cases_schema import NO_TRANSFORM, bundle_schemas, legacy_form
from baton.faults.matrix import run_case
from baton.faults.oracles import CaseFiles, checkpoint_seal, unfit_placement
from baton.models import AuthorityLevel, RunKind
from baton.placements import DEFAULT_PLACEMENTS, placement_named
from baton.runtime.launch import RunSpec, default_limits, launch_run
from baton.store.blobs import BlobStore
from baton.store.sqlite import SqliteStore

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "legacy_store_v2"
"""A store the schema 2 code wrote (tests/fixtures/build_legacy_store.py): the older Baton's own output."""
RUN = "case-abc123"
CASE = "schema-transform-forbidden-moved"
TRANSFORMED = "schema-transform-moved"
SOURCE = "local-gpu-eu"
SEEDED_AT = "2026-12-02T02:00:00+00:00"
ADMITTED_AT = "2026-12-02T02:00:05Z"
READS = {"local-gpu-eu": ["1", "2", "3"], "cloud-eu": ["3"]}


def _write_lines(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def _files(root: Path, placement: str | None, *, schema: str = "2", recorded_at: str = SEEDED_AT) -> Path:
    """One deployment admitted from `placement` (none: nothing admitted); the run needs state schema `schema`."""
    root.mkdir(parents=True)
    (root / "reported.json").write_text(json.dumps({"run_id": RUN, "status": "verified"}))
    (root / "run-needs.json").write_text(json.dumps({"state_schema": schema}))
    _write_lines(root / "placement-changes.jsonl", [
        {"at": recorded_at, "placement": name, "readable_schema_versions": reads} for name, reads in READS.items()])
    admitted = [] if placement is None else [
        {"at": ADMITTED_AT, "operation_id": "op-1", "run_id": RUN, "placement": placement, "level": "EXTERNAL_MUTATE"}]
    _write_lines(root / "home" / "targets" / "deploy" / "presented.jsonl", [
        *admitted, {"at": ADMITTED_AT, "operation_id": "op-9", "run_id": "other-run", "placement": "cloud-eu",
                    "level": "EXTERNAL_MUTATE"}])
    return root


def test_a_deployment_from_a_placement_that_cannot_read_the_state_it_resumed_is_unfit(tmp_path: Path) -> None:
    flagged = unfit_placement(CaseFiles(_files(tmp_path / "a", "cloud-eu")))
    assert len(flagged) == 1 and "op-1 from cloud-eu" in flagged[0] and "state_schema 2" in flagged[0], flagged
    assert unfit_placement(CaseFiles(_files(tmp_path / "b", "local-gpu-eu"))) == []  # reads 1 to 3
    assert unfit_placement(CaseFiles(_files(tmp_path / "c", None))) == []  # only another run's admission
    assert unfit_placement(CaseFiles(_files(tmp_path / "d", "cloud-eu", schema="3"))) == []  # current state


HEAD = "sha256:" + "a" * 64
"""The hash of the bundle's newest checkpoint: the state handed over."""


def _sealed(document: dict[str, Any]) -> dict[str, Any]:
    return {**document, "checkpoint_hash": checkpoint_seal(document)}


def _restored(root: Path, *checkpoints: dict[str, Any], at: str = "2026-12-02T02:00:04Z") -> Path:
    """Files of a run handed over at HEAD whose cloud-eu worker restored `checkpoints` before op-1 was admitted."""
    _files(root, "cloud-eu")
    (root / "run-needs.json").write_text(json.dumps({"state_from": HEAD}))
    _write_lines(root / "home" / "targets" / "workers" / "restored.jsonl", [
        {"at": at, "run_id": RUN, "placement": "cloud-eu", "epoch": 2, "checkpoint": c} for c in checkpoints])
    return root


def test_a_handed_over_state_is_judged_by_the_checkpoint_the_worker_restored(tmp_path: Path) -> None:
    migrated = _sealed({"schema_version": "3", "seq": 1, "parent_checkpoint_hash": HEAD, "migrated_from_hash": HEAD})
    assert unfit_placement(CaseFiles(_restored(tmp_path / "a", migrated))) == []  # cloud-eu reads 3; leads to HEAD

    legacy = {"schema_version": "2", "seq": 0, "checkpoint_hash": HEAD}  # the head itself, restored as it was
    flagged = unfit_placement(CaseFiles(_restored(tmp_path / "b", legacy)))
    assert len(flagged) == 1 and "state_schema 2" in flagged[0] and "from cloud-eu" in flagged[0], flagged

    forged = {**migrated, "seq": 2}  # content changed under its seal
    assert any("does not hash to its seal" in line for line in unfit_placement(CaseFiles(_restored(tmp_path / "c",
                                                                                                    forged))))
    stranger = _sealed({"schema_version": "3", "seq": 1, "parent_checkpoint_hash": "sha256:" + "b" * 64,
                        "migrated_from_hash": "sha256:" + "b" * 64})
    assert any("is neither the state handed over" in line
               for line in unfit_placement(CaseFiles(_restored(tmp_path / "d", stranger))))
    later = _restored(tmp_path / "e", migrated, at="2026-12-02T02:00:06Z")  # restored only after the admission
    assert any("no record of the state restored" in line for line in unfit_placement(CaseFiles(later)))


def test_the_operators_record_counts_only_from_when_it_was_written(tmp_path: Path) -> None:
    later = _files(tmp_path / "a", "cloud-eu", recorded_at="2026-12-02T02:00:09+00:00")
    assert unfit_placement(CaseFiles(later)) == []


def test_bundle_schemas_are_read_from_the_file_itself(tmp_path: Path) -> None:
    manifest = json.dumps({"run_id": RUN, "checkpoints": [{"schema_version": "2"}, {"schema_version": "3"}]}).encode()
    path = tmp_path / "b.tar"
    with tarfile.open(path, "w") as archive:
        info = tarfile.TarInfo("manifest.json")
        info.size = len(manifest)
        archive.addfile(info, io.BytesIO(manifest))
    assert bundle_schemas(path) == ["2", "3"]


# -- the older site's writer ----------------------------------------------------------------------


def _imported(tmp_path: Path) -> tuple[SqliteStore, BlobStore, Path]:
    """A deploy run launched, re-sealed as the older Baton sealed it, exported and imported onto local-gpu-eu."""
    source = placement_named(DEFAULT_PLACEMENTS, "local-gpu-eu")
    blobs = BlobStore(tmp_path / "older" / "blobs")
    scratch = SqliteStore(tmp_path / "older" / "launch.db")
    spec = RunSpec(RUN, RunKind.DEPLOY, RELEASES["model-v7"], source, "deploy checkout", {"service": "checkout"},
                   AuthorityLevel.EXTERNAL_MUTATE, limits=default_limits(scratch.db_now()))
    first, _ = launch_run(scratch, blobs, spec, reservation_ttl_s=10.0)
    scratch.close()
    legacy = legacy_form(first, blobs)
    older = SqliteStore(tmp_path / "older" / "baton.db")
    older.create_run(RUN, spec.kind, legacy.release_id, source.name, {})
    older.append_checkpoint(legacy)
    bundle = tmp_path / "bundle.tar"
    export_run(older, blobs, RUN, bundle)
    older.close()
    store, here = SqliteStore(tmp_path / "here.db"), BlobStore(tmp_path / "here-blobs")
    import_bundle(store, here, bundle, placement=source)
    return store, here, bundle


def test_the_older_sites_bundle_is_imported_at_schema_2_and_the_gate_weighs_a_transform(tmp_path: Path) -> None:
    store, blobs, bundle = _imported(tmp_path)
    try:
        assert bundle_schemas(bundle) == ["2"]
        (latest,) = store.list_checkpoints(RUN)
        assert latest.schema_version == "2" and latest.release_id == RELEASES["model-v7"].release_id
        restored = restore(blobs, latest)
        target = placement_named(DEFAULT_PLACEMENTS, "cloud-eu")
        assert target.readable_schema_versions == ("3",)
        now = dt.datetime.now(dt.timezone.utc)
        allowed = evaluate_restored(restored, target, HandoffPolicy(), now=now)
        assert allowed.allowed and GateReason.SCHEMA_TRANSFORM_REQUIRED in allowed.reasons
        assert allowed.migration_class is MigrationClass.LOGICAL
        refused = evaluate_restored(restored, target, HandoffPolicy(**NO_TRANSFORM), now=now)
        assert not refused.allowed and refused.blocking_reasons == (GateReason.SCHEMA_TRANSFORM_FORBIDDEN,)
    finally:
        store.close()


def test_a_store_the_older_baton_wrote_holds_a_live_schema_2_run_the_gate_weighs_a_transform_for(
        tmp_path: Path) -> None:
    """Upgraded in place, or exported and imported elsewhere: no migration is forced on the way."""
    home = tmp_path / "legacy"
    shutil.copytree(FIXTURE, home)
    store, blobs = SqliteStore(home / "baton.db"), BlobStore(home / "blobs")
    here, here_blobs = SqliteStore(tmp_path / "here.db"), BlobStore(tmp_path / "here-blobs")
    try:
        (live,) = [run for run in store.list_runs() if run.status == "active"]
        latest = store.list_checkpoints(live.run_id)[-1]
        assert latest.schema_version == "2" and latest.release_id == RELEASES["model-v7"].release_id
        export_run(store, blobs, live.run_id, tmp_path / "bundle.tar")
        assert set(bundle_schemas(tmp_path / "bundle.tar")) == {"2"}
        import_bundle(here, here_blobs, tmp_path / "bundle.tar", placement=placement_named(DEFAULT_PLACEMENTS, SOURCE))
        target, now = placement_named(DEFAULT_PLACEMENTS, "cloud-eu"), dt.datetime.now(dt.timezone.utc)
        for where, where_blobs in ((store, blobs), (here, here_blobs)):
            restored = restore(where_blobs, where.list_checkpoints(live.run_id)[-1])
            assert GateReason.SCHEMA_TRANSFORM_REQUIRED in evaluate_restored(restored, target, HandoffPolicy(),
                                                                             now=now).reasons
            refused = evaluate_restored(restored, target, HandoffPolicy(**NO_TRANSFORM), now=now)
            assert refused.blocking_reasons == (GateReason.SCHEMA_TRANSFORM_FORBIDDEN,)
    finally:
        store.close()
        here.close()


def test_the_case_forbids_transforms_and_is_the_one_that_catches_the_reason() -> None:
    case = CASES[CASE]
    assert case.handoff_policy == {"allow_schema_transform": False}
    assert case.exercises == ("schema_transform_forbidden",)
    assert CATCHING_CASE["gate:schema_transform_forbidden"] == CASE


def test_the_transform_case_keeps_the_fleet_policy_and_catches_the_required_reason() -> None:
    case = CASES[TRANSFORMED]
    assert case.handoff_policy == {} and case.exercises == ()  # its committed decision raises the reason itself
    assert CATCHING_CASE["gate:schema_transform_required"] == TRANSFORMED


# -- live -------------------------------------------------------------------------------------------


@pytest.mark.integration
@pytest.mark.slow
def test_the_reason_switched_off_is_caught_by_unfit_placement(tmp_path: Path) -> None:
    result = run_ablation("gate:schema_transform_forbidden", cases=[CASE], root=tmp_path)
    assert "unfit_placement" in result.caught.get(CASE, []), f"uncaught: {result.evidence} {result.errors}"
    assert any("from cloud-eu" in line and "state_schema 2" in line for line in result.evidence[CASE]), result.evidence


@pytest.mark.integration
@pytest.mark.slow
def test_with_every_protection_on_cloud_eu_is_passed_over_and_baton_is_clean(tmp_path: Path) -> None:
    assert_passed_over_and_clean(CASE, tmp_path)


@pytest.mark.integration
@pytest.mark.slow
def test_with_every_protection_on_the_moved_run_resumes_from_the_migrated_state_and_baton_is_clean(
        tmp_path: Path) -> None:
    result = run_case(CASES[TRANSFORMED], "baton", 0, tmp_path)
    assert result.error is None, result.error
    assert result.violated == [], {q.value: result.answers[q] for q in result.violated}
    assert "handoff to cloud-eu: committed" in result.notes and "ended verified" in result.notes, result.notes
    files = CaseFiles(tmp_path / f"{TRANSFORMED}-baton")
    (restored,) = files.restored
    checkpoint = restored["checkpoint"]
    assert (restored["placement"], checkpoint["schema_version"]) == ("cloud-eu", "3")
    assert checkpoint["migrated_from_hash"] == checkpoint["parent_checkpoint_hash"] == files.needs["state_from"]


def test_the_fleet_asks_to_place_an_imported_run_nobody_holds_but_not_a_launch_in_progress(tmp_path: Path) -> None:
    """An import grants no lease (epoch 0) and nothing else will, so the fleet's expiry scan asks for a handoff of it;
    a run a launch has created but not yet reserved (also epoch 0) is left to its launch."""
    import time

    from baton.fleet import Fleet, FleetConfig
    from baton.handoff.coordinator import HandoffStatus
    from baton.runtime.dispatch import build_coordinator
    from baton.runtime.handoff_dispatch import HandoffDispatcher

    store, blobs, _ = _imported(tmp_path)
    try:
        store.create_run("launching", RunKind.DEPLOY, RELEASES["model-v7"].release_id, "local-gpu-eu", {})
        dispatcher = HandoffDispatcher(build_coordinator(store, blobs, DEFAULT_PLACEMENTS, ()))
        fleet = Fleet(FleetConfig(home=tmp_path / "home"))
        fleet._hand_off_expired(store, dispatcher, {RUN: "local-gpu-eu", "launching": "local-gpu-eu"}, {},
                                time.monotonic())
        assert sorted(dispatcher.in_flight) == [RUN]
        deadline = time.monotonic() + 60.0
        while dispatcher.busy(RUN) and time.monotonic() < deadline:
            time.sleep(0.05)
        (outcome,) = dispatcher.outcomes
        assert outcome.status is HandoffStatus.COMMITTED, outcome
        assert store.get_lease(RUN).epoch > 0
        assert store.get_lease("launching").epoch == 0
    finally:
        dispatcher.pool.shutdown(wait=True)
        store.close()
