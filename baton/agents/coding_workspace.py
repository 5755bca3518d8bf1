"""The coding agent's physical workspace: a local clone, sandbox worktrees, patches, pytest.

None of this is portable state. A new owner builds its own workspace from
what the checkpoint names (repository, base commit) and checks the rebuilt
snapshot against the recorded hashes before relying on it.

A candidate patch is the exact bytes the run proposes, approves and pushes:
a two-line header naming its base commit, a blank line, then `git diff`
output. The header makes a patch meaningless on any other base (a rebased
patch is new bytes, hence a new hash); `git apply` skips it.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from baton.identity import canonical_json, sha256_ref
from baton.targets.git_remote_repo import GitError, git, git_env

PATCH_MAGIC = "baton-patch: 1"
LOCKFILES: tuple[str, ...] = ("requirements.lock", "poetry.lock", "uv.lock")
TEST_COMMAND: tuple[str, ...] = ("-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfE")
TEST_COMMAND_TEXT = "python " + " ".join(TEST_COMMAND)
"""The test command as recorded in evidence (the interpreter is part of the environment identity)."""

_COUNT = re.compile(r"(\d+) (passed|failed|errors?)\b")
_FAILED_LINE = re.compile(r"^(?:FAILED|ERROR) (\S+)")


class PatchFormatError(ValueError):
    """Bytes that are not a candidate patch of this agent."""


def make_patch(base_commit: str, diff: bytes) -> bytes:
    """Candidate bytes: the header naming `base_commit`, then the diff."""
    return f"{PATCH_MAGIC}\nbase-commit: {base_commit}\n\n".encode() + diff


def parse_patch(patch: bytes) -> tuple[str, bytes]:
    """(base commit, diff) of candidate bytes; PatchFormatError for anything else."""
    head, sep, diff = patch.partition(b"\n\n")
    lines = head.decode("utf-8", errors="replace").splitlines()
    if not sep or len(lines) != 2 or lines[0] != PATCH_MAGIC or not lines[1].startswith("base-commit: "):
        raise PatchFormatError("not a baton candidate patch (expected the baton-patch header and a base commit)")
    base = lines[1].removeprefix("base-commit: ").strip()
    if not re.fullmatch(r"[0-9a-f]{40}", base):
        raise PatchFormatError(f"malformed base commit {base!r}")
    return base, diff


@dataclass(frozen=True)
class TestRun:
    """One pytest run in a sandbox and what it printed."""

    exit_code: int
    passed: int
    failed: int
    errors: int
    failing: tuple[str, ...]
    output: bytes
    seconds: float

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.errors

    @property
    def all_passed(self) -> bool:
        return self.exit_code == 0 and self.total > 0 and self.failed == 0 and self.errors == 0

    @property
    def score(self) -> float:
        return 0.0 if self.total == 0 else round(self.passed / self.total, 6)


def run_pytest(worktree: Path) -> TestRun:
    """Run the real pytest (this interpreter) in `worktree`; plugins off, no cache, no bytecode."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}
    env.update({"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0"})
    env.pop("PYTHONPATH", None)
    started = time.monotonic()
    done = subprocess.run([sys.executable, *TEST_COMMAND], cwd=worktree, capture_output=True, env=env, timeout=120)
    seconds = time.monotonic() - started
    text = done.stdout.decode("utf-8", errors="replace")
    counts = {"passed": 0, "failed": 0, "errors": 0}
    summary = [line for line in text.splitlines() if _COUNT.search(line)]
    for number, kind in _COUNT.findall(summary[-1] if summary else ""):
        counts["errors" if kind.startswith("error") else kind] += int(number)
    failing = tuple(m.group(1) for line in text.splitlines() if (m := _FAILED_LINE.match(line)))
    return TestRun(done.returncode, counts["passed"], counts["failed"], counts["errors"], failing,
                   done.stdout + done.stderr, seconds)


def sandbox_environment() -> dict[str, str]:
    """What the sandbox runs with: interpreter, pytest, git and platform versions."""
    try:
        import pytest

        pytest_version = pytest.__version__
    except ImportError:  # pragma: no cover - the dev install has it
        pytest_version = "absent"
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "pytest": pytest_version,
        "git": git(["--version"]).decode().strip(),
        "platform": f"{platform.system()}-{platform.machine()}",
    }


def environment_ref() -> str:
    """The hash of `sandbox_environment()` (the build environment identity)."""
    return sha256_ref(canonical_json(sandbox_environment()))


