"""The authority service: short-lived, scoped, signed capabilities issued from policy.

A checkpoint never carries credentials. A worker that owns the current epoch
asks this service for a capability for one operation on one exact artifact;
the service consults policy (the caller's lease and epoch as the store holds
them, the run's authority context and approvals, the placement's ceiling) and
returns an EdDSA (Ed25519) JWT through PyJWT, with the signing key's id in its
header, that expires no later than the lease. Anyone holding the public keys
(`baton.authority_keys.TrustedKeys`) verifies it with `CapabilityVerifier`:
the gateway before any side effect, and each target again on its own side.

In tests and simulation the service runs in-process; live, it is its own
process (`baton.authority_http`), the only one that reads the private key.
No worker path constructs one: a worker only ever holds an `AuthorityClient`.
"""

from __future__ import annotations

import datetime as dt
import threading
import uuid
from typing import Any, Protocol

import jwt
from pydantic import Field

from baton import clock
from baton.authority_grants import (
    DELEGATED_TYPE, MAX_USES, check_delegate_key, grant_of, parse_jws, token_header, verify_delegated,
)
from baton.authority_keys import ALGORITHM, KeyRing, TrustedKeys
from baton.ablation import Ablation, is_ablated
from baton.approval_signing import verify_approval
from baton.errors import ApprovalError, AuthorityDeniedError, CapabilityError, SigningKeyError
from baton.models.authority import Approval, AuthorityContext, AuthorityLevel
from baton.models.base import Record, Ref
from baton.models.events import Event, EventType
from baton.models.placement import Placement
from baton.store.records import Lease

MIN_KEY_BYTES = 32
ISSUER = "baton-authority"
AUDIENCE = "baton-gateway"
_REQUIRED_CLAIMS = ["iss", "aud", "iat", "exp", "jti", "run", "epoch", "operation", "level"]
_DECODED_CACHE_SIZE = 1024  # tokens whose signature verified, per service


# --- capabilities ------------------------------------------------------------------------------


class CapabilityClaims(Record):
    """What a verified capability allows: one operation, at one epoch of one run, on one artifact."""

    capability_id: str = Field(min_length=1)
    run_id: str = Field(min_length=1)
    epoch: int = Field(ge=0)
    operation: str = Field(min_length=1)
    artifact_hash: Ref | None
    idempotency_key: str | None = None
    level: AuthorityLevel
    placement: str
    issued_at: dt.datetime
    expires_at: dt.datetime
    kid: str = ""
    delegate_key: str | None = None
    """A grant's proof-of-possession key (`baton.authority_grants`): set on grants only, never on a capability."""
    uses: int | None = None
    """A grant's ceiling of delegated tokens (and, on a delegated capability, its grant's)."""
    grant_id: str | None = None
    """On a delegated capability: the id of the grant it was signed under."""


class Capability(Record):
    """A signed capability token and the claims it carries. Bearer material: never checkpoint it."""

    token: str = Field(min_length=1, repr=False)
    claims: CapabilityClaims


def _ts(value: dt.datetime) -> float:
    if value.tzinfo is None:
        raise ValueError("capability times must carry a zone")
    return value.timestamp()


def _utc(seconds: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, tz=dt.timezone.utc)


def _utcnow() -> dt.datetime:
    return clock.now()


