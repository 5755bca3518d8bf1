"""The authority service as its own process on loopback, and the clients that ask it for capabilities.

One interface (`AuthorityClient.request`), two transports:

- `LocalAuthorityClient`: the service in this process (tests, simulation);
- `HttpAuthorityClient`: the service in `AuthorityServiceProcess`, a real
  process (`python -m baton.authority_http --keys DIR --store URL`) that alone
  opens the private key under `DIR/private/` (mode 0600 in a 0700 directory).

Either way the decision is the service's: it reads the caller's lease and
epoch from the store with the store's clock, takes the placement (and so its
ceiling) from its own catalog by name, requires an approval bound to the exact
artifact hash for external mutation, and binds the capability to one
idempotency key. The caller sends only what it asks for.

Callers authenticate (`baton.authority_callers`): the fleet provisions a
secret per worker, and the service answers only a caller that proves the
lease owner name it asks as. The same process hosts the approver role with a
key of its own (under `KEYS/approver/`, separate from the capability key): it
signs policy approvals for the exact artifact hash, and the service accepts
only approvals that verify under the approver's public keys.

HTTP: `POST /capabilities`, `POST /approvals`, `GET /keys` (the public JWKS),
`GET /approver-keys`, `GET /health`.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import httpx
from fastapi import FastAPI, Header
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from baton.parent_watch import detached_child, die_with_parent
from baton.ablation import warn_if_ablated
from baton.approval_policy import ApprovalRequest, PolicyApprover
from baton.approval_signing import sign_approval
from baton.authority import AuthorityService, Capability
from baton.authority_grants import MAX_USES
from baton.authority_callers import CALLER_ENV, CALLER_HEADER, CALLER_SECRET_ENV, CallerRegistry
from baton.authority_keys import JWKS_FILE, KeyRing, TrustedKeys
from baton.catalog.changes import current_placements
from baton.errors import AuthorityDeniedError, BatonError, CallerUnauthenticatedError, TargetUnavailableError
from baton.models.authority import Approval, AuthorityContext, AuthorityLevel
from baton.models.evidence import VerifierEvidence
from baton.models.placement import Placement
from baton.store.base import SqlStore
from baton.durable_files import append_line

PORT_FILE = "port"
APPROVER_DIR = "approver"
APPROVALS_FILE = "approvals.jsonl"
"""The approver's own record of every approval it signed (under `KEYS/approver/`): run, artifact, expiry."""
CALLERS_DIR = "callers"


class CapabilityRequest(BaseModel):
    """What a worker asks the authority for: one operation, for one key, on one artifact."""

    run_id: str = Field(min_length=1)
    epoch: int = Field(ge=0)
    owner: str = Field(min_length=1)
    operation: str = Field(min_length=1)
    artifact_hash: str | None = None
    level: AuthorityLevel
    placement: str = Field(min_length=1)
    context: AuthorityContext
    idempotency_key: str | None = None
    ttl_s: float | None = Field(default=None, gt=0)
    delegate_key: str | None = Field(default=None, description="ask for a grant to this Ed25519 key (authority_grants)")
    uses: int | None = Field(default=None, ge=1, le=MAX_USES, description="a grant's ceiling of delegated tokens")


class ApprovalAsk(BaseModel):
    """What a worker asks the approver for: one operation at one level on one exact artifact, with its evidence."""

    run_id: str = Field(min_length=1)
    owner: str = Field(min_length=1)
    operation: str = Field(min_length=1)
    artifact_hash: str = Field(min_length=1)
    level: AuthorityLevel
    evidence: list[VerifierEvidence]