@dataclass
class Workspace:
    """A local clone of the remote repository and the sandbox worktrees made from it."""

    root: Path
    repo: Path = field(init=False)

    def __post_init__(self) -> None:
        self.repo = self.root / "repo"

    @classmethod
    def create(cls, prefix: str) -> Workspace:
        """A fresh workspace in a private temporary directory."""
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", prefix)[:60]
        return cls(Path(tempfile.mkdtemp(prefix=f"baton-coding-{safe}-")))

    @property
    def cloned(self) -> bool:
        return (self.repo / ".git").exists()

    def clone(self, source: str) -> None:
        """Clone `source` (a bare repository path) unless already cloned; fetch otherwise."""
        if self.cloned:
            git(["fetch", "--quiet", "origin", "+refs/heads/*:refs/remotes/origin/*"], cwd=self.repo)
            return
        git(["clone", "--quiet", "--no-checkout", source, str(self.repo)])

    def has_commit(self, commit: str) -> bool:
        done = subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=self.repo, env=git_env(),
                              capture_output=True)
        return done.returncode == 0

    @contextmanager
    def sandbox(self, name: str, commit: str) -> Iterator[Path]:
        """An isolated worktree at `commit`, removed afterwards."""
        path = self.root / "sandboxes" / re.sub(r"[^A-Za-z0-9_.-]", "_", name)
        if path.exists():
            self._remove(path)
        git(["worktree", "add", "--quiet", "--detach", str(path), commit], cwd=self.repo)
        try:
            yield path
        finally:
            self._remove(path)

    def _remove(self, path: Path) -> None:
        subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=self.repo, env=git_env(),
                       capture_output=True)
        shutil.rmtree(path, ignore_errors=True)
        subprocess.run(["git", "worktree", "prune"], cwd=self.repo, env=git_env(), capture_output=True)

    def close(self) -> None:
        """Delete the workspace (physical state only)."""
        shutil.rmtree(self.root, ignore_errors=True)


def apply_diff(worktree: Path, diff: bytes) -> None:
    """Apply a diff (or candidate patch) to a worktree; GitError if it does not apply."""
    if not diff.strip():
        return
    patch_file = worktree.parent / f".{worktree.name}.patch"
    patch_file.write_bytes(diff)
    try:
        git(["apply", "--whitespace=nowarn", str(patch_file)], cwd=worktree)
    finally:
        patch_file.unlink(missing_ok=True)


def diff_against(worktree: Path, base_commit: str) -> bytes:
    """Everything the worktree changes relative to `base_commit`, as `git diff` bytes."""
    git(["add", "--all"], cwd=worktree)
    return git(["diff", "--cached", "--binary", "--no-color", "--no-ext-diff", base_commit], cwd=worktree)


def worktree_ref(worktree: Path) -> str:
    """The content hash of a worktree: sha256 of `git ls-tree -r` of its staged tree (paths, modes, blobs)."""
    git(["add", "--all"], cwd=worktree)
    tree = git(["write-tree"], cwd=worktree).decode().strip()
    return sha256_ref(git(["ls-tree", "-r", "--full-tree", tree], cwd=worktree))


def commit_tree_ref(repo: Path, commit: str) -> str:
    """`worktree_ref` of a commit's tree, without checking it out."""
    return sha256_ref(git(["ls-tree", "-r", "--full-tree", commit], cwd=repo))


def lockfile_refs(worktree: Path) -> dict[str, str]:
    """The hash of each lock file present in the worktree."""
    return {name: sha256_ref((worktree / name).read_bytes()) for name in LOCKFILES if (worktree / name).is_file()}


def read_sources(worktree: Path) -> dict[str, str]:
    """Every tracked or new Python file of the worktree, by relative path (what a model is shown)."""
    files = {}
    for path in sorted(worktree.rglob("*.py")):
        relative = path.relative_to(worktree).as_posix()
        if relative.startswith(".git/") or "/." in f"/{relative}":
            continue
        files[relative] = path.read_text(encoding="utf-8")
    return files


__all__ = [
    "GitError", "LOCKFILES", "PatchFormatError", "TEST_COMMAND_TEXT", "TestRun", "Workspace", "apply_diff",
    "commit_tree_ref", "diff_against", "environment_ref", "lockfile_refs", "make_patch", "parse_patch",
    "read_sources", "run_pytest", "sandbox_environment", "worktree_ref",
]
