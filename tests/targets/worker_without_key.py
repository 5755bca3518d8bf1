"""A worker process for test_authority_process: it asks the authority service and tries to mint for itself.

Run as `python worker_without_key.py`; it reads AUTHORITY_URL, LEDGER_URL, JWKS, RUN_ID,
EPOCH, ARTIFACT and BATON_HOME from its environment and prints one JSON line.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

from cryptography.hazmat.primitives import serialization

from baton.authority import AuthorityService
from baton.authority_http import CapabilityRequest, HttpAuthorityClient
from baton.authority_keys import KeyRing
from baton.errors import TargetRejectedError
from baton.fencing import FencingToken
from baton.models import Approval, AuthorityContext, AuthorityLevel, EnvironmentIdentity, Placement
from baton.store.records import Lease
from baton.targets.ledger_target import LedgerTargetClient


def private_keys_within_reach() -> list[str]:
    """Every file under this worker's home that loads as a private key."""
    found = []
    for path in Path(os.environ["BATON_HOME"]).rglob("*"):
        try:
            serialization.load_pem_private_key(path.read_bytes(), password=None)
            found.append(str(path))
        except (ValueError, TypeError, OSError):
            continue
    return found


def main() -> None:
    run_id, epoch, artifact = os.environ["RUN_ID"], int(os.environ["EPOCH"]), os.environ["ARTIFACT"]
    now = dt.datetime.now(dt.timezone.utc)
    approval = Approval.model_validate_json(os.environ["APPROVAL"])  # signed by the approver, not by this process
    context = AuthorityContext(level=AuthorityLevel.EXTERNAL_MUTATE, policy_id="p", approvals=(approval,))
    ask = CapabilityRequest(run_id=run_id, epoch=epoch, owner="w1", operation="ledger.append", artifact_hash=artifact,
                            level=AuthorityLevel.EXTERNAL_MUTATE, placement="cloud-eu", context=context,
                            idempotency_key="k-genuine")
    genuine = HttpAuthorityClient(os.environ["AUTHORITY_URL"]).request(ask)  # its identity: from its environment
    results: dict[str, object] = {"keys_within_reach": private_keys_within_reach()}
    payload = {"artifact": artifact}
    with LedgerTargetClient(os.environ["LEDGER_URL"]) as ledger:
        results["genuine"] = ledger.apply("op-genuine", "k-genuine", FencingToken(run_id, epoch, genuine.token),
                                          payload)["status"]
        # Minting for itself: with a key it makes, and with one derived from what it can read (the public key set).
        lease = Lease(run_id=run_id, owner="w1", epoch=epoch, expires_at=now + dt.timedelta(minutes=5))
        placement = Placement(name="eu-1", region="eu", provider="local", authority_ceiling=AuthorityLevel.EXTERNAL_MUTATE,
                              environment=EnvironmentIdentity(placement="eu-1", region="eu", provider="local",
                                                              runtime_image="w:1"))
        for name, ring in (("own_key", KeyRing.generate()), ("from_jwks", KeyRing.from_seed(Path(os.environ["JWKS"]).read_bytes()))):
            minted = AuthorityService(ring).issue(run_id=run_id, epoch=epoch, operation="ledger.append",
                                                  artifact_hash=artifact, level=AuthorityLevel.EXTERNAL_MUTATE,
                                                  lease=lease, placement=placement, context=context,
                                                  idempotency_key=f"k-{name}")
            try:
                ledger.apply(f"op-{name}", f"k-{name}", FencingToken(run_id, epoch, minted.token), payload)
                results[name] = "applied"
            except TargetRejectedError as exc:
                results[name] = exc.reason
    print(json.dumps(results))


if __name__ == "__main__":
    main()
