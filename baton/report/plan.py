"""The report's inputs, loaded and cross-checked: claims, experiments, sources, limits, opportunities."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from baton.report.claims import Claim, ClaimsError, load_claims
from baton.report.experiments import ExperimentSpec, load_experiments
from baton.report.ledger import Source, load_sources


class Limit(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    what: str
    effect: str


class Opportunity(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    title: str
    method: str
    success: str
    failure: str
    experiment: str | None = None
    claims: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReportPlan:
    claims: tuple[Claim, ...]
    experiments: tuple[ExperimentSpec, ...]
    sources: tuple[Source, ...]
    limits: tuple[Limit, ...]
    opportunities: tuple[Opportunity, ...]

    def experiment(self, experiment_id: str) -> ExperimentSpec:
        return next(spec for spec in self.experiments if spec.id == experiment_id)


def load_plan(folder: Path) -> ReportPlan:
    """Load docs/evidence/*.toml and refuse dangling references."""
    claims = load_claims(folder / "claims.toml")
    experiments = load_experiments(folder / "experiments.toml")
    sources = load_sources(folder / "sources.toml")
    try:
        extra = tomllib.loads((folder / "context.toml").read_text(encoding="utf-8"))
        limits = tuple(Limit.model_validate(item) for item in extra.get("limits", []))
        opportunities = tuple(Opportunity.model_validate(item) for item in extra.get("opportunities", []))
    except (tomllib.TOMLDecodeError, ValidationError) as exc:
        raise ClaimsError(f"{folder / 'context.toml'}: {exc}") from exc
    plan = ReportPlan(claims, experiments, sources, limits, opportunities)
    _check_references(plan)
    return plan


def _check_references(plan: ReportPlan) -> None:
    experiment_ids = {spec.id for spec in plan.experiments}
    source_ids = {source.id for source in plan.sources}
    claim_ids = {claim.id for claim in plan.claims}
    for claim in plan.claims:
        if claim.experiment not in experiment_ids:
            raise ClaimsError(f"claim {claim.id} names unknown experiment {claim.experiment!r}")
        cited = (*claim.sources, *(claim.proposal.citations if claim.proposal else ()))
        unknown = sorted(set(cited) - source_ids - experiment_ids)
        if unknown:
            raise ClaimsError(f"claim {claim.id} cites {unknown}, which are neither ledger sources nor experiments")
        spec = plan.experiment(claim.experiment)
        for check in (*claim.support, *claim.qualify):
            for name in filter(None, (check.figure, check.against)):
                if name not in spec.figures:
                    raise ClaimsError(f"claim {claim.id} checks {name!r}, which {spec.id} does not produce")
    for source in plan.sources:
        unknown = sorted(set(source.bears_on) - claim_ids)
        if unknown:
            raise ClaimsError(f"source {source.id} bears on unknown claims {unknown}")
    for opportunity in plan.opportunities:
        if opportunity.experiment and opportunity.experiment not in experiment_ids:
            raise ClaimsError(f"opportunity {opportunity.id} names unknown experiment {opportunity.experiment!r}")
