"""A run an older Baton sealed, imported and moved: the sim's form of the live cases `schema-transform-moved` and
`schema-transform-forbidden-moved` (`baton.faults.cases_schema`).

A `legacy_import` fault (at 0: in force from the launch) says the world's deploy run was started at a site still on
an older Baton (checkpoint schema 2), which exported it; the operator imports the bundle file onto local-gpu-eu
(`baton checkpoint import --placement local-gpu-eu`: no lease, no worker yet) and, before any worker of this site
seals the run's next checkpoint, asks the fleet to move it to cloud-eu, whose workers read only schema 3. If the move
does not commit, the operator has the run resumed where it was imported (a move onto its own placement). `arg` is the
fleet policy on schema transforms: "" allows them (the gate must ask for the LOGICAL move, whose commit seals the state
migrated to schema 3), `no_transform` forbids them (the gate must refuse cloud-eu).

Records outside Baton: the operator writes what each placement's workers read (`SCHEMAS_FILE`, its inventory) before
it imports; the workers write the state they restore (`baton.runtime.restore_record`, `RESTORED_FILE`), as the live
matrix's workers do. The oracle is `baton.sim.oracles_restore`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from baton.bundle_admission import import_bundle
from baton.clock import Clock
from baton.errors import BundleError, NonExportableStateError
from baton.faults.cases_schema import bundle_checkpoints, export_from_older_site
from baton.models import Placement
from baton.runtime.launch import RunSpec
from baton.sim.memory_store import MemoryStore
from baton.store.blobs import BlobStore, Blobs
from baton.store.base import SqlStore

LEGACY_IMPORT = "legacy_import"
NO_TRANSFORM = "no_transform"
"""The `legacy_import` arg whose fleet policy forbids schema transforms (`allow_schema_transform=False`)."""
SOURCE = "local-gpu-eu"
"""Where the operator imports the bundle (its workers read schemas 1 to 3)."""
TARGET = "cloud-eu"
"""Where the operator moves the imported run (its workers read only schema 3)."""
SCHEMAS_FILE = "operator/schemas-read.json"
"""The operator's record: placement -> the checkpoint schemas its workers read, written before the import."""
RESTORED_FILE = "workers/restored.jsonl"
"""The workers' own record of every state they restored (`BATON_RESTORE_RECORD`)."""
SITE_DIR = "older-site"


def older_site_bundle(spec: RunSpec, root: Path, clock: Clock, name: str) -> Path:
    """The older site launches `spec` and seals its first checkpoint at schema 2, then exports the run: the bundle
    file the operator receives (under `root`). `name` prefixes the older site's in-memory stores."""
    site = root / SITE_DIR
    shutil.rmtree(site, ignore_errors=True)  # the world's directory is reused world after world
    site.mkdir(parents=True)
    blobs = BlobStore(site / "blobs")
    return export_from_older_site(spec, blobs, MemoryStore(f"{name}-older-launch", clock=clock),
                                  MemoryStore(f"{name}-older-site", clock=clock), site / "bundle.tar")


def record_schemas_read(root: Path, placements: tuple[Placement, ...]) -> None:
    """The operator's record of which checkpoint schemas each placement's workers read (its inventory)."""
    path = root / SCHEMAS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({p.name: list(p.readable_schema_versions) for p in placements}, sort_keys=True))


def import_legacy(store: SqlStore, blobs: Blobs, spec: RunSpec, root: Path, clock: Clock,
                  placements: tuple[Placement, ...]) -> tuple[str | None, str]:
    """The operator's import of the older site's bundle for `spec`'s run onto `SOURCE`: the state schema of the
    newest checkpoint in the bundle file (read from the file, as the live case does), or None if the run was not
    imported, and what happened, in words. An export the older site refuses (state the owner declared non-exportable)
    or an import the bundle's constraints refuse there (attested hardware) writes nothing; the operator then launches
    the run here instead."""
    record_schemas_read(root, placements)
    source = next(p for p in placements if p.name == SOURCE)
    try:
        bundle = older_site_bundle(spec, root, clock, getattr(store, "name", "sim"))
        report = import_bundle(store, blobs, bundle, placement=source)
    except (BundleError, NonExportableStateError) as exc:
        return None, f"export or import of {spec.run_id} onto {SOURCE} refused: {type(exc).__name__}"
    schema = str(bundle_checkpoints(bundle)[-1]["schema_version"])
    return schema, f"imported {spec.run_id} from the older site's bundle onto {SOURCE} ({len(report.imported)} checkpoint(s))"
