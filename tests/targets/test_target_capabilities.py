"""The ledger target checks capabilities itself: every refusal has its own error, is in its own records, applies nothing."""

from __future__ import annotations

import base64
import datetime as dt
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from baton.authority import AuthorityService, Capability
from baton.authority_keys import KeyRing
from baton.errors import TargetRejectedError
from baton.fencing import FencingToken
from baton.identity import ref_of
from baton.models import Approval, AuthorityContext, AuthorityLevel, EnvironmentIdentity, Placement, RunKind
from baton.store.base import SqlStore
from baton.store.records import Lease
from baton.store.sqlite import SqliteStore
from baton.targets.capability_guard import TargetPolicy
from baton.targets.ledger_target import LedgerTargetClient, LedgerTargetProcess, read_effects, read_requests

L = AuthorityLevel
OPERATION = "ledger.append"
ARTIFACT = ref_of({"artifact": "entry-1"})
OTHER_ARTIFACT = ref_of({"artifact": "entry-2"})
PLACEMENT = Placement(
    name="enclave", region="eu", provider="local", authority_ceiling=L.EXTERNAL_MUTATE,
    environment=EnvironmentIdentity(placement="enclave", region="eu", provider="local", runtime_image="w:1"),
)


@pytest.fixture
def keys_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "authority"
    KeyRing.generate().save(directory)
    return directory


@pytest.fixture
def authority(keys_dir: Path) -> AuthorityService:
    return AuthorityService(KeyRing.load(keys_dir))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlStore]:
    opened = SqliteStore(tmp_path / "baton.db")
    yield opened
    opened.close()


@pytest.fixture
def ledger(tmp_path: Path, keys_dir: Path) -> Iterator[LedgerTargetProcess]:
    policy = TargetPolicy(operation=OPERATION, level=L.EXTERNAL_MUTATE, artifact_field="artifact")
    with LedgerTargetProcess(tmp_path / "ledger", trust=keys_dir / "jwks.json", policy=policy) as process:
        yield process


def _run(store: SqlStore, run_id: str = "run-1") -> Lease:
    store.create_run(run_id, RunKind.DEPLOY, ref_of({"release": 1}), "enclave")
    lease = store.acquire_lease(run_id, "w1", 60.0, expected_epoch=0)
    assert lease is not None
    return lease


def _context(store: SqlStore, artifact: str = ARTIFACT) -> AuthorityContext:
    approval = Approval(approval_id="a-1", operation=OPERATION, artifact_hash=artifact, level=L.EXTERNAL_MUTATE,
                        approved_by="release-manager", expires_at=store.db_now() + dt.timedelta(hours=1))
    return AuthorityContext(level=L.EXTERNAL_MUTATE, policy_id="p", approvals=(approval,))


def _cap(authority: AuthorityService, store: SqlStore, lease: Lease, *, key: str = "k-1", operation: str = OPERATION,
         artifact: str = ARTIFACT, level: AuthorityLevel = L.EXTERNAL_MUTATE, ttl_s: float | None = None) -> Capability:
    context = _context(store, artifact)
    if operation != OPERATION:
        context = context.model_copy(update={"approvals": (context.approvals[0].model_copy(update={"operation": operation}),)})
    return authority.issue_checked(store, run_id=lease.run_id, epoch=lease.epoch, owner="w1", operation=operation,
                                   artifact_hash=artifact, level=level, placement=PLACEMENT, context=context,
                                   idempotency_key=key, ttl_s=ttl_s)


def _apply(client: LedgerTargetClient, lease: Lease, capability: str | None, *, key: str = "k-1",
           artifact: str = ARTIFACT, epoch: int | None = None, op: str = "op-1") -> dict:
    token = FencingToken(lease.run_id, lease.epoch if epoch is None else epoch, capability)
    return client.apply(op, key, token, {"artifact": artifact, "amount": 5})


def _refused(ledger: LedgerTargetProcess, lease: Lease, capability: str | None, reason: str, **call: object) -> None:
    with ledger.client() as client, pytest.raises(TargetRejectedError) as refused:
        _apply(client, lease, capability, **call)  # type: ignore[arg-type]
    assert refused.value.reason == f"capability:{reason}", str(refused.value)
    assert read_effects(ledger.directory) == []  # nothing applied: the target's own file says so
    assert read_requests(ledger.directory)[-1]["result"] == f"capability:{reason}"


def test_a_direct_call_without_a_capability_is_refused_at_the_target(ledger: LedgerTargetProcess, store: SqlStore) -> None:
    _refused(ledger, _run(store), None, "no_capability")


def test_a_capability_for_another_run_epoch_operation_key_or_artifact_is_refused(
    ledger: LedgerTargetProcess, store: SqlStore, authority: AuthorityService
) -> None:
    lease, other = _run(store), _run(store, "run-2")
    _refused(ledger, lease, _cap(authority, store, other).token, "wrong_run")
    _refused(ledger, lease, _cap(authority, store, lease).token, "wrong_epoch", epoch=lease.epoch + 1)
    _refused(ledger, lease, _cap(authority, store, lease, operation="ledger.delete").token, "wrong_operation")
    _refused(ledger, lease, _cap(authority, store, lease, key="k-other").token, "wrong_key")
    _refused(ledger, lease, _cap(authority, store, lease).token, "wrong_artifact", artifact=OTHER_ARTIFACT)