class SigningApprover:
    """The approver role: policy decides, and the approver's own key (never the capability key) signs."""

    def __init__(self, ring: KeyRing, policy: PolicyApprover | None = None, *, record: Path | None = None) -> None:
        self._ring = ring
        self.policy = policy or PolicyApprover()
        self.record = record
        """Where the approver writes down each approval it signs (None: nowhere)."""

    def trusted_keys(self) -> TrustedKeys:
        return self._ring.trusted()

    def approve(self, store: SqlStore, ask: ApprovalAsk) -> Approval:
        """A signed approval for the lease holder's request, or AuthorityDeniedError."""
        lease = store.get_lease(ask.run_id)
        now = store.db_now()
        if lease.owner != ask.owner or not lease.held_at(now):
            raise AuthorityDeniedError(f"run {ask.run_id!r}: {ask.owner!r} does not hold a live lease; no approval")
        approval = self.policy.approve(ApprovalRequest(ask.run_id, ask.operation, ask.artifact_hash, ask.level,
                                                       tuple(ask.evidence), now))
        if approval is None:
            raise AuthorityDeniedError(f"policy refuses {ask.operation!r} at {ask.level.value} on {ask.artifact_hash}")
        signed = sign_approval(approval, self._ring.active)
        if self.record is not None:
            append_line(self.record, {"at": now.isoformat(), "run_id": ask.run_id, "approval_id": signed.approval_id,
                                      "operation": signed.operation, "artifact_hash": signed.artifact_hash,
                                      "level": signed.level.value, "expires_at": signed.expires_at.isoformat()})
        return signed


class AuthorityClient(Protocol):
    """How workers get capabilities; they never hold a signing key."""

    def request(self, ask: CapabilityRequest) -> Capability: ...

    def trusted_keys(self) -> TrustedKeys: ...


def decide(service: AuthorityService, store: SqlStore, placements: Mapping[str, Placement] | None,
           ask: CapabilityRequest) -> Capability:
    """The service's decision on one request (AuthorityDeniedError says which rule refused it).

    `placements` None: the placement is read from the store's catalog at this request, so an operator's change
    (a lowered ceiling) binds the next capability, not the next restart of the service.
    """
    catalog = placements if placements is not None else {p.name: p for p in current_placements(store)}
    placement = catalog.get(ask.placement)
    if placement is None:
        raise AuthorityDeniedError(f"placement {ask.placement!r} is not in the authority's catalog")
    return service.issue_checked(
        store, run_id=ask.run_id, epoch=ask.epoch, owner=ask.owner, operation=ask.operation,
        artifact_hash=ask.artifact_hash, level=ask.level, placement=placement, context=ask.context,
        idempotency_key=ask.idempotency_key, ttl_s=ask.ttl_s, delegate_key=ask.delegate_key, uses=ask.uses,
    )


class LocalAuthorityClient:
    """The authority service in this process, behind the same interface as the HTTP one."""

    def __init__(self, service: AuthorityService, store: SqlStore, placements: Mapping[str, Placement]) -> None:
        self._service = service
        self._store = store
        self._placements = dict(placements)

    def request(self, ask: CapabilityRequest) -> Capability:
        return decide(self._service, self._store, self._placements, ask)

    def trusted_keys(self) -> TrustedKeys:
        return self._service.trusted_keys()


class HttpAuthorityClient:
    """The authority service over HTTP on loopback."""

    approval_required_from = AuthorityLevel.EXTERNAL_MUTATE

    def __init__(self, base_url: str, *, caller: str | None = None, secret: str | None = None,
                 timeout_s: float = 5.0) -> None:
        """`caller` and `secret` default to the environment the supervisor gave this process."""
        self.base_url = base_url.rstrip("/")
        self.caller = caller or os.environ.get(CALLER_ENV, "")
        secret = secret or os.environ.get(CALLER_SECRET_ENV, "")
        headers = {CALLER_HEADER: self.caller} if self.caller else {}
        if secret:
            headers["authorization"] = f"Bearer {secret}"
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout_s, headers=headers)

    def close(self) -> None:
        self._http.close()

    def _post(self, path: str, body: BaseModel) -> dict[str, Any]:
        try:
            response = self._http.post(path, content=body.model_dump_json(), headers={"content-type": "application/json"})
        except httpx.HTTPError as exc:
            raise TargetUnavailableError(f"authority service at {self.base_url} did not answer: {exc!r}") from exc
        if response.status_code == 200:
            return dict(response.json())
        if response.status_code == 401:
            raise CallerUnauthenticatedError(str(response.json().get("message", "unauthenticated")))
        if response.status_code == 403:
            raise AuthorityDeniedError(str(response.json().get("message", "denied")))
        raise TargetUnavailableError(f"authority service: HTTP {response.status_code}: {response.text[:200]}")

    def request(self, ask: CapabilityRequest) -> Capability:
        """A capability, or AuthorityDeniedError (CallerUnauthenticatedError) with the service's reason."""
        return Capability.model_validate(self._post("/capabilities", ask))

    def approve(self, ask: ApprovalAsk) -> Approval:
        """An approval signed by the service's approver role, or AuthorityDeniedError."""
        return Approval.model_validate(self._post("/approvals", ask))

    def trusted_keys(self) -> TrustedKeys:
        """The public keys the service signs with now (and retired ones still in their overlap)."""
        response = self._http.get("/keys")
        response.raise_for_status()
        return TrustedKeys.from_jwks(response.json())


