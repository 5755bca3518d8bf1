"""The coding agent: fix a failing test in a real git repository, by beam search, verified in a sandbox.

Written only against the SDK and two tools the worker lends it: `git` (the
read side of the git remote: repositories and branch heads) and
`patch_model` (the scripted patch model, billed by its provider). What it does:

1. Observe the remote branch head, clone the repository into a private
   workspace and record the workspace identity (repository, base commit,
   worktree hash, lock files, test command, environment identity).
2. Search (GENERATING): a beam over candidate patches, one small step per
   checkpoint: score a node with one pytest run in its own sandbox worktree,
   expand a frontier node with one model call, or close a level (see
   `baton.agents.coding_search`). The whole search is in the checkpoint, so a
   new owner continues the same frontier; its budget (expansions, model
   calls, sandbox seconds) is the run's, never reset.
3. Propose the solution's exact bytes (a patch naming its base commit),
   verify it with pytest in a fresh sandbox (`baton.agents.coding_verify`),
   ask for approval of that exact hash, and push it through the gateway to
   the git remote, which checks the capability and fencing token itself.
4. Postcondition: the remote records exactly one push for the run, of this
   patch; with plain git on a fresh fetch, that commit is on the branch, its
   parent is the patch's base and its diff is exactly the patch.

A moved remote: before every step that precedes the push the agent compares
the live branch head with the one it observed. If it moved, it revalidates
the observation (which withdraws any candidate built on it), rebases the
solution in a sandbox, records the change as a `WorkspaceTransition`
(`baton.rebase`, kept in `coding.transitions`), proposes the rebased bytes
(a new hash: the old evidence and approval do not bind them) and verifies
and asks for approval again.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

from baton.agents.coding_model import Edit, PatchReply
from baton.agents.coding_search import EXHAUSTED, SOLVED, BeamBook, BeamConfig
from baton.agents.coding_verify import binding_problems, expected_binding, verify_patch
from baton.agents.coding_workspace import (
    TEST_COMMAND_TEXT,
    GitError,
    Workspace,
    apply_diff,
    commit_tree_ref,
    diff_against,
    environment_ref,
    lockfile_refs,
    make_patch,
    parse_patch,
    read_sources,
    run_pytest,
    worktree_ref,
)
from baton.errors import InvalidTransitionError
from baton.identity import canonical_json, sha256_ref
from baton.lifecycle import TERMINAL
from baton.models import AuthorityLevel, Boundary, BudgetUsage, Observation, WorkspaceIdentity
from baton.rebase import rebase_transition
from baton.runtime.sdk import RunContext
from baton.targets.git_remote_repo import git, git_env
from baton.targets.git_remote_service import PUSH

SEARCH_INFO = "coding.search_info"
BASE_TREE = "coding.base_tree_ref"
TRANSITIONS = "coding.transitions"
REMOTE_MOVED = "coding.remote_moved"
PROPOSED = "coding.proposed"
VERIFY_FAILURES = "coding.verification_failures"
FRESHNESS_S = 300.0
_BEFORE_COMMIT = (
    Boundary.GENERATING,
    Boundary.CANDIDATE_READY,
    Boundary.VERIFIED,
    Boundary.AWAITING_AUTHORITY,
    Boundary.AUTHORIZED,
)


class CodingTask:
    """What a coding run is asked to do: fix `branch` of `repository`, with these beam settings."""

    def __init__(self, task: dict[str, Any]) -> None:
        self.repository = str(task.get("repository", "calc"))
        self.branch = str(task.get("branch", "main"))
        self.beam = BeamConfig.from_task(task)

    @property
    def source(self) -> str:
        return f"git://{self.repository}/{self.branch}"

    @property
    def query(self) -> dict[str, Any]:
        return {"repository": self.repository, "branch": self.branch}


# -- the remote ------------------------------------------------------------------------------------


def _live_head(ctx: RunContext, remote: Any, task: CodingTask) -> str:
    try:
        head = remote.head(task.repository, task.branch)
    except KeyError as exc:
        ctx.fail(str(exc))
    if not head:
        ctx.fail(f"the git remote has no branch {task.branch!r} in {task.repository!r}")
    return str(head)


def _watch_remote(ctx: RunContext, remote: Any, task: CodingTask) -> None:
    """Revalidate the branch head when the SDK asks, or when it moved; a move withdraws the candidate."""
    for observation, _mode in ctx.needs_revalidation():
        if observation.source == task.source:
            live = _live_head(ctx, remote, task)
            _note_move(ctx, observation, live)
            ctx.revalidate(observation, live.encode())
    seen = ctx.read(task.source, task.query)
    if seen is None:
        return
    live = _live_head(ctx, remote, task)
    if live != seen.content.decode():
        _note_move(ctx, seen.observation, live)
        ctx.revalidate(seen.observation, live.encode())


def _note_move(ctx: RunContext, observation: Observation, live: str) -> None:
    workspace = ctx.workspace
    if workspace is not None and live != workspace.base_commit and ctx.memory(REMOTE_MOVED) is None:
        ctx.remember(REMOTE_MOVED, {"from": workspace.base_commit, "to": live, "at_boundary": ctx.boundary.value,
                                    "observation": observation.record_ref()})


def _head_observation(ctx: RunContext, task: CodingTask) -> tuple[Observation, str]:
    seen = ctx.read(task.source, task.query)
    if seen is None:
        ctx.fail(f"{task.source} was never observed")
    return seen.observation, seen.content.decode()


# -- the workspace -----------------------------------------------------------------------------------


def _ready_workspace(ctx: RunContext, remote: Any, task: CodingTask, workspace: Workspace, *commits: str) -> None:
    """Clone (or fetch) so that `commits` exist locally; check the frozen base snapshot on a fresh clone."""
    fresh = not workspace.cloned
    if fresh or not all(workspace.has_commit(c) for c in commits):
        try:
            workspace.clone(str(remote.repository(task.repository)["path"]))
        except (KeyError, GitError) as exc:
            ctx.fail(f"cannot clone {task.repository}: {exc}")
    missing = [c for c in commits if not workspace.has_commit(c)]
    if missing:
        ctx.fail(f"the remote no longer has commit(s) {missing}: the frozen snapshot cannot be rebuilt")
    identity = ctx.workspace
    recorded = ctx.memory(BASE_TREE)
    if fresh and identity is not None and recorded is not None:
        rebuilt = commit_tree_ref(workspace.repo, identity.base_commit)
        if rebuilt != recorded:
            ctx.fail(f"the rebuilt base snapshot hashes to {rebuilt}, the checkpoint recorded {recorded}")


def _book(ctx: RunContext) -> BeamBook | None:
    state, info = ctx.search, ctx.memory(SEARCH_INFO)
    if state is None or info is None:
        return None
    return BeamBook(state, info)


def _save(ctx: RunContext, book: BeamBook) -> None:
    ctx.record_search(book.state)
    ctx.remember(SEARCH_INFO, book.info())


def _start(ctx: RunContext, remote: Any, task: CodingTask, workspace: Workspace) -> None:
    head = _live_head(ctx, remote, task)
    ctx.observe(task.source, task.query, head.encode(), freshness_s=FRESHNESS_S)
    _ready_workspace(ctx, remote, task, workspace, head)
    with workspace.sandbox("base", head) as tree:
        identity = WorkspaceIdentity(
            repository_url=str(remote.repository(task.repository)["path"]), base_commit=head,
            worktree_ref=worktree_ref(tree), build_environment_ref=environment_ref(),
            lockfile_refs=lockfile_refs(tree), test_commands=(TEST_COMMAND_TEXT,),
        )
    ctx.set_workspace(identity)
    ctx.remember(BASE_TREE, commit_tree_ref(workspace.repo, head))
    _save(ctx, BeamBook.start(task.beam, head))
    ctx.checkpoint()


def _score(ctx: RunContext, book: BeamBook, node_id: str, workspace: Workspace, base: str) -> None:
    with workspace.sandbox(f"score-{node_id}", base) as tree:
        apply_diff(tree, book.diff(node_id).encode("utf-8"))
        run = run_pytest(tree)
    ctx.charge(BudgetUsage(tool_calls=1, sandbox_seconds=run.seconds), f"pytest for search node {node_id}")
    book.record_score(node_id, passed=run.passed, failed=run.failed, errors=run.errors, failing=run.failing,
                      all_passed=run.all_passed, output_ref=sha256_ref(run.output))
    _save(ctx, book)
    ctx.checkpoint()


def _expand(ctx: RunContext, book: BeamBook, node_id: str, workspace: Workspace, base: str, models: Any) -> None:
    if book.state.expansions_used >= book.config.max_expansions:
        book.cancel(f"search budget spent: {book.state.expansions_used} expansions")
        _save(ctx, book)
        ctx.checkpoint()
        return
    failing = list(book.nodes[node_id]["tests"]["failing"])
    with workspace.sandbox(f"expand-{node_id}", base) as tree:
        apply_diff(tree, book.diff(node_id).encode("utf-8"))
        files = read_sources(tree)
    reply: PatchReply = ctx.call_model(
        lambda: models.propose(ctx.release, files, failing, k=book.config.proposals, run_id=ctx.run_id,
                               epoch=ctx.epoch, node_id=node_id),
        f"patch model expanded {node_id}", cost=lambda r: r.reply.charge)
    children = [(edit.as_json(), _child_diff(workspace, base, book.diff(node_id), edit)) for edit in reply.edits]
    book.record_expansion(node_id, children, proposed_by=ctx.release.model, base_commit=base)
    ctx.charge(BudgetUsage(search_expansions=1), f"expanded search node {node_id}")
    _save(ctx, book)
    ctx.checkpoint()


def _child_diff(workspace: Workspace, base: str, parent_diff: str, edit: Edit) -> str | None:
    """The child's whole diff against the base (None when the edit does not apply to the parent)."""
    with workspace.sandbox("child", base) as tree:
        apply_diff(tree, parent_diff.encode("utf-8"))
        path = tree / edit.path
        try:
            path.write_text(edit.apply(path.read_text(encoding="utf-8")), encoding="utf-8")
        except (OSError, ValueError):
            return None
        return diff_against(tree, base).decode("utf-8")


