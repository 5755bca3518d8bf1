"""Delegated capabilities: one grant from the authority, a key-bound token per mutation, every misuse refused."""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Iterator
from pathlib import Path

import jwt
import pytest

from baton.authority import AuthorityService, Capability
from baton.authority_delegation import DelegatingAuthorityClient
from baton.authority_grants import DELEGATED_TYPE, Delegate
from baton.authority_http import CapabilityRequest, LocalAuthorityClient
from baton.checker import check
from baton.errors import AuthorityDeniedError, CapabilityError
from baton.gateway import MutationGateway
from baton.history import ListHistory
from baton.models import AuthorityLevel
from baton.ownership import Coordinator
from baton.store.records import Lease
from baton.store.sqlite import SqliteStore
from baton.targets.ledger_target import LedgerTargetProcess

from builders.authority import ARTIFACT, OPERATION, OTHER_ARTIFACT, TARGET, context, new_run, placement, request

NOW = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.timezone.utc)
L = AuthorityLevel


def _lease(epoch: int = 3, valid_s: float = 60.0) -> Lease:
    return Lease(run_id="run-a", owner="worker", epoch=epoch, expires_at=NOW + dt.timedelta(seconds=valid_s))


def _grant(service: AuthorityService, delegate: Delegate, **overrides: object) -> Capability:
    args: dict[str, object] = {
        "run_id": "run-a", "epoch": 3, "operation": OPERATION, "artifact_hash": ARTIFACT, "level": L.EXTERNAL_MUTATE,
        "lease": _lease(), "placement": placement(), "context": context(NOW), "now": NOW,
        "delegate_key": delegate.public_x, "uses": 3,
    }
    args.update(overrides)
    return service.issue(**args)  # type: ignore[arg-type]


def _mint(delegate: Delegate, grant: Capability, key: str = "k-1", use: int = 0, expires_at: float | None = None) -> str:
    exp = grant.claims.expires_at.timestamp() if expires_at is None else expires_at
    return delegate.mint(grant.token, idempotency_key=key, use=use, expires_at=exp, now=NOW.timestamp()).token


def _verify(service: AuthorityService, token: str, **overrides: object):  # type: ignore[no-untyped-def]
    args: dict[str, object] = {
        "run_id": "run-a", "epoch": 3, "operation": OPERATION, "artifact_hash": ARTIFACT, "idempotency_key": "k-1",
        "required_level": L.EXTERNAL_MUTATE, "now": NOW + dt.timedelta(seconds=1), "require_key": True,
    }
    args.update(overrides)
    return service.verify(token, **args)  # type: ignore[arg-type]


def _reason(service: AuthorityService, token: str, **overrides: object) -> str:
    with pytest.raises(CapabilityError) as refused:
        _verify(service, token, **overrides)
    return refused.value.reason


# --- the token shape ----------------------------------------------------------------------------


def test_a_delegated_token_carries_the_grants_scope_bound_to_one_key() -> None:
    service, delegate = AuthorityService(secrets.token_bytes(32)), Delegate()
    grant = _grant(service, delegate, lease=_lease(valid_s=20))
    assert grant.claims.delegate_key == delegate.public_x and grant.claims.idempotency_key is None
    claims = _verify(service, _mint(delegate, grant))
    assert (claims.run_id, claims.epoch, claims.operation, claims.artifact_hash, claims.idempotency_key) == (
        "run-a", 3, OPERATION, ARTIFACT, "k-1")
    assert claims.grant_id == grant.claims.capability_id and claims.capability_id != grant.claims.capability_id
    assert claims.delegate_key is None
    assert claims.expires_at == NOW + dt.timedelta(seconds=20)  # the grant's, clamped to the lease
    sooner = _mint(delegate, grant, expires_at=(NOW + dt.timedelta(seconds=5)).timestamp())
    assert _verify(service, sooner).expires_at == NOW + dt.timedelta(seconds=5)  # the token's own, if sooner
    later = _mint(delegate, grant, expires_at=(NOW + dt.timedelta(hours=5)).timestamp())
    assert _verify(service, later).expires_at == NOW + dt.timedelta(seconds=20)  # never past the grant
    assert "key=<hidden>" in repr(delegate)


def test_a_grant_on_its_own_is_no_capability() -> None:
    service, delegate = AuthorityService(secrets.token_bytes(32)), Delegate()
    grant = _grant(service, delegate)
    assert _reason(service, grant.token) == "undelegated_grant"
    assert _reason(service, grant.token, require_key=False, idempotency_key=None) == "undelegated_grant"


