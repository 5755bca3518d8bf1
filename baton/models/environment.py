"""Environment identity: where and with what a run executes."""

from __future__ import annotations

from pydantic import Field

from baton.models.base import Record


class EnvironmentIdentity(Record):
    """Placement, region, provider, runtime image and tool versions; id = hash of the record."""

    placement: str
    region: str
    provider: str
    runtime_image: str
    tool_versions: dict[str, str] = Field(default_factory=dict)

    @property
    def environment_id(self) -> str:
        return self.record_ref()