def _search_step(ctx: RunContext, remote: Any, models: Any, task: CodingTask, workspace: Workspace) -> None:
    book = _book(ctx)
    if book is None:
        _start(ctx, remote, task, workspace)
        return
    identity = ctx.workspace
    assert identity is not None
    base = str(book.meta["base_commit"])
    action, node_id = book.next_action()
    if action == "done":
        if book.status == SOLVED:
            _propose_solution(ctx, remote, task, workspace, book)
        else:
            ctx.fail(f"the search ended without a passing patch: {book.meta.get('reason')}")
        return
    _ready_workspace(ctx, remote, task, workspace, base)
    if action == "score":
        assert node_id is not None
        _score(ctx, book, node_id, workspace, base)
    elif action == "expand":
        assert node_id is not None
        _expand(ctx, book, node_id, workspace, base, models)
    else:
        book.select()
        _save(ctx, book)
        ctx.checkpoint()
        if book.status == EXHAUSTED:
            ctx.fail(f"the search ended without a passing patch: {book.meta.get('reason')}")


# -- proposing, rebasing ------------------------------------------------------------------------------


def _propose_solution(ctx: RunContext, remote: Any, task: CodingTask, workspace: Workspace, book: BeamBook) -> None:
    solution = book.solution
    assert solution is not None
    identity = ctx.workspace
    assert identity is not None
    observation, head = _head_observation(ctx, task)
    diff = book.diff(solution).encode("utf-8")
    if identity.base_commit != str(book.meta["base_commit"]):
        diff = _rebased_diff(ctx, identity)  # rebased before: continue from that patch
    _ready_workspace(ctx, remote, task, workspace, identity.base_commit, head)
    if head != identity.base_commit:
        identity, diff = _rebase(ctx, workspace, identity, diff, head)
    patch = make_patch(identity.base_commit, diff)
    with workspace.sandbox("propose", identity.base_commit) as tree:
        apply_diff(tree, diff)
        tree_ref = worktree_ref(tree)
    ctx.set_workspace(identity.model_copy(update={"worktree_ref": tree_ref, "patch_ref": sha256_ref(patch)}))
    ctx.remember(PROPOSED, {"patch_ref": sha256_ref(patch), "node": solution, "base_commit": identity.base_commit,
                            "diff": diff.decode("utf-8")})
    edit = book.nodes[solution].get("edit") or {}
    ctx.propose(patch, kind="patch", summary=f"{solution}: {edit.get('description', 'patch')}", inputs=[observation])


