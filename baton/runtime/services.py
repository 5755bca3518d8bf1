"""What a worker lends to every run it executes: stores, gateway, authority, approver, tools.

A `RunContext` reaches the outside world only through these. Agents never see
them directly; they see the SDK and, for reads, the named tools.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from baton.authority import AuthorityService
from baton.authority_http import AuthorityClient, LocalAuthorityClient
from baton.gateway import MutationGateway, MutationTarget
from baton.history import HistorySink
from baton.models import AuthorityLevel, BehavioralRelease, Placement
from baton.reconcile import Reconciler, RetryPolicy
from baton.runtime.approvals import Approver, PolicyApprover
from baton.store.base import SqlStore
from baton.store.blobs import Blobs


@dataclass
class RuntimeServices:
    """Shared by every run on one worker (all members are safe to use from several threads)."""

    store: SqlStore
    blobs: Blobs
    authority: AuthorityService | AuthorityClient
    """The authority service: in this process (tests, simulation) or a client of the live one (workers)."""
    gateway: MutationGateway
    targets: Mapping[str, MutationTarget]
    releases: Mapping[str, BehavioralRelease]
    tools: Mapping[str, Any] = field(default_factory=dict)
    approver: Approver = field(default_factory=PolicyApprover)
    retry_policy: RetryPolicy = field(default_factory=lambda: RetryPolicy(allow_retry=True, lookup_attempts=3, lookup_interval_s=0.2))
    history: HistorySink | None = None
    boundary_pause_s: float = 0.0
    stopping: threading.Event = field(default_factory=threading.Event)

    def capability_client(self, placement: Placement) -> AuthorityClient:
        """How this run asks for capabilities: the live service's client, or the in-process service."""
        if isinstance(self.authority, AuthorityService):
            return LocalAuthorityClient(self.authority, self.store, {placement.name: placement})
        return self.authority

    @property
    def approval_required_from(self) -> AuthorityLevel:
        """The level from which a capability needs an approval bound to the artifact."""
        return getattr(self.authority, "approval_required_from", AuthorityLevel.EXTERNAL_MUTATE)

    def reconciler(self, process: str) -> Reconciler:
        """A reconciler that records its calls under `process` in the history."""
        return Reconciler(self.store, self.targets, policy=self.retry_policy, history=self.history, process=process)

    def release(self, release_id: str) -> BehavioralRelease:
        """The release record for an id; KeyError when this worker does not know it."""
        try:
            return self.releases[release_id]
        except KeyError:
            raise KeyError(f"release {release_id} is not in this worker's catalog") from None
