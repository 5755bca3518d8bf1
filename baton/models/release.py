"""Behavioral release: every component that produces behavior, pinned together."""

from __future__ import annotations

from baton.models.base import Record


class BehavioralRelease(Record):
    """Model, prompt bundle, router policy, tool contract, memory schema and verifier bundle.

    Its id is the hash of the manifest, so two releases differ exactly when a
    behavior-producing component differs.
    """

    model: str
    prompt_bundle: str
    router_policy: str
    tool_contract: str
    memory_schema: str
    verifier_bundle: str

    @property
    def release_id(self) -> str:
        return self.record_ref()
