"""Who may speak to the authority service as which lease owner.

The fleet supervisor provisions a random secret for every worker incarnation
before it starts it (`CallerRegistry.provision`) and hands it to the worker
only (its environment, `CALLER_SECRET_ENV`). The registry directory keeps
the SHA-256 of each secret, never the secret itself, so a process that can
read the directory still cannot authenticate as anyone. The authority
(`baton.authority_http`) checks the presented secret against the owner name
the caller claims, and issues only for leases held by that owner.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path

from baton.errors import CallerUnauthenticatedError

CALLER_ENV = "BATON_AUTHORITY_CALLER"
CALLER_SECRET_ENV = "BATON_AUTHORITY_SECRET"
CALLER_HEADER = "X-Baton-Caller"


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


class CallerRegistry:
    """Caller names and the digests of their secrets, one file each under `directory` (0700)."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)

    def _path(self, caller: str) -> Path:
        return self.directory / (hashlib.sha256(caller.encode("utf-8")).hexdigest()[:32] + ".json")

    def provision(self, caller: str) -> str:
        """A fresh secret for `caller` (replacing any earlier one); only its digest is kept."""
        if not caller:
            raise ValueError("a caller needs a name")
        self.directory.mkdir(parents=True, exist_ok=True)
        os.chmod(self.directory, 0o700)
        secret = secrets.token_urlsafe(32)
        path = self._path(caller)
        staging = path.with_suffix(".tmp")
        fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump({"caller": caller, "sha256": _digest(secret)}, out)
        os.replace(staging, path)
        return secret

    def authenticate(self, caller: str | None, secret: str | None) -> str:
        """`caller` if `secret` is the one provisioned for it; else CallerUnauthenticatedError."""
        if not caller or not secret:
            raise CallerUnauthenticatedError("the authority needs the caller's name and secret; none were presented")
        try:
            record = json.loads(self._path(caller).read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError) as exc:
            raise CallerUnauthenticatedError(f"caller {caller!r} was never provisioned by the fleet") from exc
        if record.get("caller") != caller or not hmac.compare_digest(str(record.get("sha256", "")), _digest(secret)):
            raise CallerUnauthenticatedError(f"the secret presented does not authenticate caller {caller!r}")
        return caller

    def bind(self, caller: str | None, secret: str | None, owner: str) -> None:
        """Authenticate the caller and require it to be the lease owner it asks as."""
        who = self.authenticate(caller, secret)
        if who != owner:
            raise CallerUnauthenticatedError(f"caller {who!r} asked as lease owner {owner!r}; it may ask only as itself")
