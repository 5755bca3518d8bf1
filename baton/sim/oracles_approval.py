"""The simulation's check that every deployment landed under an approval in force, from outside records only.

It reads two records Baton's store does not hold: the approver's own record of each approval it granted
(`baton.sim.approver.APPROVER_FILE`: when, for which run, operation and artifact, until when) and the deploy service's
own `deployments.jsonl` (each deployment it applied, at its clock). It is the live matrix's `expired_approval`
(`baton.faults.oracles`) for a world of several runs: a deployment counts only the approvals granted for its run.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from baton.sim.world import SimRecords

APPROVER_FILE = "approver/approvals.jsonl"  # as baton.sim.approver writes it (not imported: the oracle keeps its own)
DEPLOYMENTS_FILE = "deploy/deployments.jsonl"


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def _when(text: object) -> dt.datetime:
    return dt.datetime.fromisoformat(str(text).replace("Z", "+00:00"))


def deployed_under_an_approval(records: SimRecords) -> list[str]:
    """No deployment of a run was applied (the deploy service's record, its clock) outside every deploy approval the
    approver granted that run (its record): granted at or before the deployment, expiring after it. A world whose
    approver granted nothing (a control's: it has no approver) is not judged."""
    approver = records.root / APPROVER_FILE
    if not approver.exists():
        return []
    granted = [a for a in _lines(approver) if a.get("operation") == "deploy"]
    found = []
    for effect in _lines(records.root / DEPLOYMENTS_FILE):
        run_id, at = effect.get("run_id"), _when(effect.get("at"))
        own = [a for a in granted if a.get("run_id") == run_id]
        if run_id not in records.run_ids or any(_when(a["at"]) <= at < _when(a["expires_at"]) for a in own):
            continue
        found.append(f"expired_approval: deploy applied seq {effect.get('seq')} of {run_id} at {effect.get('at')}; "
                     f"the approver granted {len(own)} deploy approval(s) for the run, expiring at "
                     f"{[str(a.get('expires_at')) for a in own]}")
    return found


ORACLES = (("sec. 27 no deployment without an approval in force", deployed_under_an_approval),)