class CapabilityVerifier:
    """Checks capabilities with public keys only: what the gateway and every target hold."""

    def __init__(self, trusted: TrustedKeys) -> None:
        self.trusted = trusted
        self._decoded: dict[str, CapabilityClaims] = {}
        self._grants: dict[str, CapabilityClaims] = {}
        self._decoded_lock = threading.Lock()

    def decode(self, token: str) -> CapabilityClaims:
        """The claims a token carries, once its key id is trusted and its signature, issuer and audience verify.

        Says nothing about time or scope: `check` judges those for each request.
        A delegated token (`baton.authority_grants`) verifies twice: its grant
        with the trusted keys, then the token with the key the grant names. A
        grant on its own is refused. A token that verified once verifies again
        (same bytes, same key), so its claims are remembered for the next
        request that presents it.
        """
        cached = self._decoded.get(token)
        if cached is not None:
            return cached
        header = self._header(token)
        if header.get("typ") == DELEGATED_TYPE:
            claims = self._delegated(token)
        else:
            claims = self._signed(token, header)
            if claims.delegate_key is not None:
                raise CapabilityError(
                    f"capability {claims.capability_id} is a grant: only a token its holder signed under it, bound "
                    "to one idempotency key, is a capability", reason="undelegated_grant")
        self._remember(self._decoded, token, claims)
        return claims

    @staticmethod
    def _header(token: str) -> dict[str, Any]:
        return token_header(token)

    def _remember(self, cache: dict[str, CapabilityClaims], token: str, claims: CapabilityClaims) -> None:
        with self._decoded_lock:
            while len(cache) >= _DECODED_CACHE_SIZE:
                cache.pop(next(iter(cache)))
            cache[token] = claims

    def _delegated(self, token: str) -> CapabilityClaims:
        """A delegated token's claims: its grant's scope, bound to the token's idempotency key and expiry."""
        jws = parse_jws(token)
        grant_token = grant_of(jws)
        grant = self._grants.get(grant_token)
        if grant is None:
            grant = self._signed(grant_token, self._header(grant_token))
            if grant.delegate_key is None or grant.uses is None:
                raise CapabilityError(f"capability {grant.capability_id} is no grant: nothing may be signed under it",
                                      reason="forged")
            self._remember(self._grants, grant_token, grant)
        payload = verify_delegated(jws, grant.delegate_key)
        if payload["use"] >= grant.uses:
            raise CapabilityError(
                f"delegated capability {payload['jti']} is use {payload['use']} of grant {grant.capability_id}, "
                f"which allows {grant.uses}", reason="uses_exhausted")
        try:
            expires_at = min(grant.expires_at, _utc(float(payload["exp"])))
            issued_at = _utc(float(payload["iat"]))
        except (TypeError, ValueError, OverflowError) as exc:
            raise CapabilityError(f"delegated capability times are malformed: {exc}", reason="malformed") from exc
        return grant.model_copy(update={
            "capability_id": str(payload["jti"]), "idempotency_key": payload["key"], "issued_at": issued_at,
            "expires_at": expires_at, "delegate_key": None, "grant_id": grant.capability_id,
        })

    def _signed(self, token: str, header: dict[str, Any]) -> CapabilityClaims:
        """The claims of a token the authority signed, once its key, signature, issuer and audience verify."""
        if header.get("alg") != ALGORITHM:
            raise CapabilityError(f"capability uses a refused algorithm {header.get('alg')!r}", reason="forged")
        key = self.trusted.key_for(header.get("kid"), now=None)
        try:
            payload = jwt.decode(
                token,
                key,
                algorithms=[ALGORITHM],
                audience=AUDIENCE,
                issuer=ISSUER,
                # Expiry is judged in `check` against the caller's (database) clock, to the microsecond.
                options={"verify_exp": False, "verify_iat": False, "require": _REQUIRED_CLAIMS},
            )
        except jwt.InvalidSignatureError as exc:
            raise CapabilityError("capability signature does not verify: forged or altered", reason="forged") from exc
        except jwt.InvalidAlgorithmError as exc:
            raise CapabilityError(f"capability uses a refused algorithm: {exc}", reason="forged") from exc
        except (jwt.InvalidAudienceError, jwt.InvalidIssuerError) as exc:
            raise CapabilityError(f"capability was not issued by Baton's authority for the gateway: {exc}", reason="forged") from exc
        except jwt.PyJWTError as exc:
            raise CapabilityError(f"capability is malformed: {exc}", reason="malformed") from exc
        try:
            confirmation = payload.get("cnf")
            return CapabilityClaims(
                capability_id=str(payload["jti"]),
                run_id=str(payload["run"]),
                epoch=int(payload["epoch"]),
                operation=str(payload["operation"]),
                artifact_hash=payload.get("artifact"),
                idempotency_key=payload.get("key"),
                level=AuthorityLevel(payload["level"]),
                placement=str(payload.get("placement", "")),
                issued_at=_utc(float(payload["iat"])),
                expires_at=_utc(float(payload["exp"])),
                kid=str(header["kid"]),
                delegate_key=None if confirmation is None else str(confirmation["jwk"]["x"]),
                uses=None if payload.get("uses") is None else int(payload["uses"]),
            )
        except (ValueError, TypeError, KeyError) as exc:
            raise CapabilityError(f"capability claims are malformed: {exc}", reason="malformed") from exc

    def verify(
        self,
        token: str,
        *,
        run_id: str,
        epoch: int,
        operation: str,
        artifact_hash: str | None,
        required_level: AuthorityLevel,
        ceiling: AuthorityLevel | None = None,
        now: dt.datetime | None = None,
        idempotency_key: str | None = None,
        require_key: bool = False,
    ) -> CapabilityClaims:
        """The claims of a capability that fits this exact request, or CapabilityError with a reason."""
        return self.check(
            self.decode(token), run_id=run_id, epoch=epoch, operation=operation, artifact_hash=artifact_hash,
            required_level=required_level, ceiling=ceiling, now=now, idempotency_key=idempotency_key,
            require_key=require_key,
        )

    def check(
        self,
        claims: CapabilityClaims,
        *,
        run_id: str,
        epoch: int,
        operation: str,
        artifact_hash: str | None,
        required_level: AuthorityLevel,
        ceiling: AuthorityLevel | None = None,
        now: dt.datetime | None = None,
        idempotency_key: str | None = None,
        require_key: bool = False,
    ) -> CapabilityClaims:
        """`claims` (from `decode`) if unexpired at `now`, signed by a key still trusted then, and fit for this request."""
        now = now or _utcnow()
        if is_ablated(Ablation.CAPABILITY_CHECK):
            return claims
        if now >= claims.expires_at:
            raise CapabilityError(f"capability {claims.capability_id} expired at {claims.expires_at.isoformat()}", reason="expired")
        self.trusted.key_for(claims.kid, now=now)
        return self.check_scope(
            claims, run_id=run_id, epoch=epoch, operation=operation, artifact_hash=artifact_hash,
            required_level=required_level, ceiling=ceiling, idempotency_key=idempotency_key, require_key=require_key,
        )

    def check_scope(
        self,
        claims: CapabilityClaims,
        *,
        run_id: str,
        epoch: int,
        operation: str,
        artifact_hash: str | None,
        required_level: AuthorityLevel,
        ceiling: AuthorityLevel | None = None,
        idempotency_key: str | None = None,
        require_key: bool = False,
    ) -> CapabilityClaims:
        """Everything `check` judges but time: run, epoch, operation, artifact, key, level and ceiling.

        A capability bound to an idempotency key fits only that key; with
        `require_key` (what targets ask) an unbound capability fits none.
        """
        if is_ablated(Ablation.CAPABILITY_CHECK):
            return claims
        mismatches = (
            ("wrong_run", claims.run_id, run_id, "run"),
            ("wrong_epoch", claims.epoch, epoch, "epoch"),
            ("wrong_operation", claims.operation, operation, "operation"),
            ("wrong_artifact", claims.artifact_hash, artifact_hash, "artifact hash"),
        )
        for reason, held, wanted, what in mismatches:
            if held != wanted:
                raise CapabilityError(
                    f"capability {claims.capability_id} is scoped to {what} {held!r}, not {wanted!r}", reason=reason
                )
        if (claims.idempotency_key is not None or require_key) and claims.idempotency_key != idempotency_key:
            raise CapabilityError(
                f"capability {claims.capability_id} is scoped to idempotency key {claims.idempotency_key!r}, "
                f"not {idempotency_key!r}",
                reason="wrong_key",
            )
        if not claims.level.allows(required_level):
            raise CapabilityError(
                f"capability {claims.capability_id} grants {claims.level.value}; this operation needs "
                f"{required_level.value}",
                reason="insufficient_level",
            )
        if ceiling is not None and not ceiling.allows(claims.level):
            raise CapabilityError(
                f"capability {claims.capability_id} claims {claims.level.value}, above the ceiling "
                f"{ceiling.value} that applies here",
                reason="above_ceiling",
            )
        return claims


