"""The git remote refuses stale fencing tokens and missing or misfit capabilities itself.

Every check is read back from the remote's own records (`requests.jsonl`,
`pushes.jsonl`) and from the bare repository with plain `git rev-parse`,
never from what the client was told.
"""

from __future__ import annotations

import datetime as dt
import subprocess
from pathlib import Path

import pytest

from baton.ablation import Ablation, ablation_env
from baton.agents.coding_workspace import Workspace, diff_against, make_patch
from baton.authority import AuthorityService
from baton.errors import TargetRejectedError
from baton.fencing import FencingToken
from baton.identity import sha256_ref
from baton.models import Approval, AuthorityContext, AuthorityLevel, EnvironmentIdentity, Placement, RunKind
from baton.ownership import Coordinator
from baton.store.base import SqlStore
from baton.store.records import Lease
from baton.store.sqlite import SqliteStore
from baton.targets.git_remote_service import (
    PUSH,
    PUSH_POLICY,
    PUSHES_FILE,
    GitRemoteClient,
    git_remote_process,
    repository_path,
)
from baton.targets.mutation_log import REQUESTS_FILE
from baton.targets.service_process import ServiceProcess

from .conftest import REPO, jsonl

pytestmark = pytest.mark.integration
L = AuthorityLevel
PLACEMENT = Placement(
    name="enclave", region="eu", provider="local", authority_ceiling=L.EXTERNAL_MUTATE,
    environment=EnvironmentIdentity(placement="enclave", region="eu", provider="local", runtime_image="w:1"),
)


