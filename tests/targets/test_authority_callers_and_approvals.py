"""The live authority process: it answers only callers who prove their lease owner name, and counts only signed approvals.

The oracle throughout is what the real authority process returns (a token
that the public keys verify, or a refusal), and for the ablations the same
request answered by the same HTTP app with the one check taken out.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from baton.approval_signing import sign_approval, verify_approval
from baton.authority import AuthorityService, CapabilityVerifier
from baton.authority_callers import CALLER_HEADER, CallerRegistry
from baton.authority_http import (
    APPROVER_DIR,
    AuthorityServiceProcess,
    CapabilityRequest,
    HttpAuthorityClient,
    SigningApprover,
    create_app,
)
from baton.authority_keys import KeyRing, TrustedKeys
from baton.errors import AuthorityDeniedError, CallerUnauthenticatedError
from baton.identity import ref_of
from baton.models import Approval, AuthorityContext, AuthorityLevel, RunKind, VerdictResult, VerifierEvidence
from baton.placements import load_placements
from baton.runtime.approvals import ApprovalRequest, AuthorityApprover
from baton.store.sqlite import SqliteStore

ARTIFACT = ref_of({"artifact": "release-7"})
OWNER = "worker:w1.0"
OTHER = "worker:w2.0"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    db = SqliteStore(tmp_path / "baton.db")
    db.create_run("run-1", RunKind.DEPLOY, ref_of({"release": 7}), "cloud-eu")
    assert db.acquire_lease("run-1", OWNER, 600.0, expected_epoch=0) is not None
    db.create_run("run-2", RunKind.DEPLOY, ref_of({"release": 7}), "cloud-eu")
    assert db.acquire_lease("run-2", OTHER, 600.0, expected_epoch=0) is not None
    yield db
    db.close()


@pytest.fixture
def authority(tmp_path: Path, store: SqliteStore) -> Iterator[AuthorityServiceProcess]:
    with AuthorityServiceProcess(tmp_path / "authority", f"sqlite:///{tmp_path / 'baton.db'}") as process:
        yield process


def _approval(store: SqliteStore, **changes: object) -> Approval:
    fields: dict[str, object] = {
        "approval_id": "appr-1", "operation": "deploy", "artifact_hash": ARTIFACT,
        "level": AuthorityLevel.EXTERNAL_MUTATE, "approved_by": "policy:verified-artifacts",
        "expires_at": store.db_now() + dt.timedelta(hours=1),
    }
    fields.update(changes)
    return Approval.model_validate(fields)


def _ask(store: SqliteStore, approval: Approval, *, run_id: str = "run-1", owner: str = OWNER) -> CapabilityRequest:
    return CapabilityRequest(
        run_id=run_id, epoch=store.get_lease(run_id).epoch, owner=owner, operation="deploy", artifact_hash=ARTIFACT,
        level=AuthorityLevel.EXTERNAL_MUTATE, placement="cloud-eu", idempotency_key="k-1",
        context=AuthorityContext(level=AuthorityLevel.EXTERNAL_MUTATE, policy_id="p", approvals=(approval,)),
    )


def _evidence(store: SqliteStore, result: VerdictResult = VerdictResult.PASS) -> VerifierEvidence:
    return VerifierEvidence(candidate_hash=ARTIFACT, verifier_version="v1", result=result, verified_at=store.db_now())


# --- approvals -----------------------------------------------------------------------------------


def test_the_approver_role_signs_approvals_that_the_authority_accepts(
    authority: AuthorityServiceProcess, store: SqliteStore
) -> None:
    client = authority.client(OWNER)
    approver = AuthorityApprover(client, OWNER)
    approval = approver.approve(ApprovalRequest("run-1", "deploy", ARTIFACT, AuthorityLevel.EXTERNAL_MUTATE,
                                                (_evidence(store),), store.db_now()))
    assert approval is not None and approval.signature and approval.artifact_hash == ARTIFACT
    approvers = TrustedKeys.load(authority.approver_jwks_path)
    assert verify_approval(approval, approvers, operation="deploy", artifacts=(ARTIFACT,)) == approval
    # Signed by the approver's key, which is not the capability key: the capability verifier does not know it.
    capability_keys = TrustedKeys.load(authority.jwks_path)
    assert approval.approver_kid not in capability_keys.keys
    capability = client.request(_ask(store, approval))
    claims = CapabilityVerifier(capability_keys).verify(
        capability.token, run_id="run-1", epoch=store.get_lease("run-1").epoch, operation="deploy",
        artifact_hash=ARTIFACT, required_level=AuthorityLevel.EXTERNAL_MUTATE, idempotency_key="k-1",
    )
    assert claims.expires_at <= approval.expires_at
    # Policy still decides: failing evidence gets no approval, and neither does a caller without the lease.
    assert approver.approve(ApprovalRequest("run-1", "deploy", ARTIFACT, AuthorityLevel.EXTERNAL_MUTATE,
                                            (_evidence(store, VerdictResult.FAIL),), store.db_now())) is None
    other = AuthorityApprover(authority.client(OTHER), OTHER)
    assert other.approve(ApprovalRequest("run-1", "deploy", ARTIFACT, AuthorityLevel.EXTERNAL_MUTATE,
                                         (_evidence(store),), store.db_now())) is None
    client.close()


def test_unsigned_forged_and_altered_approvals_get_no_capability(
    authority: AuthorityServiceProcess, store: SqliteStore
) -> None:
    client = authority.client(OWNER)
    genuine = sign_approval(_approval(store), KeyRing.load(authority.keys_dir / APPROVER_DIR).active)
    refused = {
        "unsigned": _approval(store),
        "forged": sign_approval(_approval(store), KeyRing.generate().active),
        "signed with the capability key": sign_approval(_approval(store), KeyRing.load(authority.keys_dir).active),
        "altered after signing": genuine.model_copy(update={"expires_at": genuine.expires_at + dt.timedelta(days=30)}),
        "re-pointed at another artifact": genuine.model_copy(update={"artifact_hash": ref_of({"artifact": "x"})}),
    }
    for what, approval in refused.items():
        with pytest.raises(AuthorityDeniedError, match="needs an unexpired approval") as caught:
            client.request(_ask(store, approval))
        assert not isinstance(caught.value, CallerUnauthenticatedError), what
    assert client.request(_ask(store, genuine)).claims.run_id == "run-1"
    client.close()


def test_ablation_without_approver_keys_an_unsigned_approval_buys_external_mutation(store: SqliteStore) -> None:
    """The refusal above is the approver-key check: the same service without it issues on an unsigned approval."""
    placement = next(p for p in load_placements(None) if p.name == "cloud-eu")
    ask = _ask(store, _approval(store))
    kwargs = {"run_id": "run-1", "epoch": ask.epoch, "owner": OWNER, "operation": "deploy", "artifact_hash": ARTIFACT,
              "level": AuthorityLevel.EXTERNAL_MUTATE, "placement": placement, "context": ask.context}
    ring, approver = KeyRing.generate(), KeyRing.generate()
    assert AuthorityService(ring).issue_checked(store, **kwargs).claims.run_id == "run-1"
    with pytest.raises(AuthorityDeniedError, match="needs an unexpired approval"):
        AuthorityService(ring, approvers=approver.trusted()).issue_checked(store, **kwargs)


# --- caller identity -----------------------------------------------------------------------------


def test_a_process_claiming_another_workers_name_is_refused(authority: AuthorityServiceProcess, store: SqliteStore) -> None:
    genuine = sign_approval(_approval(store), KeyRing.load(authority.keys_dir / APPROVER_DIR).active)
    ask = _ask(store, genuine)
    authority.provision(OWNER)  # the real worker:w1 has its secret; the impostors below do not know it
    impostors = {
        "its own secret, the other's name": HttpAuthorityClient(authority.url, caller=OTHER,
                                                                secret=authority.provision(OTHER)),
        "the other's name, a guessed secret": HttpAuthorityClient(authority.url, caller=OWNER, secret="guess"),
        "no credentials": HttpAuthorityClient(authority.url, caller="", secret=""),
        "never provisioned": HttpAuthorityClient(authority.url, caller="worker:w9.0", secret="x" * 40),
    }
    for what, client in impostors.items():
        with pytest.raises(CallerUnauthenticatedError):
            client.request(ask)
        client.close()
        assert what
    # Asking as itself is fine, but only for its own lease: the store still decides who holds run-1.
    other = HttpAuthorityClient(authority.url, caller=OTHER, secret=authority.provision(OTHER))
    with pytest.raises(AuthorityDeniedError, match="does not hold the lease"):
        other.request(ask.model_copy(update={"owner": OTHER}))
    other.close()
    # A raw request without the header gets a 401 from the process itself.
    response = httpx.post(authority.url + "/capabilities", content=ask.model_dump_json(),
                          headers={"content-type": "application/json"})
    assert response.status_code == 401 and response.json()["error"] == "unauthenticated"
    owner = authority.client(OWNER)
    assert owner.request(ask).claims.run_id == "run-1"
    owner.close()


def test_ablation_without_the_caller_check_an_impostor_gets_the_owners_capability(
    tmp_path: Path, store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    ring, approver_ring = KeyRing.generate(), KeyRing.generate()
    service = AuthorityService(ring, approvers=approver_ring.trusted())
    placements = {p.name: p for p in load_placements(None)}
    callers = CallerRegistry(tmp_path / "callers")
    callers.provision(OWNER)
    impostor_secret = callers.provision(OTHER)
    app = create_app(service, store, placements, callers=callers, approver=SigningApprover(approver_ring))
    ask = _ask(store, sign_approval(_approval(store), approver_ring.active))
    headers = {CALLER_HEADER: OTHER, "authorization": f"Bearer {impostor_secret}", "content-type": "application/json"}
    with TestClient(app) as http:
        assert http.post("/capabilities", content=ask.model_dump_json(), headers=headers).status_code == 401
        monkeypatch.setattr(CallerRegistry, "bind", lambda self, caller, secret, owner: None)
        stolen = http.post("/capabilities", content=ask.model_dump_json(), headers=headers)
    assert stolen.status_code == 200
    claims = CapabilityVerifier(ring.trusted()).decode(stolen.json()["token"])
    assert claims.run_id == "run-1"  # worker:w2's process now holds a capability for worker:w1's run


def test_the_registry_keeps_only_digests(tmp_path: Path) -> None:
    callers = CallerRegistry(tmp_path / "callers")
    secret = callers.provision(OWNER)
    stored = "".join(p.read_text() for p in (tmp_path / "callers").iterdir())
    assert secret not in stored and OWNER in stored
    assert callers.authenticate(OWNER, secret) == OWNER
    assert callers.provision(OWNER) != secret  # a restart gets a new secret; the old one stops working
    with pytest.raises(CallerUnauthenticatedError, match="does not authenticate"):
        callers.authenticate(OWNER, secret)
