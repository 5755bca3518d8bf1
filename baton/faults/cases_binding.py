"""A fault case for evidence binding: a re-planned candidate that reaches VERIFIED without being verified.

`replanned-after-verify`: the deployment spec (1.4.2) is verified and
checkpointed at VERIFIED; the worker dies there, its lease held. Before the
run moves, a second writer holding the run's epoch (the case, through
`baton.faults.replan_side`) seals one more VERIFIED checkpoint whose current
candidate is a re-planned spec: 1.5.0, the newest stable build, whose canary
failed. Its evidence is the first spec's passing verdict, bound to the first
spec's hash. The run is moved. A resume that holds evidence to its exact hash
drops it, rewinds to CANDIDATE_READY and verifies the new spec (which fails;
the agent plans again and deploys a verified build). Without that binding the
old verdict counts for the new spec: the SDK asks for approval, the approver
(same check) signs, and 1.5.0 is deployed, verified by nobody.

Why a second writer: the SDK never seals such a checkpoint (`propose` always
seals CANDIDATE_READY, and `verify` at CANDIDATE_READY always runs the check),
so no agent of the repository produces this state by itself; a worker killed
right after a re-planned candidate is sealed resumes at CANDIDATE_READY and
verifies it whether binding is on or off. The state comes from outside the
SDK, sealed with a good hash, chain and epoch, so only the binding notices.

A second layer stands against it on this move: local-gpu-eu and cloud-eu run
different runtime images, so the gate raises `runtime_changed` and the decision
demands reverification, which drops every evidence whatever it binds (run:
`--ablate evidence-binding` alone, clean). `BINDING_COMPANIONS` switches it
off with the binding, and the binding off with it.

The oracle `unverified_effect` reads the deploy service's effect log and the
deploy verifier's own record of its verdicts (`targets/verifier/verdicts.jsonl`,
written by `baton.agents.verifiers.check_deployment_spec` for every strategy).
The transcript controls meet the same fault: a re-planned spec appended as the
assistant's last word of a transcript at VERIFIED.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from baton.agents.deploy_agent import build_catalog
from baton.faults.case_steps import kill_at
from baton.faults.rig import Rig
from baton.identity import canonical_json

if TYPE_CHECKING:
    from baton.faults.cases import CaseRun

SOURCE = "local-gpu-eu"
SAME_RELEASE = "cloud-eu"
REPLANNED_VERSION = "1.5.0"
BINDING_COMPANIONS = {"evidence-binding": ("gate:runtime_changed",), "gate:runtime_changed": ("evidence-binding",)}
"""The two layers that make the moved run verify again: the resume drops evidence not bound to the current candidate
(`evidence-binding`), and the gate demands reverification of all evidence when the move changes the runtime image or
tool versions, as local-gpu-eu -> cloud-eu does (`gate:runtime_changed`). Each alone holds; ablating one switches the
other off with it."""


def replanned_spec(service: str = "checkout", version: str = REPLANNED_VERSION) -> bytes:
    """The re-planned deployment spec (canonical JSON, the deploy service's request body): `version` of `service`."""
    build = next(b for b in build_catalog(service) if b.version == version)
    return canonical_json({"service": service, "version": build.version, "artifact_hash": build.artifact_hash,
                           "strategy": "rolling"})


def replanned_after_verify(run: CaseRun, rig: Rig, notes: list[str]) -> None:
    """Verified and checkpointed, then the worker dies; a second writer at its epoch seals VERIFIED over a re-planned
    spec nothing verified; the run moves."""
    run.worker(SOURCE, point="sealed:VERIFIED")
    run.launch()
    kill_at(run, rig, notes, "sealed:VERIFIED")
    notes.append(run.replan_unverified(replanned_spec(), f"{REPLANNED_VERSION} (rolling), re-planned after VERIFIED"))
    run.wait_lease_lapsed()
    notes.append(run.hand_off(SAME_RELEASE))
    notes.append(f"ended {run.wait_end()}")
