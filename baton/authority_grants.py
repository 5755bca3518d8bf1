"""Delegated capabilities: one grant from the authority, one key-bound token per mutation, no round trip.

Asking the authority service for a capability at every mutation costs an
HTTP request (and a lease read) each time. Instead a worker may ask once per
scope for a *grant*: a capability the authority signs like any other (run,
epoch, operation, artifact, level, placement; expiry no later than the lease
and the approval), that names no idempotency key but carries a proof-of-
possession key (`cnf`, RFC 7800) and a ceiling of `uses`. The worker made
that key pair in memory for this grant and nothing else; it never leaves the
process (never a checkpoint, never a file). For each mutation it signs a small
token with it (`Delegate.mint`): the grant, the idempotency key, the index of
this use below the ceiling, an id and an expiry no later than the grant's.

A verifier (the gateway, every target) checks both signatures: the grant's
with the authority's public keys, the token's with the key the grant names
(`verify_delegated`: the token is decoded once, and its signature checked
with `cryptography` directly, since PyJWT would re-scan the embedded grant
character by character at each of its passes). Everything else (expiry by the verifier's clock, scope,
key binding, level, ceiling, the epoch fence at the store and the target) is
judged exactly as for a capability the authority bound to the key itself. A
grant presented on its own is no capability (`undelegated_grant`).

What the ceiling does not do: a verifier holds no state, so it checks that a
token's use index is below `uses`, not that indexes are distinct; the number
of mutations a run makes stays bounded by its budget ledger (one tool call
charged per mutation) and by the gateway's one operation per idempotency key.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any, NamedTuple

import jwt
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from baton import clock
from baton.authority_keys import ALGORITHM, b64url, raw_public, unb64url
from baton.errors import CapabilityError

DELEGATED_TYPE = "baton-delegated+jwt"
"""The `typ` header of a token a worker signed under a grant."""
DELEGATE_AUDIENCE = "baton-gateway"
MAX_USES = 100_000
_REQUIRED = ["aud", "iat", "exp", "jti", "grant", "key", "use"]


def public_key_from(x: object) -> Ed25519PublicKey:
    """The Ed25519 public key a grant's `cnf` names (base64url raw bytes), or CapabilityError (malformed)."""
    if not isinstance(x, str) or not x:
        raise CapabilityError("capability grant names no delegate key", reason="malformed")
    try:
        return Ed25519PublicKey.from_public_bytes(unb64url(x))
    except ValueError as exc:
        raise CapabilityError(f"capability grant names a malformed delegate key: {exc}", reason="malformed") from exc


def check_delegate_key(x: str) -> str:
    """`x` if it is an Ed25519 public key (base64url raw bytes); ValueError otherwise (for request models)."""
    try:
        public_key_from(x)
    except CapabilityError as exc:
        raise ValueError(str(exc)) from exc
    return x


class Minted(NamedTuple):
    """A token `Delegate.mint` signed, with its id and issue time (seconds since the epoch)."""

    token: str
    jti: str
    issued_at: float


class Delegate:
    """A worker's in-memory key pair for one grant: it signs one key-bound token per mutation."""

    def __init__(self) -> None:
        self._key = Ed25519PrivateKey.generate()
        self.public_x = b64url(raw_public(self._key.public_key()))
        """The public half, as the grant request names it."""

    def __repr__(self) -> str:
        return f"Delegate(public_x={self.public_x!r}, key=<hidden>)"

    def mint(self, grant: str, *, idempotency_key: str, use: int, expires_at: float, now: float | None = None) -> Minted:
        """A token for one mutation under `grant`: bound to `idempotency_key`, use number `use`, expiring by `expires_at`."""
        if not idempotency_key:
            raise ValueError("a delegated token is bound to one idempotency key; none was given")
        if use < 0:
            raise ValueError(f"a use index is never negative, not {use}")
        issued_at, jti = clock.now().timestamp() if now is None else now, uuid.uuid4().hex
        payload: dict[str, Any] = {
            "aud": DELEGATE_AUDIENCE, "iat": issued_at, "exp": expires_at,
            "jti": jti, "grant": grant, "key": idempotency_key, "use": use,
        }
        return Minted(jwt.encode(payload, self._key, algorithm=ALGORITHM, headers={"typ": DELEGATED_TYPE}), jti, issued_at)


