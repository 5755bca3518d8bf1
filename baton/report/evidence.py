"""Experiment results and evidence classes: a figure exists only if a run produced it."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class EvidenceClass(StrEnum):
    """How a statement in the report is known; never blurred."""

    BACKGROUND = "established background"
    SOURCE = "reported by a source"
    LOCAL = "reproduced locally"
    HYPOTHESIS = "hypothesis"
    PROPOSED = "proposed experiment"


class UnrunExperiment(LookupError):
    """A figure was asked of an experiment that did not run (or did not produce it)."""


@dataclass(frozen=True)
class ExperimentResult:
    """What one experiment left: its figures if it ran, or the reason it did not."""

    experiment_id: str
    command: str
    seed: int | None
    ran: bool
    provenance: str
    figures: dict[str, Any] = field(default_factory=dict)
    reason: str = ""

    @classmethod
    def unrun(cls, experiment_id: str, command: str, seed: int | None, reason: str) -> ExperimentResult:
        return cls(experiment_id=experiment_id, command=command, seed=seed, ran=False, provenance="", reason=reason)

    def figure(self, name: str) -> Any:
        """The named figure; raises `UnrunExperiment` rather than invent one."""
        if not self.ran:
            raise UnrunExperiment(f"{self.experiment_id} did not run: {self.reason}")
        if name not in self.figures:
            raise UnrunExperiment(f"{self.experiment_id} ran but produced no figure {name!r}")
        return self.figures[name]

    @property
    def evidence_class(self) -> EvidenceClass:
        return EvidenceClass.LOCAL if self.ran else EvidenceClass.PROPOSED
