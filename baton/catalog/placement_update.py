"""A change to one placement: which fields move, applied as a pure function.

Region and provider are both placement fields and parts of the environment
identity, so they change together; so do the runtime image and tool versions,
which only the environment identity holds. What a placement can host (the
checkpoint schema versions its workers read, the verifier bundles and tool
contracts installed there) is replaced whole when given. The placement name
never changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field, field_validator

from baton.models import AuthorityLevel, Placement
from baton.models.base import Record


_HOSTED = ("readable_schema_versions", "verifiers", "tools")
"""What a placement can host, each replaced whole by an update that names it."""


class PlacementUpdate(Record):
    """The fields to set on a placement; None leaves a field as it is."""

    region: str | None = Field(default=None, min_length=1)
    provider: str | None = Field(default=None, min_length=1)
    runtime_image: str | None = Field(default=None, min_length=1)
    tool_versions: dict[str, str] | None = Field(
        default=None, description="merged into the current tool versions (an entry per tool to set)"
    )
    authority_ceiling: AuthorityLevel | None = None
    accelerator: str | None = Field(default=None, min_length=1)
    readable_schema_versions: tuple[str, ...] | None = Field(
        default=None, description="the checkpoint schema versions its workers can read (replaces the list)"
    )
    verifiers: tuple[str, ...] | None = Field(
        default=None, description="the verifier bundles installed there (replaces the list)"
    )
    tools: tuple[str, ...] | None = Field(default=None, description="the tool contracts installed there (replaces the list)")

    @field_validator("readable_schema_versions", "verifiers", "tools")
    @classmethod
    def _named(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is not None and any(not item.strip() for item in value):
            raise ValueError("every entry must be a non-empty name")
        if value is not None and len(set(value)) != len(value):
            raise ValueError(f"duplicate entries in {list(value)}")
        return value

    @property
    def is_empty(self) -> bool:
        return all(value is None for value in self.model_dump().values())

    def apply(self, placement: Placement) -> Placement:
        """`placement` with these fields set (validated as a new record)."""
        environment = placement.environment.model_dump()
        record = placement.model_dump()
        for key in ("region", "provider"):
            value = getattr(self, key)
            if value is not None:
                record[key] = environment[key] = value
        if self.runtime_image is not None:
            environment["runtime_image"] = self.runtime_image
        if self.tool_versions is not None:
            environment["tool_versions"] = {**environment["tool_versions"], **self.tool_versions}
        if self.authority_ceiling is not None:
            record["authority_ceiling"] = self.authority_ceiling
        if self.accelerator is not None:
            record["accelerator"] = self.accelerator
        for key in _HOSTED:
            value = getattr(self, key)
            if value is not None:
                record[key] = value
        record["environment"] = environment
        return Placement.model_validate(record)


def field_changes(before: Placement, after: Placement) -> dict[str, Any]:
    """`{field: [before, after]}` for each placement or environment field that differs (JSON values)."""
    old, new = before.model_dump(mode="json"), after.model_dump(mode="json")
    changes: dict[str, Any] = {}
    for key in sorted(set(old) | set(new)):
        if key == "environment":
            continue
        if old.get(key) != new.get(key):
            changes[key] = [old.get(key), new.get(key)]
    old_env: Mapping[str, Any] = old["environment"]
    new_env: Mapping[str, Any] = new["environment"]
    for key in sorted(set(old_env) | set(new_env)):
        if old_env.get(key) != new_env.get(key):
            changes[f"environment.{key}"] = [old_env.get(key), new_env.get(key)]
    return changes
