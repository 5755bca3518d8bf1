"""A target's own check of the capability a mutation carries (public keys only).

The gateway checks capabilities too, but a target that trusted the gateway
alone could be reached around it. A guarded target knows which operation it
performs, at which level, and which payload field names the artifact; it
admits a mutation only with a capability, valid and unexpired by its own
clock, for that run, epoch, operation, idempotency key, artifact hash and
level, signed by a key it trusts. Each refusal names its reason (`no_capability`,
`untrusted_key`, `forged`, `expired`, `wrong_run`, `wrong_epoch`,
`wrong_operation`, `wrong_key`, `wrong_artifact`, `insufficient_level`, ...).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from baton import clock
from baton.authority import CapabilityClaims, CapabilityVerifier
from baton.authority_keys import TrustedKeys
from baton.errors import CapabilityError
from baton.models.authority import AuthorityLevel


@dataclass(frozen=True)
class TargetPolicy:
    """What this target does: the operation a capability must name, its level, and where the artifact hash is."""

    operation: str
    level: AuthorityLevel = AuthorityLevel.EXTERNAL_MUTATE
    artifact_field: str | None = None
    """The payload field holding the artifact hash the capability must name; None: the payload names none."""

    def arguments(self, trust: Path) -> list[str]:
        """The command-line options (`add_guard_arguments`) that give a target service this policy."""
        args = ["--trust", str(trust), "--capability-operation", self.operation, "--capability-level", self.level.value]
        return args + ([] if self.artifact_field is None else ["--artifact-field", self.artifact_field])


def add_guard_arguments(parser: argparse.ArgumentParser) -> None:
    """`--trust` and the policy options of a guarded target service."""
    parser.add_argument("--trust", type=Path, default=None,
                        help="public key set (jwks.json) to check capabilities with; without it none are checked")
    parser.add_argument("--capability-operation", default=None, help="the operation a capability must name")
    parser.add_argument("--capability-level", default=AuthorityLevel.EXTERNAL_MUTATE.value, help="the level it must grant")
    parser.add_argument("--artifact-field", default=None, help="payload field holding the artifact hash")


def guard_from_arguments(args: argparse.Namespace, default_operation: str) -> TargetGuard | None:
    """The guard `add_guard_arguments` describes, or None without `--trust`."""
    if args.trust is None:
        return None
    policy = TargetPolicy(args.capability_operation or default_operation, AuthorityLevel(args.capability_level),
                          args.artifact_field)
    return TargetGuard(KeyFile(args.trust), policy)


class KeyFile:
    """A published key set (`jwks.json`), read again whenever the file changes (rotation, retirement)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._seen: tuple[int, int, int] | None = None
        self._keys = TrustedKeys()

    def __call__(self) -> TrustedKeys:
        status = self.path.stat()
        seen = (status.st_ino, status.st_mtime_ns, status.st_size)  # a save replaces the file: new inode
        if seen != self._seen:
            self._keys, self._seen = TrustedKeys.load(self.path), seen
        return self._keys


class TargetGuard:
    """Admits or refuses one mutation on the target's side."""

    def __init__(self, load_keys: Callable[[], TrustedKeys], policy: TargetPolicy) -> None:
        self._load_keys = load_keys
        self._keys = load_keys()
        self._verifier = CapabilityVerifier(self._keys)
        self.policy = policy

    def admit(
        self,
        capability: str | None,
        *,
        run_id: str,
        epoch: int,
        idempotency_key: str,
        payload: Mapping[str, Any],
        now: dt.datetime | None = None,
    ) -> CapabilityClaims:
        """The claims that allow this mutation, or CapabilityError with the reason it is refused."""
        if not capability:
            raise CapabilityError("no capability: the target refuses any mutation that carries none",
                                  reason="no_capability")
        keys = self._load_keys()
        if keys is not self._keys:
            self._keys, self._verifier = keys, CapabilityVerifier(keys)
        claims = self._verifier.decode(capability)
        artifact = claims.artifact_hash  # a target whose payload names no artifact cannot judge it
        if self.policy.artifact_field is not None:
            value = payload.get(self.policy.artifact_field)
            artifact = value if isinstance(value, str) else None
        return self._verifier.check(
            claims, run_id=run_id, epoch=epoch, operation=self.policy.operation, artifact_hash=artifact,
            required_level=self.policy.level, now=now or clock.now(),
            idempotency_key=idempotency_key, require_key=True,
        )