def rev_parse(bare: Path, rev: str = "main") -> str:
    """The branch head by plain git, nothing of Baton involved."""
    return subprocess.run(["git", f"--git-dir={bare}", "rev-parse", rev], capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.fixture
def store(tmp_path: Path) -> SqlStore:
    opened = SqliteStore(tmp_path / "baton.db")
    yield opened  # type: ignore[misc]
    opened.close()


def _patch(remote_dir: Path, tmp_path: Path, old: str, new: str) -> bytes:
    bare = repository_path(remote_dir, REPO)
    base = rev_parse(bare)
    workspace = Workspace(tmp_path / f"ws-{len(list(tmp_path.iterdir()))}")
    workspace.clone(str(bare))
    with workspace.sandbox("edit", base) as tree:
        path = tree / "calc" / "stats.py"
        path.write_text(path.read_text().replace(old, new, 1))
        return make_patch(base, diff_against(tree, base))


def _lease(store: SqlStore, run_id: str = "code-1") -> Lease:
    store.create_run(run_id, RunKind.CODING, sha256_ref(b"release"), PLACEMENT.name)
    lease = store.acquire_lease(run_id, "w1", 60.0, expected_epoch=0)
    assert lease is not None
    return lease


def _capability(authority: AuthorityService, store: SqlStore, lease: Lease, patch_hash: str, key: str) -> str:
    approval = Approval(approval_id="appr-1", operation=PUSH, artifact_hash=patch_hash, level=L.EXTERNAL_MUTATE,
                        approved_by="reviewer", expires_at=store.db_now() + dt.timedelta(hours=1))
    context = AuthorityContext(level=L.EXTERNAL_MUTATE, policy_id="p", approvals=(approval,))
    return authority.issue_checked(store, run_id=lease.run_id, epoch=lease.epoch, owner=lease.owner or "w1",
                                   operation=PUSH, artifact_hash=patch_hash, level=L.EXTERNAL_MUTATE,
                                   placement=PLACEMENT, context=context, idempotency_key=key).token


def _push(client: GitRemoteClient, lease: Lease, patch: bytes, capability: str | None, *, key: str = "k-1",
          op: str = "op-1", epoch: int | None = None, patch_hash: str | None = None) -> dict:
    base = patch.split(b"\n")[1].decode().removeprefix("base-commit: ")
    payload = {"repository": REPO, "branch": "main", "base_commit": base, "patch": patch.decode(),
               "patch_hash": patch_hash or sha256_ref(patch), "message": "fix mean"}
    token = FencingToken(lease.run_id, lease.epoch if epoch is None else epoch, capability)
    return client.apply(op, key, token, payload)


FIX = ("(len(values) - 1)", "len(values)")


def test_a_push_with_a_fitting_capability_lands_exactly_its_patch(
    remote: ServiceProcess, remote_client: GitRemoteClient, remote_dir: Path, store: SqlStore,
    authority: AuthorityService, tmp_path: Path,
) -> None:
    bare = repository_path(remote_dir, REPO)
    base = rev_parse(bare)
    patch = _patch(remote_dir, tmp_path, *FIX)
    lease = _lease(store)
    answer = _push(remote_client, lease, patch, _capability(authority, store, lease, sha256_ref(patch), "k-1"))
    assert answer["status"] == "applied"
    head = rev_parse(bare)
    assert rev_parse(bare, "main^") == base
    (line,) = jsonl(remote_dir / PUSHES_FILE)
    assert line["outcome"]["commit"] == head and line["patch_hash"] == sha256_ref(patch) and line["epoch"] == 1
    landed = subprocess.run(["git", f"--git-dir={bare}", "diff", "--binary", base, head], capture_output=True,
                            check=True).stdout
    assert make_patch(base, landed) == patch  # the branch holds exactly that patch
    trailers = subprocess.run(["git", f"--git-dir={bare}", "log", "-1", "--format=%B", head], capture_output=True,
                              text=True, check=True).stdout
    assert f"Baton-Patch-Hash: {sha256_ref(patch)}" in trailers and "Baton-Run: code-1" in trailers

    replay = _push(remote_client, lease, patch, _capability(authority, store, lease, sha256_ref(patch), "k-1"),
                   op="op-2")
    assert replay["status"] == "replayed"
    assert len(jsonl(remote_dir / PUSHES_FILE)) == 1 and rev_parse(bare) == head


def test_pushes_without_a_capability_or_with_one_for_other_bytes_are_refused_by_the_remote(
    remote: ServiceProcess, remote_client: GitRemoteClient, remote_dir: Path, store: SqlStore,
    authority: AuthorityService, tmp_path: Path,
) -> None:
    bare = repository_path(remote_dir, REPO)
    base = rev_parse(bare)
    patch = _patch(remote_dir, tmp_path, *FIX)
    other = _patch(remote_dir, tmp_path, "return low\n    return value", "return high\n    return value")
    lease = _lease(store)
    cases = [
        (None, {}, "capability:no_capability"),
        ("not-a-token", {}, "capability:malformed"),
        (_capability(authority, store, lease, sha256_ref(other), "k-1"), {}, "capability:wrong_artifact"),
        (_capability(authority, store, lease, sha256_ref(patch), "k-other"), {}, "capability:wrong_key"),
        (_capability(authority, store, lease, sha256_ref(patch), "k-1"), {"patch_hash": sha256_ref(other)},
         "capability:wrong_artifact"),
    ]
    for index, (capability, extra, reason) in enumerate(cases):
        with pytest.raises(TargetRejectedError) as refused:
            _push(remote_client, lease, patch, capability, op=f"op-{index}", **extra)  # type: ignore[arg-type]
        assert refused.value.reason == reason, (index, str(refused.value))
        assert jsonl(remote_dir / REQUESTS_FILE)[-1]["result"] == reason
    assert jsonl(remote_dir / PUSHES_FILE) == [] and rev_parse(bare) == base


def test_a_stale_epoch_is_refused_by_the_remote_even_with_its_own_valid_capability(
    remote: ServiceProcess, remote_client: GitRemoteClient, remote_dir: Path, store: SqlStore,
    authority: AuthorityService, tmp_path: Path,
) -> None:
    bare = repository_path(remote_dir, REPO)
    base = rev_parse(bare)
    patch = _patch(remote_dir, tmp_path, *FIX)
    old = _lease(store)
    stale_capability = _capability(authority, store, old, sha256_ref(patch), "k-1")  # minted while it owned the run
    new = Coordinator(store, name="tests").grant(old.run_id, "w2", ttl_s=60.0, observed_epoch=old.epoch, force=True)
    assert new is not None and new.epoch == old.epoch + 1
    assert remote_client.advance_fence(FencingToken(new.run_id, new.epoch)) == new.epoch  # the handoff fences targets

    with pytest.raises(TargetRejectedError) as refused:
        _push(remote_client, old, patch, stale_capability)
    assert refused.value.fenced and refused.value.reason == "fenced"
    last = jsonl(remote_dir / REQUESTS_FILE)[-1]
    assert (last["result"], last["epoch"]) == ("fenced", old.epoch)
    assert jsonl(remote_dir / PUSHES_FILE) == [] and rev_parse(bare) == base

    # The new owner, with its own capability, is admitted.
    assert _push(remote_client, new, patch, _capability(authority, store, new, sha256_ref(patch), "k-1"),
                 op="op-new")["status"] == "applied"
    assert rev_parse(bare, "main^") == base


def test_a_moved_branch_and_a_patch_that_is_not_its_hash_are_refused(
    remote: ServiceProcess, remote_client: GitRemoteClient, remote_dir: Path, store: SqlStore,
    authority: AuthorityService, tmp_path: Path,
) -> None:
    bare = repository_path(remote_dir, REPO)
    patch = _patch(remote_dir, tmp_path, *FIX)
    lease = _lease(store)
    with pytest.raises(TargetRejectedError) as refused:
        _push(remote_client, lease, patch, _capability(authority, store, lease, sha256_ref(b"x"), "k-1"),
              patch_hash=sha256_ref(b"x"))
    assert refused.value.reason == "patch_hash_mismatch"
    upstream = remote_client.commit_upstream(REPO, "NOTES.md", "upstream moved\n", "notes")
    with pytest.raises(TargetRejectedError) as refused:
        _push(remote_client, lease, patch, _capability(authority, store, lease, sha256_ref(patch), "k-1"), op="op-2")
    assert refused.value.reason == "stale_base"
    assert [r["result"] for r in jsonl(remote_dir / REQUESTS_FILE)] == ["patch_hash_mismatch", "stale_base"]
    assert jsonl(remote_dir / PUSHES_FILE) == [] and rev_parse(bare) == upstream


def test_ablation_with_the_remotes_capability_check_off_an_uncapable_push_lands(
    remote_dir: Path, authority: AuthorityService, store: SqlStore, tmp_path: Path,
) -> None:
    """The oracle above can fail: switch the remote's own check off and plain git sees the push land."""
    trust = tmp_path / "authority" / "jwks.json"
    with ablation_env(Ablation.CAPABILITY_CHECK.value), \
            git_remote_process(remote_dir, guard=PUSH_POLICY.arguments(trust), repositories=[REPO]) as process, \
            GitRemoteClient(process.url) as client:
        bare = repository_path(remote_dir, REPO)
        base = rev_parse(bare)
        patch = _patch(remote_dir, tmp_path, *FIX)
        assert _push(client, _lease(store), patch, None)["status"] == "applied"
        assert rev_parse(bare, "main^") == base and jsonl(remote_dir / PUSHES_FILE)[0]["patch_hash"] == sha256_ref(patch)


def test_ablation_with_the_remotes_fence_off_a_stale_epoch_push_lands(
    remote_dir: Path, authority: AuthorityService, store: SqlStore, tmp_path: Path,
) -> None:
    """The stale-epoch oracle can fail: with the target fence switched off, plain git sees the stale push land."""
    trust = tmp_path / "authority" / "jwks.json"
    with ablation_env(Ablation.TARGET_FENCE.value), \
            git_remote_process(remote_dir, guard=PUSH_POLICY.arguments(trust), repositories=[REPO]) as process, \
            GitRemoteClient(process.url) as client:
        bare = repository_path(remote_dir, REPO)
        base = rev_parse(bare)
        patch = _patch(remote_dir, tmp_path, *FIX)
        old = _lease(store)
        stale_capability = _capability(authority, store, old, sha256_ref(patch), "k-1")
        new = Coordinator(store, name="tests").grant(old.run_id, "w2", ttl_s=60.0, observed_epoch=old.epoch, force=True)
        assert new is not None
        client.advance_fence(FencingToken(new.run_id, new.epoch))
        assert _push(client, old, patch, stale_capability)["status"] == "applied"
        assert rev_parse(bare, "main^") == base and jsonl(remote_dir / PUSHES_FILE)[0]["epoch"] == old.epoch
