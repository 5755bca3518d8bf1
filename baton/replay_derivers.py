"""The pure functions a replay re-executes, one per candidate kind.

A candidate kind is replayable when the artifact can be re-derived from the
recorded observations by a deterministic function of the behavioral release
(the scripted models of `baton.agents.scripted_models`), and its evidence by a
deterministic verifier (`baton.agents.verifiers`). Those are exactly the
functions the reference agents call through the SDK, so a run the SDK
produced replays without knowing anything about its worker.

Inputs come from the run state the SDK keeps: the task (`memory["task"]`,
e.g. the report topic or the service to deploy) and, per candidate, the refs
of the observations it was built from (`memory["baton.candidate_inputs"]`).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from baton.agents.scripted_models import BuildInfo, model_for
from baton.agents.verifiers import Verdict, check_deployment_spec, verify_report
from baton.models import BehavioralRelease, Observation

TASK_KEY = "task"
CANDIDATE_INPUTS_KEY = "baton.candidate_inputs"
DROPPED_KEY = "baton.dropped_observations"
"""Keys of the SDK's run memory that a replay reads (the values of `baton.runtime.memory_keys`)."""

Inputs = Sequence[tuple[Observation, bytes]]


class Deriver(Protocol):
    """Re-derives one kind of candidate and re-runs its verifier."""

    @property
    def kind(self) -> str:
        """The candidate kind it re-derives (`Candidate.kind`)."""
        ...

    def derive(self, release: BehavioralRelease, inputs: Inputs, task: Mapping[str, Any]) -> bytes:
        """The artifact `release` produces from `inputs` (KeyError when no model implements the release)."""
        ...

    def verify(self, artifact: bytes, inputs: Inputs, valid_refs: Collection[str]) -> Verdict:
        """The verifier's verdict on `artifact`, given the run's inputs and the observation refs valid then."""
        ...


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
DERIVERS: Mapping[str, Deriver] = {deriver.kind: deriver for deriver in _ALL}
"""Candidate kind -> its pure derivation. Kinds not listed are replayed as recorded."""