def test_forged_delegated_tokens_are_refused() -> None:
    service, delegate = AuthorityService(secrets.token_bytes(32)), Delegate()
    grant = _grant(service, delegate)
    assert _reason(service, _mint(Delegate(), grant)) == "forged"  # signed by a key the grant does not name
    stranger = AuthorityService(secrets.token_bytes(32))
    assert _reason(service, _mint(delegate, _grant(stranger, delegate))) == "untrusted_key"  # a grant we never issued
    widened = jwt.encode({**jwt.decode(grant.token, options={"verify_signature": False}), "level": "EXTERNAL_MUTATE",
                          "uses": 10**4}, "x" * 32, algorithm="HS256")
    assert _reason(service, _mint(delegate, Capability.model_construct(token=widened, claims=grant.claims))) == "forged"
    ordinary = service.issue(run_id="run-a", epoch=3, operation=OPERATION, artifact_hash=ARTIFACT, level=L.EXTERNAL_MUTATE,
                             lease=_lease(), placement=placement(), context=context(NOW), now=NOW)
    assert _reason(service, _mint(delegate, ordinary)) == "forged"  # an ordinary capability grants nothing
    tampered = _mint(delegate, grant).split(".")
    other = _mint(delegate, grant, key="k-2").split(".")
    assert _reason(service, ".".join((tampered[0], other[1], tampered[2]))) == "forged"  # payload swapped
    assert _reason(service, "not-a-token") == "malformed"
    no_grant = jwt.encode({"key": "k-1"}, "x" * 32, algorithm="HS256", headers={"typ": DELEGATED_TYPE})
    assert _reason(service, no_grant) == "malformed"


def test_expired_wrong_epoch_wrong_scope_and_spent_delegated_tokens_are_refused() -> None:
    service, delegate = AuthorityService(secrets.token_bytes(32)), Delegate()
    grant = _grant(service, delegate, lease=_lease(valid_s=20))
    token = _mint(delegate, grant)
    assert _reason(service, token, now=NOW + dt.timedelta(seconds=20)) == "expired"
    short = _mint(delegate, grant, expires_at=(NOW + dt.timedelta(seconds=2)).timestamp())
    assert _reason(service, short, now=NOW + dt.timedelta(seconds=3)) == "expired"
    assert _reason(service, token, epoch=4) == "wrong_epoch"
    assert _reason(service, token, run_id="run-b") == "wrong_run"
    assert _reason(service, token, operation="rollback") == "wrong_operation"
    assert _reason(service, token, artifact_hash=OTHER_ARTIFACT) == "wrong_artifact"
    assert _reason(service, token, idempotency_key="k-2") == "wrong_key"
    assert _reason(service, token, ceiling=L.SANDBOX_MUTATE) == "above_ceiling"
    assert _verify(service, _mint(delegate, grant, use=2)).uses == 3  # uses 0, 1 and 2 of 3
    assert _reason(service, _mint(delegate, grant, use=3)) == "uses_exhausted"


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        ({"idempotency_key": "k-1"}, "names no idempotency key"),
        ({"uses": None}, "ceiling of 1 to"),
        ({"uses": 0}, "ceiling of 1 to"),
        ({"delegate_key": "not-a-key"}, "malformed delegate key"),
        ({"delegate_key": None, "uses": 5}, "name the delegate key"),
        ({"lease": _lease(epoch=2)}, "does not hold a live lease"),
        ({"placement": placement(ceiling=L.VERIFY)}, "ceiling VERIFY"),
    ],
)
def test_the_authority_refuses_a_bad_grant_request(overrides: dict[str, object], needle: str) -> None:
    with pytest.raises(AuthorityDeniedError, match=needle):
        _grant(AuthorityService(secrets.token_bytes(32)), Delegate(), **overrides)


def test_minting_needs_a_key_and_a_use_index() -> None:
    delegate, grant = Delegate(), "g"
    with pytest.raises(ValueError, match="idempotency key"):
        delegate.mint(grant, idempotency_key="", use=0, expires_at=1.0)
    with pytest.raises(ValueError, match="negative"):
        delegate.mint(grant, idempotency_key="k", use=-1, expires_at=1.0)


# --- the worker's client ------------------------------------------------------------------------


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[SqliteStore]:
    opened = SqliteStore(tmp_path / "baton.db")
    yield opened
    opened.close()


def _ask(lease: Lease, store: SqliteStore, key: str | None) -> CapabilityRequest:
    return CapabilityRequest(run_id=lease.run_id, epoch=lease.epoch, owner=str(lease.owner), operation=OPERATION,
                             artifact_hash=ARTIFACT, level=L.EXTERNAL_MUTATE, placement=placement().name,
                             context=context(store.db_now()), idempotency_key=key)


