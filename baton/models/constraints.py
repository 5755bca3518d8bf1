"""Portability constraints: where a checkpoint may go at all."""

from __future__ import annotations

from pydantic import field_validator

from baton.models.base import Record


class PortabilityConstraints(Record):
    """Allowed regions and providers (empty = anywhere), attestation and non-exportable state."""

    portable_to_regions: tuple[str, ...] = ()
    portable_to_providers: tuple[str, ...] = ()
    requires_hardware_attestation: bool = False
    contains_non_exportable_state: bool = False
    data_scope: str | None = None

    @field_validator("portable_to_regions", "portable_to_providers")
    @classmethod
    def _sorted_unique(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(sorted(set(value)))

    def allows_region(self, region: str) -> bool:
        return not self.portable_to_regions or region in self.portable_to_regions

    def allows_provider(self, provider: str) -> bool:
        return not self.portable_to_providers or provider in self.portable_to_providers