def test_an_expired_capability_is_refused(ledger: LedgerTargetProcess, store: SqlStore, authority: AuthorityService) -> None:
    lease = _run(store)
    capability = _cap(authority, store, lease, ttl_s=0.05)
    deadline = time.monotonic() + 30
    while dt.datetime.now(dt.timezone.utc) <= capability.claims.expires_at and time.monotonic() < deadline:
        time.sleep(0.01)
    _refused(ledger, lease, capability.token, "expired")


def test_a_capability_signed_by_an_untrusted_key_is_refused(ledger: LedgerTargetProcess, store: SqlStore) -> None:
    lease = _run(store)
    impostor = AuthorityService(KeyRing.generate())  # a key a worker could make for itself
    _refused(ledger, lease, _cap(impostor, store, lease).token, "untrusted_key")


def _widen(token: str, **claims: object) -> str:
    header, payload, signature = token.split(".")
    body = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    body.update(claims)
    edited = base64.urlsafe_b64encode(json.dumps(body).encode()).rstrip(b"=").decode()
    return f"{header}.{edited}.{signature}"


def test_a_widened_level_is_refused(ledger: LedgerTargetProcess, store: SqlStore, authority: AuthorityService) -> None:
    lease = _run(store)
    sandbox = _cap(authority, store, lease, level=L.SANDBOX_MUTATE).token
    _refused(ledger, lease, sandbox, "insufficient_level")
    _refused(ledger, lease, _widen(sandbox, level="EXTERNAL_MUTATE"), "forged")


def test_a_fitting_capability_applies_once(ledger: LedgerTargetProcess, store: SqlStore, authority: AuthorityService) -> None:
    lease = _run(store)
    capability = _cap(authority, store, lease)
    with ledger.client() as client:
        assert _apply(client, lease, capability.token)["status"] == "applied"
        assert _apply(client, lease, capability.token)["status"] == "replayed"
    assert len(read_effects(ledger.directory)) == 1


def test_rotation_keeps_the_old_key_for_its_overlap_only(
    ledger: LedgerTargetProcess, store: SqlStore, keys_dir: Path
) -> None:
    lease = _run(store)
    ring = KeyRing.load(keys_dir)
    before = _cap(AuthorityService(ring), store, lease, key="k-old")
    rotated = ring.rotate(store.db_now(), overlap_s=3600)
    rotated.save(keys_dir)
    after = _cap(AuthorityService(rotated), store, lease, key="k-new")
    assert after.claims.kid != before.claims.kid
    with ledger.client() as client:
        assert _apply(client, lease, after.token, key="k-new", op="op-new")["status"] == "applied"  # new kid: reloaded
        assert _apply(client, lease, before.token, key="k-old", op="op-old")["status"] == "applied"  # within overlap
    closed = rotated.rotate(store.db_now(), overlap_s=3600)
    closed = KeyRing(closed.active, tuple(k if k.kid != before.claims.kid else
                                          type(k)(k.kid, k.key, store.db_now() - dt.timedelta(seconds=1))
                                          for k in closed.retired))
    closed.save(keys_dir)
    late = _cap(AuthorityService(ring), store, lease, key="k-late")
    with ledger.client() as client, pytest.raises(TargetRejectedError) as refused:
        _apply(client, lease, late.token, key="k-late", op="op-late")
    assert refused.value.reason in {"capability:retired_key"}


def test_the_target_admits_a_delegated_token_and_refuses_a_forged_or_bare_grant(
    ledger: LedgerTargetProcess, store: SqlStore, authority: AuthorityService
) -> None:
    from baton.authority_grants import Delegate

    lease = _run(store)
    delegate = Delegate()
    grant = authority.issue_checked(store, run_id=lease.run_id, epoch=lease.epoch, owner="w1", operation=OPERATION,
                                    artifact_hash=ARTIFACT, level=L.EXTERNAL_MUTATE, placement=PLACEMENT,
                                    context=_context(store), delegate_key=delegate.public_x, uses=10)
    expiry = grant.claims.expires_at.timestamp()
    _refused(ledger, lease, grant.token, "undelegated_grant")
    _refused(ledger, lease, Delegate().mint(grant.token, idempotency_key="k-1", use=0, expires_at=expiry).token,
             "forged")
    _refused(ledger, lease, delegate.mint(grant.token, idempotency_key="k-2", use=0, expires_at=expiry).token,
             "wrong_key")
    token = delegate.mint(grant.token, idempotency_key="k-1", use=1, expires_at=expiry).token
    with ledger.client() as client:
        assert _apply(client, lease, token)["status"] == "applied"
    assert len(read_effects(ledger.directory)) == 1
