"""The interface a replay re-derives through; the runtime supplies the implementations.

A candidate kind is replayable when its artifact can be re-derived from the
recorded observations by a deterministic function of the behavioral release,
and its evidence by a deterministic verifier. Which functions those are is the
runtime's business (the reference agents' are in `baton.agents.derivers`):
`baton.replay.replay_run` takes them as a mapping from candidate kind to
`Deriver`, so the replay itself knows no agent.

Inputs come from the run state the SDK keeps: the task (`memory["task"]`,
e.g. the report topic or the service to deploy) and, per candidate, the refs
of the observations it was built from (`memory["baton.candidate_inputs"]`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Protocol

from baton.models import BehavioralRelease, Observation
from baton.models.evidence import VerdictLike

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

    def verify(self, artifact: bytes, inputs: Inputs, valid_refs: Collection[str]) -> VerdictLike:
        """The verifier's verdict on `artifact`, given the run's inputs and the observation refs valid then."""
        ...


Derivers = Mapping[str, Deriver]
"""Candidate kind -> its pure derivation. Kinds not listed are replayed as recorded."""
