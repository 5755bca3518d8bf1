"""Placements: where a run can execute, and what each can do."""

from __future__ import annotations

from pydantic import Field

from baton.models.authority import AuthorityLevel
from baton.models.base import Record, Ref
from baton.models.environment import EnvironmentIdentity


class Placement(Record):
    """A pool of workers with one environment and one set of capabilities."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    region: str
    provider: str
    accelerator: str = "none"
    authority_ceiling: AuthorityLevel
    supported_release_ids: tuple[Ref, ...] = ()
    readable_schema_versions: tuple[str, ...] = ()
    data_scopes: tuple[str, ...] = ()
    verifiers: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    hardware_attested: bool = False
    environment: EnvironmentIdentity

    @property
    def placement_ref(self) -> str:
        return self.record_ref()
