"""A worker's authority client that asks once per scope and signs each key-bound capability itself.

`DelegatingAuthorityClient` wraps the client of the authority service (HTTP
or in-process). For a request bound to an idempotency key it asks the
service for a grant (`baton.authority_grants`) the first time it sees that
scope (run, epoch, owner, operation, artifact, level, placement, authority
context), then signs one token per key under it, with no round trip. It asks
again when the grant is used up, or within `refresh_margin_s` of its expiry
(which the service capped at the lease's and the approval's). Requests with
no key, or with their own lifetime, go to the service as before. The grant
keys live in this object only: never in a checkpoint, a file or a log.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable
from dataclasses import dataclass

from baton import clock
from baton.authority import Capability
from baton.authority_grants import Delegate
from baton.authority_http import AuthorityClient, CapabilityRequest
from baton.authority_keys import TrustedKeys
from baton.models.authority import AuthorityLevel

DEFAULT_USES = 1000
DEFAULT_REFRESH_MARGIN_S = 2.0
_MAX_SCOPES = 64


@dataclass
class _Held:
    grant: Capability
    delegate: Delegate
    used: int = 0


class DelegatingAuthorityClient:
    """An `AuthorityClient`: one grant request per scope, then a locally signed capability per idempotency key."""

    def __init__(
        self,
        inner: AuthorityClient,
        *,
        uses: int = DEFAULT_USES,
        refresh_margin_s: float = DEFAULT_REFRESH_MARGIN_S,
        now: Callable[[], dt.datetime] = clock.now,
    ) -> None:
        if uses < 1:
            raise ValueError(f"a grant needs at least one use, not {uses}")
        if refresh_margin_s < 0:
            raise ValueError(f"the refresh margin is never negative, not {refresh_margin_s}")
        self._inner = inner
        self.uses = uses
        self._margin = dt.timedelta(seconds=refresh_margin_s)
        self._now = now
        self._held: dict[str, _Held] = {}
        self._lock = threading.Lock()
        self.grants_requested = 0
        """How many grants this client asked the service for (what the benchmark reports)."""

    @property
    def approval_required_from(self) -> AuthorityLevel:
        return getattr(self._inner, "approval_required_from", AuthorityLevel.EXTERNAL_MUTATE)

    def trusted_keys(self) -> TrustedKeys:
        return self._inner.trusted_keys()

    def request(self, ask: CapabilityRequest) -> Capability:
        """A capability for `ask`: signed here under a grant when bound to a key, else the service's own."""
        key = ask.idempotency_key
        if key is None or ask.ttl_s is not None or ask.delegate_key is not None:
            return self._inner.request(ask)
        held, use = self._take(ask.model_copy(update={"idempotency_key": None}))
        claims = held.grant.claims
        minted = held.delegate.mint(held.grant.token, idempotency_key=key, use=use,
                                    expires_at=claims.expires_at.timestamp())
        return Capability(token=minted.token, claims=claims.model_copy(update={
            "capability_id": minted.jti, "idempotency_key": key, "delegate_key": None, "grant_id": claims.capability_id,
            "issued_at": dt.datetime.fromtimestamp(minted.issued_at, tz=dt.timezone.utc),
        }))

    def _take(self, scope: CapabilityRequest) -> tuple[_Held, int]:
        """The grant for `scope` (asked for now if none is usable) and the use index this request takes."""
        name = scope.model_dump_json()
        with self._lock:
            held = self._held.get(name)
            if held is None or held.used >= self.uses or self._now() + self._margin >= held.grant.claims.expires_at:
                delegate = Delegate()
                grant = self._inner.request(scope.model_copy(update={"delegate_key": delegate.public_x,
                                                                     "uses": self.uses}))
                self.grants_requested += 1
                held = _Held(grant, delegate)
                self._held.pop(name, None)
                while len(self._held) >= _MAX_SCOPES:
                    self._held.pop(next(iter(self._held)))
                self._held[name] = held
            use, held.used = held.used, held.used + 1
            return held, use