def test_the_client_asks_once_per_scope_and_again_when_spent_near_expiry_or_at_a_new_epoch(
    sqlite_store: SqliteStore,
) -> None:
    service = AuthorityService(secrets.token_bytes(32))
    run_id = new_run(sqlite_store)
    coordinator = Coordinator(sqlite_store)
    lease = coordinator.grant(run_id, "w1", ttl_s=60)
    assert lease is not None
    local = LocalAuthorityClient(service, sqlite_store, {placement().name: placement()})
    clock = [sqlite_store.db_now()]
    client = DelegatingAuthorityClient(local, uses=4, refresh_margin_s=2.0, now=lambda: clock[0])
    ask = _ask(lease, sqlite_store, None)
    tokens = [client.request(ask.model_copy(update={"idempotency_key": f"k-{n}"})) for n in range(4)]
    assert client.grants_requested == 1
    assert len({t.claims.grant_id for t in tokens}) == 1 and [t.claims.idempotency_key for t in tokens][-1] == "k-3"
    for n, cap in enumerate(tokens):  # each verifies as issued, bound to its own key
        assert service.verify(cap.token, run_id=run_id, epoch=lease.epoch, operation=OPERATION, artifact_hash=ARTIFACT,
                              required_level=L.EXTERNAL_MUTATE, idempotency_key=f"k-{n}", require_key=True,
                              now=sqlite_store.db_now()).capability_id == cap.claims.capability_id
    client.request(ask.model_copy(update={"idempotency_key": "k-4"}))
    assert client.grants_requested == 2  # the first grant's 4 uses were spent
    clock[0] = tokens[0].claims.expires_at - dt.timedelta(seconds=1)
    client.request(ask.model_copy(update={"idempotency_key": "k-5"}))
    assert client.grants_requested == 3  # within the margin of the grant's expiry
    unkeyed = client.request(ask)
    assert unkeyed.claims.delegate_key is None and unkeyed.claims.grant_id is None  # not through a grant
    assert client.grants_requested == 3
    moved = coordinator.grant(run_id, "w2", ttl_s=60, force=True)
    assert moved is not None
    with pytest.raises(AuthorityDeniedError, match="does not hold the lease"):
        client.request(_ask(moved, sqlite_store, "k-6").model_copy(update={"owner": "w1"}))  # a new scope: asked
    with pytest.raises(ValueError, match="at least one use"):
        DelegatingAuthorityClient(local, uses=0)


# --- at the gateway and the target --------------------------------------------------------------


@pytest.mark.integration
def test_the_gateway_applies_delegated_tokens_once_and_fences_a_stale_holder(
    sqlite_store: SqliteStore, ledger_service: LedgerTargetProcess
) -> None:
    store, service = sqlite_store, AuthorityService(secrets.token_bytes(32))
    run_id = new_run(store)
    history = ListHistory()
    target = ledger_service.client()
    coordinator = Coordinator(store, history=history)
    lease = coordinator.grant(run_id, "w1", ttl_s=60, fence_targets=[target])
    assert lease is not None
    client = DelegatingAuthorityClient(LocalAuthorityClient(service, store, {placement().name: placement()}))
    gateway = MutationGateway(store, service.verifier, {TARGET: target}, history=history, ceiling=L.EXTERNAL_MUTATE)
    ask = _ask(lease, store, None)
    for n in range(3):
        cap = client.request(ask.model_copy(update={"idempotency_key": f"k-{n}"}))
        assert not gateway.submit(request(lease, cap, f"k-{n}", {"n": n}, process="w1")).replayed
    again = client.request(ask.model_copy(update={"idempotency_key": "k-0"}))
    assert gateway.submit(request(lease, again, "k-0", {"n": 0}, process="w1")).replayed
    with pytest.raises(CapabilityError) as refused:  # a token for one key does not carry another
        gateway.submit(request(lease, again, "k-9", {"n": 9}, process="w1"))
    assert refused.value.reason == "wrong_key"
    assert client.grants_requested == 1
    moved = coordinator.grant(run_id, "w2", ttl_s=60, force=True, fence_targets=[target])
    assert moved is not None
    from baton.errors import StaleEpochError

    stale = client.request(ask.model_copy(update={"idempotency_key": "k-late"}))  # minted locally, still in time
    with pytest.raises(StaleEpochError):
        gateway.submit(request(lease, stale, "k-late", {"n": 7}, process="w1"))
    assert len([e for e in ledger_service.effects() if e.run_id == run_id]) == 3
    assert check(history.ops, store.list_operations(run_id), ledger_service.effects()) == []
