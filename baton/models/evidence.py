"""Verifier evidence, valid only for the exact artifact hash it verified."""

from __future__ import annotations

import datetime as dt
from enum import StrEnum
from typing import Protocol

from pydantic import Field, JsonValue

from baton.ablation import Ablation, is_ablated
from baton.models.base import Record, Ref


class VerdictResult(StrEnum):
    PASS = "PASS"
    FAIL = "FAIL"
    ERROR = "ERROR"


class VerdictLike(Protocol):
    """What a verifier returns (e.g. `baton.agents.verifiers.Verdict`): the SDK and replay read only this."""

    @property
    def result(self) -> VerdictResult: ...

    @property
    def detail(self) -> str: ...

    @property
    def verifier_version(self) -> str: ...


class VerifierEvidence(Record):
    """Candidate hash, workspace snapshot, verifier version, inputs and result."""

    candidate_hash: Ref
    workspace_snapshot: Ref | None = None
    verifier_version: str = Field(min_length=1)
    inputs: dict[str, JsonValue] = Field(default_factory=dict)
    result: VerdictResult
    detail: str = ""
    verified_at: dt.datetime

    def applies_to(self, artifact_hash: str) -> bool:
        """Evidence binds to one exact hash; similar artifacts do not inherit it."""
        return self.candidate_hash == artifact_hash or is_ablated(Ablation.EVIDENCE_BINDING)

    @property
    def passed(self) -> bool:
        return self.result is VerdictResult.PASS


class EvidenceManifest(Record):
    """All verifier evidence a run holds, by ref."""

    evidence_refs: tuple[Ref, ...] = ()


class CandidateManifest(Record):
    """All candidates a run has proposed, by ref, the current one last."""

    candidate_refs: tuple[Ref, ...] = ()