def _rebased_diff(ctx: RunContext, identity: WorkspaceIdentity) -> bytes:
    proposed = ctx.memory(PROPOSED) or {}
    diff = str(proposed.get("diff", "")).encode("utf-8")
    if identity.patch_ref is None or sha256_ref(make_patch(identity.base_commit, diff)) != identity.patch_ref:
        ctx.fail("the recorded rebased patch does not hash to the workspace's patch ref")
    return diff


def _rebase(
    ctx: RunContext, workspace: Workspace, identity: WorkspaceIdentity, diff: bytes, head: str
) -> tuple[WorkspaceIdentity, bytes]:
    """Rebase the patch onto `head` in a sandbox and record the transition; the new identity and diff."""
    with workspace.sandbox("rebase", head) as tree:
        try:
            apply_diff(tree, diff)
        except GitError as exc:
            ctx.escalate(f"the patch does not apply to the moved branch head {head}: {exc}")
        new_diff = diff_against(tree, head)
        tree_ref = worktree_ref(tree)
        locks = lockfile_refs(tree)
    new_patch = make_patch(head, new_diff)
    moved = ctx.memory(REMOTE_MOVED) or {}
    detected = Boundary(moved.get("at_boundary", Boundary.GENERATING.value))
    if detected is Boundary.GENERATING and ctx.memory(PROPOSED) is not None:
        detected = Boundary.CANDIDATE_READY
    try:
        record = rebase_transition(identity, head, boundary=detected, new_worktree_ref=tree_ref,
                                   new_patch_ref=sha256_ref(new_patch), at=ctx.now(), new_lockfile_refs=locks)
    except InvalidTransitionError:
        record = rebase_transition(identity, head, boundary=Boundary.CANDIDATE_READY, new_worktree_ref=tree_ref,
                                   new_patch_ref=sha256_ref(new_patch), at=ctx.now(), new_lockfile_refs=locks)
    transitions = list(ctx.memory(TRANSITIONS, []))
    transitions.append({"transition_id": record.transition_id, "epoch": ctx.epoch,
                        **_json(record.model_dump(mode="json"))})
    ctx.remember(TRANSITIONS, transitions)
    ctx.remember(REMOTE_MOVED, None)
    ctx.remember(BASE_TREE, commit_tree_ref(workspace.repo, head))
    return record.after, new_diff


