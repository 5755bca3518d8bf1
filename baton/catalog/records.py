"""Rows of the release catalog as frozen records."""

from __future__ import annotations

import datetime as dt
import re
from enum import StrEnum
from typing import NamedTuple

from pydantic import Field

from baton.models.base import Record, Ref
from baton.models.release import BehavioralRelease


RELEASE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,99}")
"""What a release's catalog name may look like."""


class ReleaseState(StrEnum):
    """A published release is offered by the placements that list it; a withdrawn one by none."""

    PUBLISHED = "published"
    WITHDRAWN = "withdrawn"


class CatalogRelease(Record):
    """One behavioral release in the catalog: its manifest, state, and the placements that list it."""

    release_id: Ref
    name: str = Field(pattern="^" + RELEASE_NAME.pattern + "$")
    manifest: BehavioralRelease
    state: ReleaseState
    listed_by: tuple[str, ...] = Field(description="placements whose record lists this release, by name")
    changed_seq: int = Field(ge=1, description="seq of the event that last changed this release")
    updated_at: dt.datetime

    @property
    def published(self) -> bool:
        return self.state is ReleaseState.PUBLISHED

    @property
    def offered_by(self) -> tuple[str, ...]:
        """Placements that offer the release now: those that list it, while it is published."""
        return self.listed_by if self.published else ()


class ReleasePublication(NamedTuple):
    """One read of the store: its clock, and when the catalog last published a release (see
    `CatalogSql.release_publication`)."""

    now: dt.datetime
    catalog_seeded: bool
    """Whether the catalog holds any release; a store never seeded runs on the built-in releases."""
    published_at: dt.datetime | None
    """When the release's row last changed while it is published now; None if it is withdrawn or absent."""
