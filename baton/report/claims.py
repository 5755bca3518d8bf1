"""The claim audit: the chapter's testable claims, each tied to an experiment and checks over its figures."""

from __future__ import annotations

import operator
import tomllib
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from baton.report.evidence import ExperimentResult, UnrunExperiment

_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}


class Verdict(StrEnum):
    SUPPORTING = "supporting"
    QUALIFYING = "qualifying"
    CONTRADICTING = "contradicting"
    UNRESOLVED = "unresolved"


class Check(BaseModel):
    """`figure op value` over one experiment's figures; `against` names a second figure instead of a value."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    figure: str
    op: Literal["==", "!=", "<", "<=", ">", ">="]
    value: float | int | None = None
    against: str | None = None
    scale: float = 1.0

    def describe(self) -> str:
        right = f"{self.scale:g} x {self.against}" if self.against and self.scale != 1 else (self.against or f"{self.value:g}")
        return f"{self.figure} {self.op} {right}"

    def holds(self, result: ExperimentResult) -> bool:
        left = result.figure(self.figure)
        right = result.figure(self.against) * self.scale if self.against else self.value
        if right is None:
            raise ValueError(f"check on {self.figure} has neither value nor against")
        return _OPS[self.op](left, right)


class Proposal(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str
    reason: str
    citations: tuple[str, ...] = ()


class Claim(BaseModel):
    """One testable claim: where it appears, how it is tested, and what we would propose."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    claim: str
    where: str
    experiment: str
    support: tuple[Check, ...]
    qualify: tuple[Check, ...] = ()
    qualification: str = ""
    concern: str
    priority: Literal["high", "medium", "low"]
    response: str
    sources: tuple[str, ...] = ()
    proposal: Proposal | None = None


class ClaimFinding(BaseModel):
    model_config = ConfigDict(frozen=True)

    claim: Claim
    verdict: Verdict
    measured: tuple[str, ...]
    explanation: str


class ClaimsError(ValueError):
    """The claims file is malformed or refers to an unknown experiment or source."""


def parse_claims(text: str, *, origin: str = "claims") -> tuple[Claim, ...]:
    try:
        raw = tomllib.loads(text).get("claims", [])
        return tuple(Claim.model_validate(entry) for entry in raw)
    except tomllib.TOMLDecodeError as exc:
        raise ClaimsError(f"{origin}: not valid TOML: {exc}") from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ClaimsError(f"{origin}: {first['msg']} at {'.'.join(map(str, first['loc']))}") from exc


def load_claims(path: Path) -> tuple[Claim, ...]:
    return parse_claims(path.read_text(encoding="utf-8"), origin=str(path))


def judge(claim: Claim, result: ExperimentResult) -> ClaimFinding:
    """Judge one claim on its experiment's figures; UNRUN experiments leave it unresolved."""
    try:
        measured = tuple(_measured(check, result) for check in (*claim.support, *claim.qualify))
        supported = all(check.holds(result) for check in claim.support)
        qualified = any(check.holds(result) for check in claim.qualify)
    except UnrunExperiment as exc:
        return ClaimFinding(claim=claim, verdict=Verdict.UNRESOLVED, measured=(), explanation=f"UNRUN: {exc}")
    if not supported:
        failed = [check.describe() for check in claim.support if not check.holds(result)]
        return ClaimFinding(claim=claim, verdict=Verdict.CONTRADICTING, measured=measured,
                            explanation="does not hold: " + "; ".join(failed))
    if qualified:
        return ClaimFinding(claim=claim, verdict=Verdict.QUALIFYING, measured=measured,
                            explanation=claim.qualification or "holds, with the qualifying figures shown")
    return ClaimFinding(claim=claim, verdict=Verdict.SUPPORTING, measured=measured,
                        explanation="holds: " + "; ".join(check.describe() for check in claim.support))


def _measured(check: Check, result: ExperimentResult) -> str:
    text = f"{check.figure} = {_fmt(result.figure(check.figure))}"
    if check.against:
        text += f", {check.against} = {_fmt(result.figure(check.against))}"
    return text


def _fmt(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)
