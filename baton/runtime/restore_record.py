"""A worker's own record of the state it restored, for whoever started it (the fault matrix's oracles read it).

`BATON_RESTORE_RECORD` names a JSON Lines file; after each restore the worker appends the checkpoint it restored
(its whole sealed body), its placement and epoch, fsynced before it goes on. The process's starter sets the
variable, as it names the worker's origin placement (`baton.targets.http_server.ORIGIN_ENV`); without it
nothing is written.
"""

from __future__ import annotations

import os
from pathlib import Path

from baton.durable_files import append_line, utc_now_text
from baton.handoff.resume import ResumePlan
from baton.identity import plain_value

RESTORE_RECORD_ENV = "BATON_RESTORE_RECORD"


def record_restore(plan: ResumePlan) -> None:
    """Append what `plan` restored to the file `BATON_RESTORE_RECORD` names (no variable, no record)."""
    path = os.environ.get(RESTORE_RECORD_ENV)
    if not path:
        return
    append_line(Path(path), {"at": utc_now_text(), "run_id": plan.run_id, "placement": plan.placement.name,
                             "epoch": plan.epoch, "checkpoint": plain_value(plan.checkpoint)})
