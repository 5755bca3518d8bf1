"""The simulation's check that a run acted only on state its worker could read, from outside records only.

It reads the targets' view of each mutation (the network's delivery log: who sent it, for which run, at which epoch,
and whether the target accepted it), the workers' own record of the state they restored (`RESTORED_FILE`, written by
the worker as it restores, `baton.runtime.restore_record`) and the operator's record of which checkpoint schemas each
placement's workers read (`SCHEMAS_FILE`, with its later catalog changes, `catalog_faults.OPERATOR_FILE`). It never
reads Baton's store. It is the live matrix's `unfit_placement` for the state restored (`baton.faults.oracles`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from baton.sim.catalog_faults import OPERATOR_FILE
from baton.sim.legacy_import import RESTORED_FILE, SCHEMAS_FILE
from baton.sim.world import SimRecords


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def schemas_read(root: Path) -> dict[str, set[str]]:
    """placement -> every checkpoint schema the operator's records say its workers read (its inventory, and any
    schema a later catalog change gave it: a change never takes a schema this check needs away without the record)."""
    path = root / SCHEMAS_FILE
    read = {name: set(map(str, versions)) for name, versions in json.loads(path.read_text()).items()} \
        if path.exists() else {}
    for line in _lines(root / OPERATOR_FILE):
        facts = line.get("facts") or {}
        if "readable_schema_versions" in facts and line.get("placement") in read:
            read[str(line["placement"])] |= set(map(str, facts["readable_schema_versions"]))
    return read


def acted_on_readable_state(records: SimRecords) -> list[str]:
    """No target accepted a mutation of a run from a placement at an epoch at which the worker there restored the
    run's state at a checkpoint schema the operator's record says that placement's workers do not read."""
    from baton.sim.oracles import MUTATION_PATHS  # oracles lists this check: imported when it runs

    read = schemas_read(records.root)
    if not read:
        return []
    restored = {(r.get("run_id"), r.get("placement"), r.get("epoch")): r.get("checkpoint") or {}
                for r in _lines(records.root / RESTORED_FILE)}
    found = []
    for message in records.network.messages:
        if message.method != "POST" or message.path != MUTATION_PATHS.get(message.target) or message.epoch is None:
            continue
        if not any(d[1] in (200, 201) for d in message.deliveries):
            continue
        placement = records.senders.get(message.sender)
        state = restored.get((message.run_id, placement, message.epoch))
        if placement not in read or state is None:
            continue
        schema = str(state.get("schema_version"))
        if schema not in read[placement]:
            found.append(f"unfit_placement: {message.target} accepted message {message.seq} of {message.run_id} from "
                         f"{placement} (epoch {message.epoch}), whose worker restored checkpoint "
                         f"{str(state.get('checkpoint_hash'))[:19]}... at state_schema {schema}; the operator's "
                         f"record says {placement}'s workers read only {sorted(read[placement])}")
    return found


ORACLES = (("sec. 27 the run acted only on state its placement reads", acted_on_readable_state),)