def _check_grant_request(idempotency_key: str | None, delegate_key: str | None, uses: int | None) -> None:
    """AuthorityDeniedError unless a grant request is whole: a delegate key and a ceiling, and no idempotency key."""
    if delegate_key is None:
        if uses is not None:
            raise AuthorityDeniedError("a ceiling of uses is for a grant; name the delegate key it is granted to")
        return
    if idempotency_key is not None:
        raise AuthorityDeniedError("a grant names no idempotency key: each token signed under it names its own")
    if uses is None or not 1 <= uses <= MAX_USES:
        raise AuthorityDeniedError(f"a grant needs a ceiling of 1 to {MAX_USES} uses, not {uses!r}")
    try:
        check_delegate_key(delegate_key)
    except ValueError as exc:
        raise AuthorityDeniedError(f"grant refused: {exc}") from exc


class LeaseReader(Protocol):
    """What the authority reads from the store: the run's lease and the database clock."""

    def get_lease(self, run_id: str) -> Lease: ...

    def db_now(self) -> dt.datetime: ...


class AuthorityService:
    """Issues capabilities (the only holder of the signing key) and verifies them. Times should be the database's."""

    def __init__(
        self,
        signing_key: bytes | KeyRing,
        *,
        max_ttl_s: float = 300.0,
        approval_required_from: AuthorityLevel = AuthorityLevel.EXTERNAL_MUTATE,
        approvers: TrustedKeys | None = None,
    ) -> None:
        self.approvers = approvers
        """The approvers' public keys; when set, only approvals they signed count (`baton.approval_signing`)."""
        if isinstance(signing_key, KeyRing):
            self._ring = signing_key
        else:
            if len(signing_key) < MIN_KEY_BYTES:
                raise SigningKeyError(f"a signing key needs at least {MIN_KEY_BYTES} bytes")
            self._ring = KeyRing.from_seed(signing_key)
        self.verifier = CapabilityVerifier(self._ring.trusted())
        self.max_ttl_s = max_ttl_s
        self.approval_required_from = approval_required_from

    def __repr__(self) -> str:
        return f"AuthorityService(max_ttl_s={self.max_ttl_s}, kid={self._ring.active_kid!r}, key=<hidden>)"

    @property
    def active_kid(self) -> str:
        return self._ring.active_kid

    def trusted_keys(self) -> TrustedKeys:
        """The public keys to hand to verifiers (gateway, targets)."""
        return self._ring.trusted()

    def rotate(self, now: dt.datetime, overlap_s: float) -> str:
        """Sign with a new key from now on; trust the old one `overlap_s` longer. Returns the new kid."""
        self._ring = self._ring.rotate(now, overlap_s)
        self.verifier = CapabilityVerifier(self._ring.trusted())
        return self._ring.active_kid

    def _approval_for(
        self, context: AuthorityContext, operation: str, artifact_hash: str | None, level: AuthorityLevel, now: dt.datetime
    ) -> Approval | None:
        if artifact_hash is None:
            return None
        for approval in context.approvals:
            if not (approval.valid_for(operation, artifact_hash, now) and approval.level.allows(level)):
                continue
            if self.approvers is not None:
                try:
                    verify_approval(approval, self.approvers, now=now, operation=operation, artifacts=(artifact_hash,))
                except ApprovalError:
                    continue
            return approval
        return None

    def issue_checked(
        self,
        store: LeaseReader,
        *,
        run_id: str,
        epoch: int,
        owner: str,
        operation: str,
        artifact_hash: str | None,
        level: AuthorityLevel,
        placement: Placement,
        context: AuthorityContext,
        idempotency_key: str | None = None,
        ttl_s: float | None = None,
        delegate_key: str | None = None,
        uses: int | None = None,
    ) -> Capability:
        """`issue`, judged on the lease the store holds for the run and the store's clock (not the caller's word)."""
        lease = store.get_lease(run_id)
        if lease.owner != owner:
            raise AuthorityDeniedError(
                f"run {run_id!r}: {owner!r} does not hold the lease (the store names {lease.owner!r} at epoch {lease.epoch})"
            )
        return self.issue(
            run_id=run_id, epoch=epoch, operation=operation, artifact_hash=artifact_hash, level=level, lease=lease,
            placement=placement, context=context, now=store.db_now(), ttl_s=ttl_s, idempotency_key=idempotency_key,
            delegate_key=delegate_key, uses=uses,
        )

    def issue(
        self,
        *,
        run_id: str,
        epoch: int,
        operation: str,
        artifact_hash: str | None,
        level: AuthorityLevel,
        lease: Lease,
        placement: Placement,
        context: AuthorityContext,
        now: dt.datetime | None = None,
        ttl_s: float | None = None,
        idempotency_key: str | None = None,
        delegate_key: str | None = None,
        uses: int | None = None,
    ) -> Capability:
        """A capability for one operation, or AuthorityDeniedError saying which rule refused it.

        With `delegate_key` (the holder's Ed25519 public key, base64url) and
        `uses`, the capability is a grant (`baton.authority_grants`): it names
        no idempotency key, and is usable only through at most `uses` tokens
        its holder signs with that key, each bound to one key.
        """
        now = now or _utcnow()
        _check_grant_request(idempotency_key, delegate_key, uses)
        if lease.run_id != run_id or lease.epoch != epoch or not lease.held_at(now) or lease.expires_at is None:
            raise AuthorityDeniedError(
                f"run {run_id!r} epoch {epoch}: the caller does not hold a live lease at that epoch "
                f"(lease: owner={lease.owner!r}, epoch={lease.epoch}, expires_at={lease.expires_at})"
            )
        if not placement.authority_ceiling.allows(level) and not is_ablated(Ablation.AUTHORITY_CEILING):
            raise AuthorityDeniedError(
                f"placement {placement.name!r} has ceiling {placement.authority_ceiling.value}; "
                f"{level.value} cannot be issued there"
            )
        if not context.level.allows(level):
            raise AuthorityDeniedError(
                f"run {run_id!r} holds authority {context.level.value} under policy {context.policy_id!r}; "
                f"{level.value} was requested"
            )
        expiry = now + dt.timedelta(seconds=min(ttl_s or self.max_ttl_s, self.max_ttl_s))
        expiry = min(expiry, lease.expires_at)
        if level.allows(self.approval_required_from) and not is_ablated(Ablation.APPROVAL_CHECK):
            approval = self._approval_for(context, operation, artifact_hash, level, now)
            if approval is None:
                raise AuthorityDeniedError(
                    f"{level.value} for operation {operation!r} needs an unexpired approval bound to artifact "
                    f"{artifact_hash}; none in the run's authority context matches"
                )
            expiry = min(expiry, approval.expires_at)
        if expiry <= now:
            raise AuthorityDeniedError(f"run {run_id!r}: nothing left of the lease or approval to issue against")
        kid = self._ring.active_kid
        claims = CapabilityClaims(
            capability_id=uuid.uuid4().hex,
            run_id=run_id,
            epoch=epoch,
            operation=operation,
            artifact_hash=artifact_hash,
            idempotency_key=idempotency_key,
            level=level,
            placement=placement.name,
            issued_at=now,
            expires_at=expiry,
            kid=kid,
            delegate_key=delegate_key,
            uses=uses,
        )
        payload: dict[str, Any] = {
            "iss": ISSUER,
            "aud": AUDIENCE,
            "iat": _ts(now),
            "exp": _ts(expiry),
            "jti": claims.capability_id,
            "run": run_id,
            "epoch": epoch,
            "operation": operation,
            "artifact": artifact_hash,
            "key": idempotency_key,
            "level": level.value,
            "placement": placement.name,
        }
        if delegate_key is not None:
            payload["cnf"] = {"jwk": {"kty": "OKP", "crv": "Ed25519", "x": delegate_key}}
            payload["uses"] = uses
        token = jwt.encode(payload, self._ring.active, algorithm=ALGORITHM, headers={"kid": kid})
        return Capability(token=token, claims=claims)

    def decode(self, token: str) -> CapabilityClaims:
        """See `CapabilityVerifier.decode`."""
        return self.verifier.decode(token)

    def verify(self, token: str, **scope: Any) -> CapabilityClaims:
        """See `CapabilityVerifier.verify`."""
        return self.verifier.verify(token, **scope)

    def check(self, claims: CapabilityClaims, **scope: Any) -> CapabilityClaims:
        """See `CapabilityVerifier.check`."""
        return self.verifier.check(claims, **scope)

    def check_scope(self, claims: CapabilityClaims, **scope: Any) -> CapabilityClaims:
        """See `CapabilityVerifier.check_scope`."""
        return self.verifier.check_scope(claims, **scope)


