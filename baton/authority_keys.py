"""The authority's signing keys (Ed25519) and the public keys everyone else trusts.

Only the authority holds a `KeyRing`: the private key that signs capabilities
now, and the keys it retired. Everyone who checks a capability (the gateway,
each target) holds `TrustedKeys`: public keys by key id (`kid`), each trusted
until its `not_after`. Rotation makes a new active key and keeps trusting the
previous one for an overlap window, so tokens signed just before a rotation
still verify until they would have expired anyway.

On disk (`save` / `load`): `<dir>/private/<kid>.pem` (PKCS#8, mode 0600, in a
0700 directory) and `<dir>/jwks.json` (public keys, RFC 8037 OKP JWKs, with
`not_after` for retired keys; mode 0644). Only the authority's process should
ever open the first; workers and targets read the second.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from baton.errors import CapabilityError, SigningKeyError

ALGORITHM = "EdDSA"
JWKS_FILE = "jwks.json"
PRIVATE_DIR = "private"
ACTIVE_FILE = "active"


def b64url(data: bytes) -> str:
    """Unpadded base64url (RFC 7515), as JWKs and JWTs write bytes."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unb64url(text: str) -> bytes:
    """The bytes of unpadded base64url text."""
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def raw_public(key: Ed25519PublicKey) -> bytes:
    """The 32 raw bytes of an Ed25519 public key."""
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def kid_of(key: Ed25519PublicKey) -> str:
    """A key id derived from the public key itself (so two keys never share one)."""
    return "ed25519-" + hashlib.sha256(raw_public(key)).hexdigest()[:20]


def key_from_seed(seed: bytes) -> Ed25519PrivateKey:
    """A deterministic Ed25519 key from secret bytes (tests and simulation; live keys are random)."""
    if len(seed) < 32:
        raise SigningKeyError("a key seed needs at least 32 bytes")
    return Ed25519PrivateKey.from_private_bytes(hashlib.sha256(b"baton-authority-key:" + seed).digest())


@dataclass(frozen=True)
class TrustedKey:
    """One public key a verifier accepts, until `not_after` (None: no end set)."""

    kid: str
    key: Ed25519PublicKey
    not_after: dt.datetime | None = None

    def jwk(self) -> dict[str, Any]:
        jwk: dict[str, Any] = {"kty": "OKP", "crv": "Ed25519", "alg": ALGORITHM, "use": "sig",
                               "kid": self.kid, "x": b64url(raw_public(self.key))}
        if self.not_after is not None:
            jwk["not_after"] = self.not_after.isoformat()
        return jwk


@dataclass(frozen=True)
class TrustedKeys:
    """The public keys a verifier trusts, by kid."""

    keys: Mapping[str, TrustedKey] = field(default_factory=dict)

    def key_for(self, kid: object, now: dt.datetime | None) -> Ed25519PublicKey:
        """The public key for `kid`, or CapabilityError: unknown kid (untrusted_key) or past its overlap (retired_key)."""
        trusted = self.keys.get(kid) if isinstance(kid, str) else None
        if trusted is None:
            raise CapabilityError(f"capability is signed by key {kid!r}, which this verifier does not trust",
                                  reason="untrusted_key")
        if now is not None and trusted.not_after is not None and now >= trusted.not_after:
            raise CapabilityError(f"capability is signed by key {kid!r}, retired at {trusted.not_after.isoformat()}",
                                  reason="retired_key")
        return trusted.key

    def to_jwks(self) -> dict[str, Any]:
        return {"keys": [self.keys[kid].jwk() for kid in sorted(self.keys)]}

    @classmethod
    def from_jwks(cls, document: Mapping[str, Any]) -> TrustedKeys:
        """Parse a JWKS document of Ed25519 keys (SigningKeyError on anything else)."""
        keys: dict[str, TrustedKey] = {}
        try:
            for jwk in document["keys"]:
                if jwk.get("kty") != "OKP" or jwk.get("crv") != "Ed25519":
                    raise SigningKeyError(f"key {jwk.get('kid')!r} is not an Ed25519 OKP key")
                public = Ed25519PublicKey.from_public_bytes(unb64url(jwk["x"]))
                if kid_of(public) != jwk["kid"]:
                    raise SigningKeyError(f"key id {jwk['kid']!r} does not match its key")
                not_after = jwk.get("not_after")
                keys[jwk["kid"]] = TrustedKey(jwk["kid"], public,
                                              None if not_after is None else dt.datetime.fromisoformat(not_after))
        except (KeyError, TypeError, ValueError) as exc:
            raise SigningKeyError(f"malformed key set: {exc!r}") from exc
        return cls(keys)

    @classmethod
    def load(cls, path: Path) -> TrustedKeys:
        """The public keys in a `jwks.json` file."""
        return cls.from_jwks(json.loads(Path(path).read_text(encoding="utf-8")))