def _json(value: Any) -> Any:
    return json.loads(canonical_json(value))


# -- verification, approval, push, postcondition ---------------------------------------------------------


def _verify(ctx: RunContext, remote: Any, task: CodingTask, workspace: Workspace) -> None:
    candidate = ctx.candidate
    identity = ctx.workspace
    assert candidate is not None and identity is not None
    patch = ctx.candidate_bytes()
    _ready_workspace(ctx, remote, task, workspace, identity.base_commit)
    sandbox = verify_patch(workspace, patch, name=f"verify-{candidate.artifact_hash[7:19]}")
    ctx.charge(BudgetUsage(tool_calls=1, sandbox_seconds=sandbox.sandbox_seconds), "pytest verification in a sandbox")
    ctx.set_workspace(identity.model_copy(update={"verification_output_refs": (sandbox.output_ref,)}))
    evidence = ctx.verify(sandbox.check, inputs=sandbox.inputs())
    if not evidence.passed:
        failures = int(ctx.memory(VERIFY_FAILURES, 0)) + 1
        ctx.remember(VERIFY_FAILURES, failures)
        if failures >= 2:
            ctx.fail(f"the chosen patch failed sandbox verification {failures} times: {evidence.detail}")


def _binding_holds(ctx: RunContext) -> bool:
    """True when the passing evidence of the candidate still binds the workspace; otherwise withdraw it."""
    candidate, identity = ctx.candidate, ctx.workspace
    assert candidate is not None and identity is not None
    expected = expected_binding(candidate.artifact_hash, identity, environment_ref())
    passing = [e for e in ctx.evidence if e.passed and e.applies_to(candidate.artifact_hash)]
    problems = binding_problems(passing[-1], expected) if passing else ["no passing evidence for this patch"]
    if problems:
        ctx.withdraw_candidate("the evidence no longer binds the workspace: " + "; ".join(problems))
        return False
    return True