def _bearer(authorization: str | None) -> str | None:
    if authorization and authorization.lower().startswith("bearer "):
        return authorization[7:].strip() or None
    return None


def _refusal(exc: BatonError) -> JSONResponse:
    if isinstance(exc, CallerUnauthenticatedError):
        return JSONResponse(status_code=401, content={"error": "unauthenticated", "message": str(exc)})
    error = "denied" if isinstance(exc, AuthorityDeniedError) else type(exc).__name__
    return JSONResponse(status_code=403, content={"error": error, "message": str(exc)})


def create_app(
    service: AuthorityService,
    store: SqlStore,
    placements: Mapping[str, Placement] | None,
    *,
    callers: CallerRegistry,
    approver: SigningApprover | None = None,
) -> FastAPI:
    """The HTTP face of `service`: every request must authenticate as the lease owner it asks as."""
    app = FastAPI(title="baton authority")

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok", "kid": service.active_kid}

    @app.get("/keys")
    def keys() -> dict[str, Any]:
        return service.trusted_keys().to_jwks()

    @app.get("/approver-keys")
    def approver_keys() -> dict[str, Any]:
        return (approver.trusted_keys() if approver is not None else TrustedKeys()).to_jwks()

    @app.post("/capabilities", response_model=None)
    def capabilities(
        ask: CapabilityRequest,
        x_baton_caller: str | None = Header(default=None),
        authorization: str | None = Header(default=None),
    ) -> dict[str, Any] | JSONResponse:
        try:
            callers.bind(x_baton_caller, _bearer(authorization), ask.owner)
            capability = decide(service, store, placements, ask)
        except BatonError as exc:
            return _refusal(exc)
        return capability.model_dump(mode="json")

    @app.post("/approvals", response_model=None)
    def approvals(
        ask: ApprovalAsk,
        x_baton_caller: str | None = Header(default=None),
        authorization: str | None = Header(default=None),
    ) -> dict[str, Any] | JSONResponse:
        try:
            callers.bind(x_baton_caller, _bearer(authorization), ask.owner)
            if approver is None:
                raise AuthorityDeniedError("this authority hosts no approver")
            approval = approver.approve(store, ask)
        except BatonError as exc:
            return _refusal(exc)
        return approval.model_dump(mode="json")

    return app


