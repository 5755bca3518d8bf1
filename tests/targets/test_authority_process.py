"""The authority as a real process: a real worker process gets capabilities from it and cannot mint its own."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from baton.approval_signing import sign_approval
from baton.authority_callers import CALLER_ENV, CALLER_SECRET_ENV
from baton.authority_http import APPROVER_DIR, AuthorityServiceProcess, CapabilityRequest
from baton.authority_keys import KeyRing
from baton.errors import AuthorityDeniedError
from baton.identity import ref_of
from baton.models import Approval, AuthorityContext, AuthorityLevel, RunKind
from baton.store.sqlite import SqliteStore
from baton.targets.capability_guard import TargetPolicy
from baton.targets.ledger_target import LedgerTargetProcess, read_effects, read_requests

WORKER = Path(__file__).with_name("worker_without_key.py")
ARTIFACT = ref_of({"artifact": "entry-1"})


def _private_key_file(keys: Path) -> Path:
    (pem,) = (keys / "private").glob("*.pem")
    return pem


def test_a_worker_process_gets_capabilities_from_the_service_and_cannot_mint_its_own(tmp_path: Path) -> None:
    db = tmp_path / "baton.db"
    store = SqliteStore(db)
    store.create_run("run-1", RunKind.DEPLOY, ref_of({"release": 1}), "cloud-eu")
    lease = store.acquire_lease("run-1", "w1", 120.0, expected_epoch=0)
    assert lease is not None
    keys = tmp_path / "authority"
    worker_home = tmp_path / "worker-home"
    worker_home.mkdir()
    policy = TargetPolicy(operation="ledger.append", level=AuthorityLevel.EXTERNAL_MUTATE, artifact_field="artifact")
    with AuthorityServiceProcess(keys, f"sqlite:///{db}") as authority, \
            LedgerTargetProcess(tmp_path / "ledger", trust=authority.jwks_path, policy=policy) as ledger:
        pem = _private_key_file(keys)
        approver = KeyRing.load(keys / APPROVER_DIR).active  # the approver role's key, not the capability key
        approval = sign_approval(
            Approval(approval_id="a", operation="ledger.append", artifact_hash=ARTIFACT,
                     level=AuthorityLevel.EXTERNAL_MUTATE, approved_by="rm",
                     expires_at=store.db_now() + dt.timedelta(hours=1)), approver)
        assert stat.S_IMODE(pem.stat().st_mode) == 0o600
        assert stat.S_IMODE(pem.parent.stat().st_mode) == 0o700
        env = {"PATH": os.environ.get("PATH", ""), "BATON_HOME": str(worker_home), "AUTHORITY_URL": authority.url,
               "LEDGER_URL": ledger.url, "JWKS": str(authority.jwks_path), "RUN_ID": "run-1",
               "EPOCH": str(lease.epoch), "ARTIFACT": ARTIFACT, "APPROVAL": approval.model_dump_json(),
               CALLER_ENV: "w1", CALLER_SECRET_ENV: authority.provision("w1")}
        done = subprocess.run([sys.executable, str(WORKER)], env=env, capture_output=True, text=True, timeout=120,
                              check=False)
        assert done.returncode == 0, done.stderr
        seen = json.loads(done.stdout.strip().splitlines()[-1])
        assert "BATON_AUTHORITY_KEY" not in env and seen["keys_within_reach"] == []
        assert seen["genuine"] == "applied"
        assert seen["own_key"] == seen["from_jwks"] == "capability:untrusted_key"
        # The oracle is the target's own record: one effect, the two self-minted attempts refused by name.
        effects = read_effects(ledger.directory)
        assert [e.idempotency_key for e in effects] == ["k-genuine"]
        results = {r["idempotency_key"]: r["result"] for r in read_requests(ledger.directory)}
        assert results == {"k-genuine": "applied", "k-own_key": "capability:untrusted_key",
                           "k-from_jwks": "capability:untrusted_key"}

        # The service decides from the store, not from the caller: another owner, or a stale epoch, is denied.
        client = authority.client("w1")
        context = AuthorityContext(level=AuthorityLevel.EXTERNAL_MUTATE, policy_id="p", approvals=(approval,))
        ask = CapabilityRequest(run_id="run-1", epoch=lease.epoch, owner="w1", operation="ledger.append",
                                artifact_hash=ARTIFACT, level=AuthorityLevel.EXTERNAL_MUTATE, placement="cloud-eu",
                                context=context, idempotency_key="k-2")
        assert client.request(ask).claims.idempotency_key == "k-2"
        with pytest.raises(AuthorityDeniedError, match="does not hold the lease"):
            authority.client("w2").request(ask.model_copy(update={"owner": "w2"}))
        with pytest.raises(AuthorityDeniedError, match="live lease at that epoch"):
            client.request(ask.model_copy(update={"epoch": lease.epoch + 1}))
        with pytest.raises(AuthorityDeniedError, match="ceiling"):
            client.request(ask.model_copy(update={"placement": "browser-pool-eu"}))
        with pytest.raises(AuthorityDeniedError, match="approval"):
            client.request(ask.model_copy(update={"artifact_hash": ref_of({"artifact": "other"})}))
        client.close()
    store.close()


def _as_nobody(path: Path) -> str:
    probe = ("import sys\ntry:\n    open(sys.argv[1], 'rb').read()\n    print('read')\n"
             "except PermissionError:\n    print('denied')\n")
    done = subprocess.run(["runuser", "-u", "nobody", "--", "/usr/bin/python3", "-c", probe, str(path)],
                          capture_output=True, text=True, timeout=60, check=False)
    return done.stdout.strip() or done.stderr


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("runuser") is None or not Path("/usr/bin/python3").exists(),
                    reason="needs root (and runuser) to run a process as another user")
def test_another_user_cannot_read_the_signing_key() -> None:
    root = Path(tempfile.mkdtemp(prefix="baton-authority-", dir="/tmp"))  # traversable by others, unlike pytest's
    try:
        root.chmod(0o755)
        keys = root / "authority"
        db = root / "baton.db"
        SqliteStore(db).close()
        with AuthorityServiceProcess(keys, f"sqlite:///{db}"):
            pem = _private_key_file(keys)
            assert _as_nobody(keys / "jwks.json") == "read"  # the public half is for everyone
            assert _as_nobody(pem) == "denied"
            # Ablation: with the modes a careless deploy might leave, the same probe reads the key.
            pem.parent.chmod(0o755)
            pem.chmod(0o644)
            assert _as_nobody(pem) == "read"
    finally:
        shutil.rmtree(root)
