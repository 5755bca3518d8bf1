"""The remote gets a new commit while a coding run is being moved: rebase, re-verify, new approval.

The run is quiesced after its patch was verified and approved, and reserved
for a placement whose worker starts only once the remote has moved. The new
owner must record the rebase as a transition, verify the rebased bytes and
ask for a new approval. The old approval and the old evidence are then
tried for the new bytes and refused: by the authority process, and by the
git remote itself (its `requests.jsonl`; plain `git rev-parse` shows
nothing else landed).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from baton.authority_http import ApprovalAsk, CapabilityRequest, HttpAuthorityClient
from baton.catalog.releases import RELEASES
from baton.errors import AuthorityDeniedError, TargetRejectedError
from baton.fencing import FencingToken
from baton.handoff.coordinator import HandoffCoordinator, HandoffRequest
from baton.identity import sha256_ref
from baton.models import Approval, AuthorityContext, AuthorityLevel, Boundary, EventType, RunKind, VerifierEvidence
from baton.ownership import Coordinator
from baton.placements import DEFAULT_PLACEMENTS, placement_named
from baton.runtime.launch import RunSpec, launch_run
from baton.runtime.worker import connect_git_remote, connect_targets
from baton.store.factory import open_blobs, open_store
from baton.targets.git_remote_repo import SEED_PROJECT
from baton.targets.git_remote_service import PUSHES_FILE, repository_path
from baton.targets.mutation_log import FENCE_ADVANCED, REQUESTS_FILE
from baton.targets.service_process import target_data_dir

from builders.live import ended_run, wait_for

from .conftest import coding_stack, jsonl, plain_blob, plain_bytes, plain_checkpoints

pytestmark = pytest.mark.integration
RUN = "coding-rebased-1"
L = AuthorityLevel
UPSTREAM = SEED_PROJECT["calc/stats.py"].replace(
    '"""Means and bounds."""\n',
    '"""Means and bounds."""\n\nimport statistics\n\n\ndef median(values):\n'
    '    """The median of a non-empty sequence."""\n    return statistics.median(values)\n', 1)


def _candidates(home: Path, body: dict) -> list[dict]:
    return [plain_blob(home, ref) for ref in plain_blob(home, body["candidate_manifest_ref"])["candidate_refs"]]


def _evidence(home: Path, body: dict) -> list[dict]:
    return [plain_blob(home, ref) for ref in plain_blob(home, body["verifier_evidence_ref"])["evidence_refs"]]


def test_a_remote_moved_during_the_handoff_rebases_reverifies_and_reapproves_and_refuses_the_old(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    local, cloud = (placement_named(DEFAULT_PLACEMENTS, name) for name in ("local-gpu-eu", "cloud-eu"))
    remote_dir = target_data_dir("git", home)
    bare = repository_path(remote_dir, "calc")

    def git(*args: str) -> str:
        return subprocess.run(["git", f"--git-dir={bare}", *args], capture_output=True, text=True, check=True).stdout

    with coding_stack(home, ["calc"], **{"boundary-pause-s": "1.0"}) as stack:
        store = open_store(None, home)
        blobs = open_blobs(home, store)
        deploy, corpus = connect_targets(home, timeout_s=5.0)
        remote = connect_git_remote(home, timeout_s=5.0)
        assert remote is not None
        seed = git("rev-parse", "main").strip()
        stack.start_worker("w1", local.name)
        launch_run(store, blobs, RunSpec(RUN, RunKind.CODING, RELEASES["model-v7"], local, "fix the failing tests",
                                         {"repository": "calc", "branch": "main"}, L.EXTERNAL_MUTATE),
                   reservation_ttl_s=10.0)
        wait_for(lambda: (c := store.latest_checkpoint(RUN)) is not None and c.boundary is Boundary.AUTHORIZED,
                 timeout_s=180, what="the patch to be verified and approved on the first worker")
        coordinator = HandoffCoordinator(store, blobs, {local.name: local, cloud.name: cloud},
                                         fence_targets=(deploy, corpus, remote), lease_ttl_s=30.0, quiesce_timeout_s=15.0)
        outcome = coordinator.handoff(HandoffRequest(RUN, "scheduler_rebalance", preferred_targets=(cloud.name,)))
        assert outcome.committed, outcome

        quiesced = plain_checkpoints(home, RUN)[-1]
        assert quiesced["boundary"] in ("AUTHORIZED", "COMMITTING")
        old_hash = _candidates(home, quiesced)[-1]["artifact_hash"]
        old_patch = plain_bytes(home, old_hash)
        (old_approval,) = plain_blob(home, quiesced["authority_context_ref"])["approvals"]
        (old_evidence,) = [e for e in _evidence(home, quiesced) if e["candidate_hash"] == old_hash and e["result"] == "PASS"]
        assert old_approval["artifact_hash"] == old_hash and old_evidence["inputs"]["base_commit"] == seed
        assert jsonl(remote_dir / PUSHES_FILE) == []  # nothing was pushed before the move

        upstream = remote.commit_upstream("calc", "calc/stats.py", UPSTREAM, "calc: add median")  # the world moves
        stack.start_worker("w2", cloud.name)
        run = ended_run(store, RUN, timeout_s=180)
        assert run.status == "verified", run.detail
        assert str(run.detail["finished_by"]).startswith("worker:w2")

        final = plain_checkpoints(home, RUN)[-1]
        new_hash = _candidates(home, final)[-1]["artifact_hash"]
        new_patch = plain_bytes(home, new_hash)
        assert new_hash != old_hash and new_patch.splitlines()[1] == f"base-commit: {upstream}".encode()

        # The rebase is a recorded transition, not a silent part of resume.
        memory = plain_blob(home, final["task_state_ref"])["memory"]
        (transition,) = memory["coding.transitions"]
        assert transition["before"]["base_commit"] == seed and transition["after"]["base_commit"] == upstream
        assert transition["invalidated_artifact"] == old_hash and transition["after"]["patch_ref"] == new_hash
        assert transition["requires_reverification"] and transition["requires_reapproval"]
        assert transition["boundary_after"] == "CANDIDATE_READY"
        withdrawn = [e for _, e in store.list_events(run_id=RUN, event_types=[EventType.REVERIFICATION_REQUIRED])]
        assert any("git://calc/main" in (e.reason or "") for e in withdrawn)

        # Re-verified: new evidence bound to the new bytes on the new base; the old stays bound to the old.
        evidence = _evidence(home, final)
        new_evidence = [e for e in evidence if e["candidate_hash"] == new_hash and e["result"] == "PASS"]
        assert len(new_evidence) == 1 and new_evidence[0]["inputs"]["base_commit"] == upstream
        assert new_evidence[0]["inputs"]["patch_hash"] == new_hash
        assert not [e for e in evidence if e["candidate_hash"] == new_hash and e["inputs"]["base_commit"] == seed]
        # A new approval, for the new hash only.
        approvals = plain_blob(home, final["authority_context_ref"])["approvals"]
        assert [a["artifact_hash"] for a in approvals if a["artifact_hash"] == new_hash] == [new_hash]

        # The remote's own records and plain git: exactly the rebased patch landed, on the upstream commit.
        (push,) = jsonl(remote_dir / PUSHES_FILE)
        assert (push["run_id"], push["patch_hash"], push["base_commit"]) == (RUN, new_hash, upstream)
        assert [r["result"] for r in jsonl(remote_dir / REQUESTS_FILE) if r["run_id"] == RUN and r["result"] != FENCE_ADVANCED] == ["applied"]
        head = git("rev-parse", "main").strip()
        assert head == push["outcome"]["commit"] and git("rev-parse", "main^").strip() == upstream
        landed = subprocess.run(["git", f"--git-dir={bare}", "diff", "--binary", upstream, head], capture_output=True,
                                check=True).stdout
        assert new_patch.endswith(landed) and old_hash not in git("log", "--format=%B", "main")

        # A stale holder of the old approval and evidence tries them on the new bytes: refused.
        owner = "worker:stale-holder"
        lease = Coordinator(store, name="tests").grant(RUN, owner, ttl_s=60.0, observed_epoch=store.get_lease(RUN).epoch,
                                                       force=True, fence_targets=(remote,))
        assert lease is not None
        authority = HttpAuthorityClient(stack.authority.url, caller=owner, secret=stack.authority.provision(owner))
        with pytest.raises(AuthorityDeniedError):  # old evidence is not evidence for the new bytes
            authority.approve(ApprovalAsk(run_id=RUN, owner=owner, operation="push", artifact_hash=new_hash,
                                          level=L.EXTERNAL_MUTATE, evidence=[VerifierEvidence.model_validate(old_evidence)]))
        assert authority.approve(ApprovalAsk(run_id=RUN, owner=owner, operation="push", artifact_hash=new_hash,
                                             level=L.EXTERNAL_MUTATE,
                                             evidence=[VerifierEvidence.model_validate(new_evidence[0])])).artifact_hash == new_hash

        def ask(artifact: str, key: str) -> str:
            return authority.request(CapabilityRequest(
                run_id=RUN, epoch=lease.epoch, owner=owner, operation="push", artifact_hash=artifact,
                level=L.EXTERNAL_MUTATE, placement=cloud.name, idempotency_key=key,
                context=AuthorityContext(level=L.EXTERNAL_MUTATE, policy_id="fleet-policy",
                                         approvals=(Approval.model_validate(old_approval),)),
            )).token

        with pytest.raises(AuthorityDeniedError):  # the old approval does not cover the new bytes
            ask(new_hash, "stale:new")
        old_capability = ask(old_hash, "stale:old")  # it does still cover the old bytes ...

        def push_patch(patch: bytes, capability: str, key: str, op: str) -> None:
            base = patch.splitlines()[1].decode().removeprefix("base-commit: ")
            remote.apply(op, key, FencingToken(RUN, lease.epoch, capability),
                         {"repository": "calc", "branch": "main", "base_commit": base, "patch": patch.decode(),
                          "patch_hash": sha256_ref(patch), "message": "stale push"})

        with pytest.raises(TargetRejectedError) as refused:  # ... which the moved remote refuses itself
            push_patch(old_patch, old_capability, "stale:old", "op-stale-old")
        assert refused.value.reason == "stale_base"
        with pytest.raises(TargetRejectedError) as refused:  # and it is no capability for the new bytes
            push_patch(new_patch, old_capability, "stale:old", "op-stale-new")
        assert refused.value.reason == "capability:wrong_artifact"
        results = [r["result"] for r in jsonl(remote_dir / REQUESTS_FILE) if r["run_id"] == RUN and r["result"] != FENCE_ADVANCED]
        assert results == ["applied", "stale_base", "capability:wrong_artifact"]
        assert git("rev-parse", "main").strip() == head and len(jsonl(remote_dir / PUSHES_FILE)) == 1
        authority.close(), deploy.close(), corpus.close(), remote.close()
        store.close()
