"""The reference agents' pure derivations, which a replay re-executes (one per candidate kind).

These are exactly the functions the reference agents call through the SDK (the
scripted models of `baton.agents.scripted_models` and the verifiers of
`baton.agents.verifiers`), so a run the SDK produced replays without knowing
anything about its worker. `baton.replay.replay_run` receives `DERIVERS` from
its caller; it never imports this module.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from baton.agents.scripted_models import BuildInfo, model_for
from baton.agents.verifiers import Verdict, check_deployment_spec, verify_report
from baton.models import BehavioralRelease
from baton.replay_derivers import Deriver, Derivers, Inputs


@dataclass(frozen=True)
class ReportDeriver:
    """Research reports: the release's model drafts from the recorded documents; citations are checked."""

    kind: str = "report"

    def derive(self, release: BehavioralRelease, inputs: Inputs, task: Mapping[str, Any]) -> bytes:
        return model_for(release).draft_report(list(inputs), topic=str(task.get("topic", "findings"))).output

    def verify(self, artifact: bytes, inputs: Inputs, valid_refs: Collection[str]) -> Verdict:
        return verify_report(artifact, valid_refs)


def builds_of(inputs: Inputs) -> list[BuildInfo]:
    """The builds listed by the recorded build-registry observations among `inputs`."""
    builds: list[BuildInfo] = []
    for _observation, content in inputs:
        data = json.loads(content)
        if isinstance(data, list):
            builds += [BuildInfo.model_validate(item) for item in data]
    return builds


@dataclass(frozen=True)
class DeploymentDeriver:
    """Deployment specs: the release's model plans from the recorded build list; the spec is checked."""

    kind: str = "deployment-spec"

    def derive(self, release: BehavioralRelease, inputs: Inputs, task: Mapping[str, Any]) -> bytes:
        return model_for(release).plan_deployment(str(task.get("service", "checkout")), builds_of(inputs)).output

    def verify(self, artifact: bytes, inputs: Inputs, valid_refs: Collection[str]) -> Verdict:
        return check_deployment_spec(artifact, builds_of(inputs))


_ALL: tuple[Deriver, ...] = (ReportDeriver(), DeploymentDeriver())
DERIVERS: Derivers = {deriver.kind: deriver for deriver in _ALL}
"""Candidate kind -> its pure derivation, for the reference agents' kinds."""
