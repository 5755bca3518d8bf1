"""Observations: what a run actually saw, identified by content, with freshness."""

from __future__ import annotations

import datetime as dt
from enum import StrEnum

from pydantic import Field, JsonValue

from baton.ablation import Ablation, is_ablated
from baton.models.base import Record, Ref


class UseMode(StrEnum):
    """How a resumed run may use a recorded observation."""

    USE_RECORDED_OBSERVATION = "USE_RECORDED_OBSERVATION"
    REVALIDATE_LIVE_STATE = "REVALIDATE_LIVE_STATE"
    REFRESH_STALE_OBSERVATION = "REFRESH_STALE_OBSERVATION"


class SourceAuthority(StrEnum):
    """How much the source of an observation is to be trusted as the truth of record."""

    AUTHORITATIVE = "AUTHORITATIVE"
    SECONDARY = "SECONDARY"
    UNVERIFIED = "UNVERIFIED"


class Observation(Record):
    """One observation: source, query, time, content hash, freshness budget and authority."""

    source: str = Field(min_length=1)
    query: dict[str, JsonValue] = Field(default_factory=dict)
    observed_at: dt.datetime
    content_ref: Ref
    freshness_budget_s: float = Field(ge=0)
    authority: SourceAuthority = SourceAuthority.AUTHORITATIVE
    interpretation_refs: tuple[Ref, ...] = ()

    @property
    def expires_at(self) -> dt.datetime:
        return self.observed_at + dt.timedelta(seconds=self.freshness_budget_s)

    def is_fresh(self, now: dt.datetime) -> bool:
        """True while `now` is within the freshness budget."""
        return now <= self.expires_at or is_ablated(Ablation.FRESHNESS)

    def required_use_mode(self, now: dt.datetime, *, environment_changed: bool) -> UseMode:
        """The use mode a resumed run must apply to this observation at `now`."""
        if not self.is_fresh(now):
            return UseMode.REFRESH_STALE_OBSERVATION
        if environment_changed:
            return UseMode.REVALIDATE_LIVE_STATE
        return UseMode.USE_RECORDED_OBSERVATION


class ObservationSegment(Record):
    """One link of a hash-linked observation log.

    A checkpoint points at the newest segment; each segment names its
    predecessor, so sealing a checkpoint writes only the observations added
    since the parent, never the whole log again.
    """

    previous: Ref | None = None
    observation_refs: tuple[Ref, ...] = ()
    total: int = Field(ge=0)
