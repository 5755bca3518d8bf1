"""Fault cases for the compatibility gate's schema findings: a run whose state an older Baton sealed is moved to a
placement whose workers read only the current checkpoint schema.

The deployment path: a run is started at a site still on an older Baton (checkpoint schema 2, sealed over
pydantic's JSON); that site exports it (`baton checkpoint export`) and this site imports the bundle onto
local-gpu-eu (`baton checkpoint import --placement local-gpu-eu`). The current reader takes schema 2 bundles
(`baton.bundle._read_checkpoints` refuses only version 1), so the imported run's latest checkpoint is at schema
2 until a worker of this site seals its next one. The case never starts a worker for it on the source: the
operator moves it straight to cloud-eu, whose workers read only schema 3.

The older site's writer is `legacy_form`: the schema 2 checkpoint an older Baton sealed for the same state
(every part re-encoded and addressed by `baton.identity_legacy`, the hashing those versions used, as
tests/fixtures/legacy_store_v2 was written), built from the seq-0 checkpoint this Baton's own launch seals in
a scratch store of the older site.

Records outside Baton, written before the move: the operator's record of what each placement's workers read
(`placement-changes.jsonl`, as seeded) and the run's need, read by the case from the bundle file the operator
imported (`run-needs.json`: the schema of the bundle's newest checkpoint; for the transcript controls, which start the
run here and move it the same way, the older site's schema 2 all the same). Oracle: `unfit_placement`.

- `schema-transform-forbidden-moved`: the case's policy forbids schema transforms (`allow_schema_transform=False`).
  The gate must refuse cloud-eu (`schema_transform_forbidden`); the move aborts and the run stays unmoved.
- `schema-transform-moved`: the fleet's policy, which allows transforms. The gate allows cloud-eu as a LOGICAL
  move (`schema_transform_required`, target schema 3) and the commit seals the state migrated to schema 3
  (`baton.handoff.transform`); the worker there must restore that, never the schema 2 original. The run's need
  here is the state handed over (`state_from`: the hash of the bundle's newest checkpoint, read from the file),
  and `unfit_placement` judges the checkpoint the cloud-eu worker recorded it restored
  (`home/targets/workers/restored.jsonl`): at a schema the operator's record says cloud-eu reads, sealed over its
  content, and the bundle's head or migrated from it.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from baton.bundle import MANIFEST_NAME, export_run
from baton.bundle_admission import import_bundle
from baton.faults.baton_side import BatonRun
from baton.faults.case_steps import move_or_stay
from baton.faults.oracles import RUN_NEEDS_FILE
from baton.faults.rig import Rig
from baton.hash_migration import PartGraph
from baton.identity_legacy import legacy_canonical_json
from baton.models import ExecutionCheckpoint, Record
from baton.placements import DEFAULT_PLACEMENTS
from baton.runtime.launch import launch_run
from baton.store.blobs import BlobStore, Blobs
from baton.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from baton.faults.cases import CaseRun
    from baton.runtime.launch import RunSpec
    from baton.store.base import SqlStore

SOURCE = "local-gpu-eu"
TARGET = "cloud-eu"
"""Runs model-v7 like the source; its workers read only checkpoint schema 3 (the source's read 1 to 3)."""
LEGACY_SCHEMA = "2"
BUNDLE_FILE = "older-site-bundle.tar"
"""The bundle the older site exported, as the operator received and imported it (kept under the case root)."""
NO_TRANSFORM: dict[str, Any] = {"allow_schema_transform": False}


class _LegacyWriter(PartGraph):
    """Re-encodes parts as schema 1/2 writers stored them: pydantic's JSON, addressed by the legacy hash."""

    def rewrite(self, ref: str, record: Record, model: type[Record], what: str) -> str:
        again = model.model_validate(self.swap_refs(record.model_dump(mode="json")))
        return self.blobs.put(legacy_canonical_json(again))


def legacy_form(checkpoint: ExecutionCheckpoint, blobs: Blobs, parent: ExecutionCheckpoint | None = None
                ) -> ExecutionCheckpoint:
    """The schema 2 checkpoint an older Baton sealed for `checkpoint`'s state (its parts written beside the originals
    in `blobs`). `parent` is the legacy form of the checkpoint's parent (None for seq 0)."""
    fields = {name: getattr(checkpoint, name) for name in type(checkpoint).model_fields if name != "checkpoint_hash"}
    fields.update(_LegacyWriter(blobs).checkpoint_refs(checkpoint), schema_version=LEGACY_SCHEMA, migration_ref=None,
                  migrated_from_hash=None, parent_checkpoint_hash=None if parent is None else parent.checkpoint_hash)
    return ExecutionCheckpoint.seal(**fields)


def older_site_bundle(run: BatonRun, out: Path) -> Path:
    """The older site launches the case's run (schema 2) and exports it: the bundle file the operator receives."""
    site = run.rig.root / "older-site"
    site.mkdir(parents=True, exist_ok=True)
    blobs = BlobStore(site / "blobs")
    spec = run.run_spec()
    return export_from_older_site(spec, blobs, SqliteStore(site / "launch.db"), SqliteStore(site / "baton.db"), out)


def export_from_older_site(spec: RunSpec, blobs: BlobStore, launch_store: SqlStore, site_store: SqlStore,
                           out: Path) -> Path:
    """The older site's part: launch `spec` on `launch_store`, keep its first checkpoint in schema 2 form on
    `site_store` and export the run to `out`. Both stores are closed."""
    try:
        first, _ = launch_run(launch_store, blobs, spec, reservation_ttl_s=10.0)
    finally:
        launch_store.close()
    legacy = legacy_form(first, blobs)
    try:
        site_store.create_run(spec.run_id, spec.kind, legacy.release_id, spec.placement.name,
                              {"task": spec.task, "release": spec.release.model, "authority": spec.authority.value})
        site_store.append_checkpoint(legacy)
        export_run(site_store, blobs, spec.run_id, out)
    finally:
        site_store.close()
    return out


def bundle_checkpoints(path: Path) -> list[dict[str, Any]]:
    """The checkpoint documents a bundle file lists, oldest first, read from the file itself."""
    with tarfile.open(fileobj=io.BytesIO(path.read_bytes()), mode="r:") as archive:
        member = archive.extractfile(MANIFEST_NAME)
        assert member is not None, f"{path} has no {MANIFEST_NAME}"
        manifest = json.loads(member.read())
    return list(manifest.get("checkpoints", []))


def bundle_schemas(path: Path) -> list[str]:
    """The schema versions of a bundle file's checkpoints, oldest first, read from the file itself."""
    return [str(c.get("schema_version")) for c in bundle_checkpoints(path)]


def record_schemas_read(rig: Rig) -> None:
    """The operator's record of which checkpoint schemas each placement's workers read (its seeded inventory)."""
    for placement in DEFAULT_PLACEMENTS:
        rig.record_placement_change(placement.name,
                                    readable_schema_versions=list(placement.readable_schema_versions))  # type: ignore[arg-type]


def write_needs(rig: Rig, schema: str) -> None:
    """The run needs a placement that reads the state it is resumed from (the schema its older site sealed)."""
    (rig.root / RUN_NEEDS_FILE).write_text(json.dumps({"state_schema": schema}, sort_keys=True))


def _imported_or_launched(run: CaseRun, rig: Rig, notes: list[str], *, handed_over: bool) -> None:
    """Baton: the older site's schema 2 bundle imported onto local-gpu-eu; its need is the state the file holds
    (`handed_over`: resumed from the bundle's head or its migration, judged by what the worker restored) or that
    state's schema. A control starts the run here; the older site's schema 2 need stands for it."""
    record_schemas_read(rig)
    if isinstance(run, BatonRun):
        bundle = older_site_bundle(run, rig.root / BUNDLE_FILE)
        head = bundle_checkpoints(bundle)[-1]  # from the file the operator imported
        if handed_over:
            (rig.root / RUN_NEEDS_FILE).write_text(json.dumps({"state_from": head["checkpoint_hash"]}))
        else:
            write_needs(rig, str(head["schema_version"]))
        report = import_bundle(run.store, run.blobs, bundle, placement=run.hosting[SOURCE])
        notes.append(f"imported {report.imported} from {bundle.name} onto {SOURCE}: schemas {bundle_schemas(bundle)}")
    else:
        write_needs(rig, LEGACY_SCHEMA)
        run.launch()


def imported_legacy_moved(run: CaseRun, rig: Rig, notes: list[str]) -> None:
    """A run an older Baton sealed at schema 2 is imported onto local-gpu-eu and moved to cloud-eu, whose workers
    read only schema 3, under a policy that forbids schema transforms."""
    _imported_or_launched(run, rig, notes, handed_over=False)
    move_or_stay(run, notes, TARGET, "its state is at schema 2, the target reads only schema 3, and the policy "
                 "forbids transforms")


def imported_legacy_transformed(run: CaseRun, rig: Rig, notes: list[str]) -> None:
    """The same imported run moved to cloud-eu under the fleet's policy, which allows the schema transform: the
    worker there must resume from the state migrated to schema 3."""
    _imported_or_launched(run, rig, notes, handed_over=True)
    move_or_stay(run, notes, TARGET)
