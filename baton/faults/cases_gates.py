"""Fault cases for the compatibility gate's hosting checks: the target placement stops being able to host the run.

Each case kills the worker after VERIFIED is checkpointed, then the operator
changes the target placement through the catalog call `baton placement update`
makes (one event in Baton's log, and the operator's own record first): its
workers can no longer read the state schema the run's checkpoints are
written in, or it no longer hosts the verifier bundle or the tool contract of
the run's release. The run is then moved there. The gate must refuse the move;
the oracle (`unfit_placement`) reads the targets' presented-capability logs
against the operator's record and the run's needs as its owner declared them
(`run-needs.json`, written from the release manifest before the run starts).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from baton.catalog.releases import RELEASES
from baton.faults.oracles import RUN_NEEDS_FILE
from baton.faults.case_steps import kill_at, move_or_stay
from baton.faults.rig import Rig
from baton.models.checkpoint import CHECKPOINT_SCHEMA_VERSION
from baton.placements import DEFAULT_PLACEMENTS

if TYPE_CHECKING:
    from baton.faults.cases import CaseRun

SOURCE = "local-gpu-eu"
TARGET = "cloud-eu"
"""Runs model-v7 like the source: only the hosting fact the case changes stands between the run and it."""
RELEASE = RELEASES["model-v7"]
_HOSTED = {p.name: p for p in DEFAULT_PLACEMENTS}[TARGET]

OLD_SCHEMAS_ONLY = [v for v in _HOSTED.readable_schema_versions if v != CHECKPOINT_SCHEMA_VERSION] or ["1", "2"]
"""The target rolled back to an image whose workers read only older checkpoint schemas."""
WITHOUT_VERIFIER = ["citations-1"]
"""The target lost the deploy checker (and with it the release's bundle): only the citation verifier is left."""
WITHOUT_TOOLS = [t for t in _HOSTED.tools if t != RELEASE.tool_contract]
"""The target's tool contract of the run's release was uninstalled (the plain clients stay)."""


def write_needs(rig: Rig) -> None:
    """The run's owner declares what the run needs wherever it runs (from its release manifest)."""
    needs = {"state_schema": CHECKPOINT_SCHEMA_VERSION, "verifier_bundle": RELEASE.verifier_bundle,
             "tool_contract": RELEASE.tool_contract}
    (rig.root / RUN_NEEDS_FILE).write_text(json.dumps(needs, sort_keys=True))


def _target_loses(why: str, **facts: Any) -> Callable[[CaseRun, Rig, list[str]], None]:
    def script(run: CaseRun, rig: Rig, notes: list[str]) -> None:
        write_needs(rig)
        run.worker(SOURCE, point="sealed:VERIFIED")
        run.launch()
        kill_at(run, rig, notes, "sealed:VERIFIED")
        notes.append(run.change_placement(TARGET, **facts))
        run.wait_lease_lapsed()
        move_or_stay(run, notes, TARGET, why)

    script.__doc__ = f"After VERIFIED the worker dies; {why}; the run is moved there."
    return script


placement_lost_schema = _target_loses("the target's workers cannot read the run's state schema",
                                      readable_schema_versions=OLD_SCHEMAS_ONLY)
placement_lost_verifier = _target_loses("the target no longer hosts the release's verifier bundle",
                                        verifiers=WITHOUT_VERIFIER)
placement_lost_tools = _target_loses("the target no longer hosts the release's tool contract", tools=WITHOUT_TOOLS)


LOWERED_CEILING = "SANDBOX_MUTATE"


def placement_ceiling_lowered(run: CaseRun, rig: Rig, notes: list[str]) -> None:
    """After VERIFIED the worker dies; the operator lowers the target placement's authority ceiling below what a
    deployment needs, while that placement's worker is already up (Baton's fleet keeps standing workers); the run
    is moved there. The move may go ahead, downgraded: the run must not deploy from there."""
    if run.strategy == "baton":
        run.worker(TARGET)  # standing, idle: nothing is reserved for it yet
    run.worker(SOURCE, point="sealed:VERIFIED")
    run.launch()
    kill_at(run, rig, notes, "sealed:VERIFIED")
    notes.append(run.change_placement(TARGET, authority_ceiling=LOWERED_CEILING))
    run.wait_lease_lapsed()
    move_or_stay(run, notes, TARGET)