class AuthorityServiceProcess:
    """The authority service as a subprocess on a free loopback port; keys under `keys_dir`."""

    def __init__(self, keys_dir: Path, store_url: str, *, catalog: Path | None = None,
                 approval_ttl_s: float | None = None) -> None:
        self.keys_dir = Path(keys_dir)
        self.store_url = store_url
        self.catalog = catalog
        self.approval_ttl_s = approval_ttl_s
        """How long the approvals its approver signs last (None: the policy's default)."""
        self.url = ""
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def jwks_path(self) -> Path:
        """The public key set (readable by workers and targets)."""
        return self.keys_dir / JWKS_FILE

    @property
    def approver_jwks_path(self) -> Path:
        """The approver's public keys (what resume and bundle import trust for approvals)."""
        return self.keys_dir / APPROVER_DIR / JWKS_FILE

    @property
    def callers(self) -> CallerRegistry:
        return CallerRegistry(self.keys_dir / CALLERS_DIR)

    def provision(self, caller: str) -> str:
        """A secret that authenticates `caller` (a lease owner name) to this authority; give it to that process only."""
        return self.callers.provision(caller)

    def start(self, timeout_s: float = 30.0, *, detached: bool = False) -> AuthorityServiceProcess:
        """Create the keys if needed (in this parent, before any worker starts), start, wait for /health.

        `detached`: in its own process group, stopped only by this process (`baton.parent_watch`)."""
        KeyRing.load_or_create(self.keys_dir)
        KeyRing.load_or_create(self.keys_dir / APPROVER_DIR)
        self.callers.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        port_file = self.keys_dir / PORT_FILE
        port_file.unlink(missing_ok=True)
        command = [sys.executable, "-m", "baton.authority_http", "--keys", str(self.keys_dir), "--store", self.store_url]
        if self.catalog is not None:
            command += ["--catalog", str(self.catalog)]
        if self.approval_ttl_s is not None:
            command += ["--approval-ttl", str(self.approval_ttl_s)]
        log = open(self.keys_dir / "service.log", "ab")  # noqa: SIM115 - handed to the child
        self._proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                      **(detached_child() if detached else {}))
        log.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"authority exited with {self._proc.returncode}; see {self.keys_dir / 'service.log'}")
            if port_file.exists():
                self.url = f"http://127.0.0.1:{int(port_file.read_text())}"
                try:
                    if httpx.get(self.url + "/health", timeout=1.0).status_code == 200:
                        return self
                except httpx.HTTPError:
                    pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"authority service did not start within {timeout_s}s")

    def client(self, caller: str | None = None) -> HttpAuthorityClient:
        """A client authenticated as `caller` (provisioned now), or with the environment's credentials."""
        if caller is None:
            return HttpAuthorityClient(self.url)
        return HttpAuthorityClient(self.url, caller=caller, secret=self.provision(caller))

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)

    def __enter__(self) -> AuthorityServiceProcess:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    """Serve the authority on a free loopback port, written to `KEYS/port`."""
    import uvicorn

    die_with_parent()
    from baton.placements import load_placements
    from baton.store.factory import open_store

    parser = argparse.ArgumentParser(description="Baton's authority service")
    parser.add_argument("--keys", required=True, type=Path, help="directory of the signing keys (only this process reads it)")
    parser.add_argument("--store", required=True, help="the SQL store URL whose leases the service checks")
    parser.add_argument("--catalog", type=Path, default=None,
                        help="placement catalog JSON, read once (default: the store's catalog, read at each request)")
    parser.add_argument("--max-ttl", type=float, default=300.0, help="longest capability lifetime, seconds")
    parser.add_argument("--approval-ttl", type=float, default=PolicyApprover.ttl_s,
                        help="how long an approval the approver signs lasts, seconds")
    args = parser.parse_args(argv)
    if args.approval_ttl <= 0:
        parser.error("--approval-ttl must be positive")
    warn_if_ablated("authority service")
    approver = SigningApprover(KeyRing.load_or_create(args.keys / APPROVER_DIR), PolicyApprover(ttl_s=args.approval_ttl),
                               record=args.keys / APPROVER_DIR / APPROVALS_FILE)
    # Only approvals the approver's key signed count: an unsigned or forged one is no approval at all.
    service = AuthorityService(KeyRing.load_or_create(args.keys), max_ttl_s=args.max_ttl,
                               approvers=TrustedKeys.load(args.keys / APPROVER_DIR / JWKS_FILE))
    store = open_store(args.store)
    placements = None if args.catalog is None else {p.name: p for p in load_placements(args.catalog)}
    app = create_app(service, store, placements, callers=CallerRegistry(args.keys / CALLERS_DIR), approver=approver)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    staging = args.keys / (PORT_FILE + ".tmp")
    staging.write_text(str(sock.getsockname()[1]))
    os.replace(staging, args.keys / PORT_FILE)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", timeout_graceful_shutdown=1)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