# --- authority across a handoff ----------------------------------------------------------------


class EventSink(Protocol):
    """Anything that can append a run event (the SQL store does)."""

    def append_event(self, event: Event) -> int: ...


def authority_after_handoff(
    context: AuthorityContext,
    target_ceiling: AuthorityLevel,
    *,
    run_id: str | None = None,
    events: EventSink | None = None,
    source_placement: str | None = None,
    target_placement: str | None = None,
    at: dt.datetime | None = None,
) -> AuthorityContext:
    """The run's authority on a new placement: the lesser of what it held and the target's ceiling.

    A reduction is marked in `downgraded_from` and, when `events` and `run_id`
    are given, recorded as an AUTHORITY_DOWNGRADED event.
    """
    if is_ablated(Ablation.AUTHORITY_DOWNGRADE):
        return context
    return capped_authority(
        context, target_ceiling, f"target ceiling {target_ceiling.value} is below {context.level.value}",
        run_id=run_id, events=events, source_placement=source_placement, target_placement=target_placement, at=at,
    )


def capped_authority(
    context: AuthorityContext,
    ceiling: AuthorityLevel,
    reason: str,
    *,
    run_id: str | None = None,
    events: EventSink | None = None,
    source_placement: str | None = None,
    target_placement: str | None = None,
    at: dt.datetime | None = None,
) -> AuthorityContext:
    """`context` reduced to `ceiling` if it is above it (marked in `downgraded_from`, recorded with `reason`)."""
    level = AuthorityLevel.lesser(context.level, ceiling)
    if level is context.level:
        return context
    origin = context.downgraded_from or context.level
    reduced = context.model_copy(update={"level": level, "downgraded_from": origin})
    if events is not None and run_id is not None:
        events.append_event(
            Event(
                event_type=EventType.AUTHORITY_DOWNGRADED,
                run_id=run_id,
                at=at or _utcnow(),
                source_placement=source_placement,
                target_placement=target_placement,
                authority_before=context.level.value,
                authority_after=level.value,
                reason=reason,
                detail={"mutation_paused": not level.allows(AuthorityLevel.SANDBOX_MUTATE)},
            )
        )
    return reduced


def may_perform(context: AuthorityContext, required: AuthorityLevel) -> bool:
    """True when the run's current authority covers `required` (observe, plan and verify survive a downgrade)."""
    return context.level.allows(required)
