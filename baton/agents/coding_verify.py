"""Verifying a candidate patch: pytest in a fresh sandbox worktree, evidence bound to everything it depended on.

`verify_patch` checks out the patch's own base commit in a new worktree,
applies the patch, hashes the resulting worktree and lock files, and runs the
real pytest. The `SandboxEvidence` it returns binds: the patch hash (sha256
of the exact candidate bytes), the hash of the diff alone, the base commit,
the worktree hash, the lock files, the test command, the environment
identity and the hash of the output. `check` is the verifier the SDK calls
with the candidate's bytes: it refuses any bytes other than the ones the
sandbox ran (evidence for other bytes is never accepted).

`binding_problems` says why recorded evidence no longer applies to the run's
current patch and workspace (a rebase, another environment, another lock
file); an empty list means it still binds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import JsonValue

from baton.agents.coding_workspace import (
    TEST_COMMAND_TEXT,
    Workspace,
    apply_diff,
    environment_ref,
    lockfile_refs,
    parse_patch,
    run_pytest,
    worktree_ref,
)
from baton.agents.verifiers import Verdict
from baton.identity import sha256_ref
from baton.models import VerdictResult, VerifierEvidence, WorkspaceIdentity

SANDBOX_VERIFIER = "sandbox-pytest-1"
BOUND_FIELDS: tuple[str, ...] = (
    "patch_hash", "base_commit", "worktree_ref", "lockfile_refs", "test_command", "environment_ref",
)


@dataclass(frozen=True)
class SandboxEvidence:
    """One sandbox verification of one exact patch."""

    patch_hash: str
    diff_hash: str
    base_commit: str
    worktree_ref: str
    lockfile_refs: dict[str, str]
    test_command: str
    environment_ref: str
    output_ref: str
    exit_code: int
    passed: int
    failed: int
    errors: int
    sandbox_seconds: float

    @property
    def all_passed(self) -> bool:
        return self.exit_code == 0 and self.passed > 0 and self.failed == 0 and self.errors == 0

    def inputs(self) -> dict[str, JsonValue]:
        """What the evidence binds, as the SDK records it in `VerifierEvidence.inputs`."""
        return {
            "patch_hash": self.patch_hash, "diff_hash": self.diff_hash, "base_commit": self.base_commit,
            "worktree_ref": self.worktree_ref, "lockfile_refs": dict(self.lockfile_refs),
            "test_command": self.test_command, "environment_ref": self.environment_ref,
            "output_ref": self.output_ref, "exit_code": self.exit_code,
            "tests": {"passed": self.passed, "failed": self.failed, "errors": self.errors},
        }

    def check(self, patch: bytes) -> Verdict:
        """The verdict for `patch`: this run's result if they are the very bytes it ran, else FAIL."""
        if sha256_ref(patch) != self.patch_hash:
            return Verdict(VerdictResult.FAIL, f"evidence is for {self.patch_hash}, not for {sha256_ref(patch)}",
                           SANDBOX_VERIFIER)
        summary = f"{self.passed} passed, {self.failed} failed, {self.errors} errors (exit {self.exit_code})"
        if self.all_passed:
            return Verdict(VerdictResult.PASS, f"pytest on {self.base_commit[:12]} + patch: {summary}", SANDBOX_VERIFIER)
        return Verdict(VerdictResult.FAIL, f"pytest on {self.base_commit[:12]} + patch: {summary}", SANDBOX_VERIFIER)


def verify_patch(workspace: Workspace, patch: bytes, *, name: str) -> SandboxEvidence:
    """Run the tests on `patch` applied to its own base commit, in a new sandbox worktree."""
    base_commit, diff = parse_patch(patch)
    with workspace.sandbox(name, base_commit) as tree:
        apply_diff(tree, diff)
        tree_ref = worktree_ref(tree)
        locks = lockfile_refs(tree)
        run = run_pytest(tree)
    return SandboxEvidence(
        patch_hash=sha256_ref(patch), diff_hash=sha256_ref(diff), base_commit=base_commit, worktree_ref=tree_ref,
        lockfile_refs=locks, test_command=TEST_COMMAND_TEXT, environment_ref=environment_ref(),
        output_ref=sha256_ref(run.output), exit_code=run.exit_code, passed=run.passed, failed=run.failed,
        errors=run.errors, sandbox_seconds=run.seconds,
    )


def expected_binding(patch_hash: str, workspace: WorkspaceIdentity, env_ref: str) -> dict[str, JsonValue]:
    """What evidence must say to apply to `patch_hash` on `workspace` in environment `env_ref`."""
    return {
        "patch_hash": patch_hash, "base_commit": workspace.base_commit, "worktree_ref": workspace.worktree_ref,
        "lockfile_refs": dict(workspace.lockfile_refs),
        "test_command": workspace.test_commands[0] if workspace.test_commands else TEST_COMMAND_TEXT,
        "environment_ref": env_ref,
    }


def binding_problems(evidence: VerifierEvidence, expected: Mapping[str, JsonValue]) -> list[str]:
    """Each bound field of `evidence` that differs from `expected` (empty: the evidence still binds)."""
    problems = []
    if evidence.verifier_version != SANDBOX_VERIFIER:
        problems.append(f"verifier {evidence.verifier_version} is not {SANDBOX_VERIFIER}")
    if evidence.candidate_hash != expected.get("patch_hash"):
        problems.append(f"evidence is for candidate {evidence.candidate_hash}")
    for name in BOUND_FIELDS:
        if evidence.inputs.get(name) != expected.get(name):
            problems.append(f"{name}: evidence has {evidence.inputs.get(name)!r}, now {expected.get(name)!r}")
    return problems
