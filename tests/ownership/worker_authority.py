"""The authority process the ownership tests' worker processes ask, and how they ask it.

Workers get no key: the test (their supervisor) provisions each one's caller
secret and an approval signed by the approver's key, and hands them over
through the environment that multiprocessing's spawned children inherit.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from baton.approval_signing import sign_approval
from baton.authority import Capability
from baton.authority_callers import CALLER_SECRET_ENV
from baton.authority_http import APPROVER_DIR, AuthorityServiceProcess, CapabilityRequest, HttpAuthorityClient
from baton.authority_keys import KeyRing
from baton.models import Approval, AuthorityContext, AuthorityLevel
from baton.placements import dump_placements
from baton.store.records import Lease

from builders.authority import ARTIFACT, OPERATION, placement

URL_ENV = "OWNERSHIP_AUTHORITY_URL"
APPROVAL_ENV = "OWNERSHIP_APPROVAL"
WORKERS = ("worker-1",)


@dataclass(frozen=True)
class WorkerAuthority:
    """The running authority process."""

    process: AuthorityServiceProcess

    @classmethod
    @contextmanager
    def start(cls, keys: Path, store_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[WorkerAuthority]:
        keys.mkdir(parents=True, exist_ok=True)
        catalog = keys.parent / "authority-placements.json"
        dump_placements([placement()], catalog)
        with AuthorityServiceProcess(keys, store_url, catalog=catalog) as process:
            approval = Approval(approval_id="approval-1", operation=OPERATION, artifact_hash=ARTIFACT,
                                level=AuthorityLevel.EXTERNAL_MUTATE, approved_by="release-manager",
                                expires_at=dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=1))
            signed = sign_approval(approval, KeyRing.load(keys / APPROVER_DIR).active)
            monkeypatch.setenv(URL_ENV, process.url)
            monkeypatch.setenv(APPROVAL_ENV, signed.model_dump_json())
            for worker in WORKERS:
                monkeypatch.setenv(f"{CALLER_SECRET_ENV}_{worker.replace('-', '_').upper()}", process.provision(worker))
            yield cls(process)


def client_for(owner: str) -> HttpAuthorityClient:
    """In a worker process: a client authenticated as `owner` with what its supervisor provisioned."""
    secret = os.environ[f"{CALLER_SECRET_ENV}_{owner.replace('-', '_').upper()}"]
    return HttpAuthorityClient(os.environ[URL_ENV], caller=owner, secret=secret, timeout_s=30.0)


def ask(client: HttpAuthorityClient, lease: Lease) -> Capability:
    """In a worker process: a capability for the holder of `lease`, issued by the authority process."""
    approval = Approval.model_validate_json(os.environ[APPROVAL_ENV])
    return client.request(CapabilityRequest(
        run_id=lease.run_id, epoch=lease.epoch, owner=lease.owner, operation=OPERATION, artifact_hash=ARTIFACT,
        level=AuthorityLevel.EXTERNAL_MUTATE, placement=placement().name,
        context=AuthorityContext(level=AuthorityLevel.EXTERNAL_MUTATE, policy_id="policy-7", approvals=(approval,)),
    ))