class Jws(NamedTuple):
    """A compact JWS split and decoded, its signature not yet checked."""

    header: dict[str, Any]
    payload: dict[str, Any]
    signing_input: bytes
    signature: bytes


_SEGMENT = re.compile(r"[A-Za-z0-9_-]*")


def _segment(text: str, name: str) -> bytes:
    """Strict unpadded base64url (anything outside its alphabet is refused, not skipped)."""
    if len(text) % 4 == 1 or _SEGMENT.fullmatch(text) is None:
        raise CapabilityError(f"capability {name} is not base64url", reason="malformed")
    return unb64url(text)


def _json(data: bytes, name: str) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except ValueError as exc:
        raise CapabilityError(f"capability {name} is not JSON: {exc}", reason="malformed") from exc
    if not isinstance(value, dict):
        raise CapabilityError(f"capability {name} is not a JSON object", reason="malformed")
    return value


def token_header(token: str) -> dict[str, Any]:
    """The (unverified) header of a compact JWS, decoding nothing else; CapabilityError (malformed) if it is none."""
    head, dot, _ = token.partition(".")
    if not dot:
        raise CapabilityError("capability is malformed: not a compact JWS", reason="malformed")
    return _json(_segment(head, "header"), "header")


def parse_jws(token: str) -> Jws:
    """A compact JWS's three parts, decoded once (the payload of a delegated token carries its whole grant)."""
    parts = token.split(".")
    if len(parts) != 3:
        raise CapabilityError("capability is malformed: not a compact JWS", reason="malformed")
    head, body, signature = parts
    return Jws(_json(_segment(head, "header"), "header"), _json(_segment(body, "payload"), "payload"),
               f"{head}.{body}".encode("ascii"), _segment(signature, "signature"))


def grant_of(jws: Jws) -> str:
    """The grant a delegated token says it was signed under (not yet verified), or CapabilityError."""
    grant = jws.payload.get("grant")
    if not isinstance(grant, str) or not grant:
        raise CapabilityError("delegated capability carries no grant", reason="malformed")
    return grant


def verify_delegated(jws: Jws, delegate_x: object) -> dict[str, Any]:
    """The claims of a delegated token whose signature verifies with the grant's delegate key, or CapabilityError."""
    key = public_key_from(delegate_x)
    if jws.header.get("alg") != ALGORITHM or jws.header.get("typ") != DELEGATED_TYPE:
        raise CapabilityError(f"delegated capability uses a refused algorithm {jws.header.get('alg')!r}", reason="forged")
    try:
        key.verify(jws.signature, jws.signing_input)
    except InvalidSignature as exc:
        raise CapabilityError("delegated capability is not signed by the key its grant names: forged",
                              reason="forged") from exc
    payload = jws.payload
    missing = [claim for claim in _REQUIRED if claim not in payload]
    if missing:
        raise CapabilityError(f"delegated capability lacks the claims {missing}", reason="malformed")
    if payload["aud"] != DELEGATE_AUDIENCE:
        raise CapabilityError(f"delegated capability is for {payload['aud']!r}, not the gateway", reason="forged")
    if not isinstance(payload["key"], str) or not payload["key"]:
        raise CapabilityError("delegated capability names no idempotency key", reason="malformed")
    if not isinstance(payload["use"], int) or isinstance(payload["use"], bool) or payload["use"] < 0:
        raise CapabilityError(f"delegated capability has a malformed use index {payload['use']!r}", reason="malformed")
    return payload