@dataclass(frozen=True)
class KeyRing:
    """The authority's keys: the active signing key and retired keys still trusted for a while."""

    active: Ed25519PrivateKey
    retired: tuple[TrustedKey, ...] = ()

    def __repr__(self) -> str:
        return f"KeyRing(active={self.active_kid!r}, retired={[k.kid for k in self.retired]!r})"

    @property
    def active_kid(self) -> str:
        return kid_of(self.active.public_key())

    @classmethod
    def generate(cls) -> KeyRing:
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def from_seed(cls, seed: bytes) -> KeyRing:
        return cls(key_from_seed(seed))

    def rotate(self, now: dt.datetime, overlap_s: float, new_key: Ed25519PrivateKey | None = None) -> KeyRing:
        """A ring with a new active key; the old one stays trusted for `overlap_s` seconds from `now`."""
        old = TrustedKey(self.active_kid, self.active.public_key(), now + dt.timedelta(seconds=overlap_s))
        kept = tuple(k for k in self.retired if k.not_after is None or k.not_after > now)
        return replace(self, active=new_key or Ed25519PrivateKey.generate(), retired=(*kept, old))

    def trusted(self) -> TrustedKeys:
        """The public half: what verifiers need, nothing they could sign with."""
        keys = {k.kid: k for k in self.retired}
        keys[self.active_kid] = TrustedKey(self.active_kid, self.active.public_key())
        return TrustedKeys(keys)

    def save(self, directory: Path) -> None:
        """Write the private key (0600, in a 0700 directory) and the public key set (0644)."""
        private = Path(directory) / PRIVATE_DIR
        private.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(private, 0o700)
        pem = self.active.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                        serialization.NoEncryption())
        path = private / f"{self.active_kid}.pem"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, pem)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(path, 0o600)
        (private / ACTIVE_FILE).write_text(self.active_kid, encoding="ascii")
        os.chmod(private / ACTIVE_FILE, 0o600)
        staging = Path(directory) / (JWKS_FILE + ".tmp")
        staging.write_text(json.dumps(self.trusted().to_jwks(), indent=2, sort_keys=True), encoding="utf-8")
        os.chmod(staging, 0o644)
        os.replace(staging, Path(directory) / JWKS_FILE)

    @classmethod
    def load(cls, directory: Path) -> KeyRing:
        """The ring saved in `directory`; SigningKeyError if the private key is readable by others."""
        private = Path(directory) / PRIVATE_DIR
        kid = (private / ACTIVE_FILE).read_text(encoding="ascii").strip()
        path = private / f"{kid}.pem"
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            raise SigningKeyError(f"{path} is readable by group or others (mode {mode:o}); chmod 600 it")
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
        if not isinstance(key, Ed25519PrivateKey) or kid_of(key.public_key()) != kid:
            raise SigningKeyError(f"{path} does not hold the Ed25519 key {kid}")
        trusted = TrustedKeys.load(Path(directory) / JWKS_FILE)
        retired = tuple(k for k in trusted.keys.values() if k.kid != kid)
        return cls(key, retired)

    @classmethod
    def load_or_create(cls, directory: Path) -> KeyRing:
        """Load the ring in `directory`, creating a random one the first time."""
        if (Path(directory) / PRIVATE_DIR / ACTIVE_FILE).exists():
            return cls.load(directory)
        ring = cls.generate()
        ring.save(directory)
        return ring
