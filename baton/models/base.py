"""Shared base for Baton's records: frozen, strict about unknown fields, hashable by content."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict

from baton.identity import canonical_json, parse_ref, ref_of

Ref = Annotated[str, AfterValidator(parse_ref)]
"""A content ref: `sha256:` plus 64 lowercase hex digits."""


class Record(BaseModel):
    """A frozen, validated value whose identity is the hash of its canonical JSON."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)

    def canonical(self) -> bytes:
        """Canonical JSON bytes of this record."""
        return canonical_json(self)

    def record_ref(self) -> str:
        """Content ref of this record's canonical JSON."""
        return ref_of(self)

    @classmethod
    def from_canonical(cls, data: bytes) -> Any:
        """Parse and validate a record from JSON bytes."""
        return cls.model_validate_json(data)
