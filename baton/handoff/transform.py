"""A handoff's schema transform: the state a LOGICAL move resumes from, at the schema the gate chose.

The gate allows a move to a placement that cannot read the run's checkpoint schema only when a forward
migration reaches one it reads (`baton.compat`, `migration_class` LOGICAL, `target_schema_version`). The
coordinator, which reads every schema, makes that migration before the commit and the commit seals it as the
run's next checkpoint in its own transaction (`SqlStore.commit_handoff(checkpoint=...)`): the new owner, on a
placement that reads only the new schema, restores it and never the original. The migrated checkpoint is a NEW
record (seq + 1, parent the original, `migrated_from_hash` and `migration_ref` naming it); the original and its
parts are left as they are. Parts are written before the commit (content-addressed, so a refused commit leaves
only blobs nothing names, and a retry writes the same bytes again).
"""

from __future__ import annotations

from baton.catalog.releases import RELEASES
from baton.checkpoints import restore
from baton.compat import HandoffDecision, MigrationClass
from baton.errors import SchemaMigrationError
from baton.hash_migration import PartRewriter, migrate_forward
from baton.models import ExecutionCheckpoint
from baton.models.checkpoint import CHECKPOINT_SCHEMA_VERSION
from baton.store.blobs import Blobs


def transformed_state(
    checkpoint: ExecutionCheckpoint, decision: HandoffDecision, blobs: Blobs, *, owner_epoch: int
) -> ExecutionCheckpoint | None:
    """The checkpoint the move must commit for `decision`: None for a move that is not LOGICAL, else `checkpoint`
    migrated to the decision's target schema and sealed at `owner_epoch` (verified before it is returned).

    Raises SchemaMigrationError when the decision asks for a schema this Baton cannot migrate to, or a part of the
    state does not survive the migration.
    """
    if decision.migration_class is not MigrationClass.LOGICAL:
        return None
    if decision.target_schema_version != CHECKPOINT_SCHEMA_VERSION:
        raise SchemaMigrationError(f"the move needs checkpoint schema {decision.target_schema_version}; this "
                                   f"Baton migrates to schema {CHECKPOINT_SCHEMA_VERSION} only")
    migrated = migrate_forward(checkpoint, PartRewriter.with_known(blobs, RELEASES.values()), owner_epoch=owner_epoch)
    restore(blobs, migrated, verify_artifact=True)
    return migrated