def _push(ctx: RunContext, task: CodingTask) -> None:
    candidate, identity = ctx.candidate, ctx.workspace
    assert candidate is not None and identity is not None
    patch = ctx.candidate_bytes()
    base_commit, _diff = parse_patch(patch)
    payload = {
        "repository": task.repository, "branch": task.branch, "base_commit": base_commit,
        "patch": patch.decode("utf-8"), "patch_hash": candidate.artifact_hash,
        "message": f"Fix failing tests: {candidate.summary}",
    }
    ctx.perform(PUSH, "git", payload, key=f"{ctx.run_id}:push:{candidate.artifact_hash[7:23]}",
                level=AuthorityLevel.EXTERNAL_MUTATE)


def _postcondition(ctx: RunContext, remote: Any, task: CodingTask, workspace: Workspace) -> None:
    """The remote's record names one push of this patch, and plain git shows exactly that patch on its base."""
    candidate = ctx.candidate
    assert candidate is not None
    base_commit, diff = parse_patch(ctx.candidate_bytes())
    head = _live_head(ctx, remote, task)
    mine = [p for p in remote.pushes() if p.get("run_id") == ctx.run_id]
    ctx.observe(f"git://{task.repository}/pushes", {"run_id": ctx.run_id}, canonical_json(mine),
                freshness_s=FRESHNESS_S)
    pushed = [p for p in mine if p.get("patch_hash") == candidate.artifact_hash]
    if len(mine) != 1 or len(pushed) != 1:
        ctx.confirm_postcondition(False, f"{len(mine)} push(es) recorded for the run, {len(pushed)} of this patch")
    commit = str(pushed[0]["outcome"]["commit"])
    _ready_workspace(ctx, remote, task, workspace, head)
    parent = git(["rev-parse", f"{commit}^"], cwd=workspace.repo).decode().strip()
    landed = git(["diff", "--binary", "--no-color", "--no-ext-diff", parent, commit], cwd=workspace.repo)
    on_branch = subprocess.run(["git", "merge-base", "--is-ancestor", commit, head], cwd=workspace.repo,
                               env=git_env(), capture_output=True).returncode == 0
    ctx.confirm_postcondition(
        on_branch and parent == base_commit and landed == diff,
        f"push {commit[:12]} of {candidate.artifact_hash[:19]} is {'on' if on_branch else 'NOT on'} {task.branch} "
        f"(head {head[:12]}), parent {parent[:12]} (base {base_commit[:12]}), "
        f"landed diff {'==' if landed == diff else '!='} patch",
    )


# -- the agent --------------------------------------------------------------------------------------------


def coding_agent(ctx: RunContext) -> None:
    """Run (or resume) a coding run until it ends."""
    remote = ctx.tool("git")
    models = ctx.tool("patch_model")
    try:
        task = CodingTask(ctx.task)
    except ValueError as exc:
        ctx.fail(str(exc))
    workspace = Workspace.create(f"{ctx.run_id}-e{ctx.epoch}")
    try:
        while ctx.boundary not in TERMINAL:
            boundary = ctx.boundary
            if boundary in _BEFORE_COMMIT:
                _watch_remote(ctx, remote, task)
                if ctx.boundary is not boundary:
                    continue  # the remote moved: the candidate was withdrawn
            if boundary is Boundary.GENERATING:
                _search_step(ctx, remote, models, task, workspace)
            elif boundary is Boundary.CANDIDATE_READY:
                _verify(ctx, remote, task, workspace)
            elif boundary in (Boundary.VERIFIED, Boundary.AWAITING_AUTHORITY):
                if _binding_holds(ctx):
                    ctx.request_approval(PUSH, level=AuthorityLevel.EXTERNAL_MUTATE)
            elif boundary is Boundary.AUTHORIZED:
                if _binding_holds(ctx):
                    _push(ctx, task)
            elif boundary is Boundary.COMMITTED:
                _postcondition(ctx, remote, task, workspace)
            else:
                ctx.fail(f"coding agent cannot continue from {boundary.value}")
    finally:
        workspace.close()


__all__ = ["CodingTask", "coding_agent"]
