"""Plain git for the git remote target: bare repositories, the seed project, applying a push.

Everything here shells out to the `git` binary with a fixed identity and no
user configuration (`GIT_CONFIG_GLOBAL=/dev/null`), so results do not depend
on the machine. A push is applied with plumbing inside the bare repository:
read the base tree into a private index, `git apply --cached` the patch,
write the tree, create the commit, and move the branch with
`git update-ref <ref> <new> <old>`, which refuses if the branch moved
meanwhile (a compare-and-swap).

The seed project (`SEED_PROJECT`) is a tiny Python package with two bugs and
five tests, two of which pass: what the coding agent is asked to fix.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from baton import clock
from baton.errors import BatonError

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "Baton Remote",
    "GIT_AUTHOR_EMAIL": "remote@baton.invalid",
    "GIT_COMMITTER_NAME": "Baton Remote",
    "GIT_COMMITTER_EMAIL": "remote@baton.invalid",
}
REPO_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
BRANCH_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_./-]{0,99}$")
SHA = re.compile(r"^[0-9a-f]{40}$")

SEED_PROJECT: dict[str, str] = {
    "README.md": "# calc\n\nSmall statistics helpers. Run the tests with `python -m pytest -q`.\n",
    "pytest.ini": "[pytest]\npythonpath = .\ntestpaths = tests\n",
    "requirements.lock": "# locked test dependencies\npytest==8.*\n",
    "calc/__init__.py": '"""Small statistics helpers."""\n',
    "calc/stats.py": (
        '"""Means and bounds."""\n'
        "\n"
        "\n"
        "def mean(values):\n"
        '    """The arithmetic mean of a non-empty sequence."""\n'
        "    return sum(values) / (len(values) - 1)\n"
        "\n"
        "\n"
        "def clamp(value, low, high):\n"
        '    """`value` limited to the closed interval [low, high]."""\n'
        "    if value < low:\n"
        "        return low\n"
        "    if value > high:\n"
        "        return low\n"
        "    return value\n"
    ),
    "tests/test_stats.py": (
        "from calc.stats import clamp, mean\n"
        "\n"
        "\n"
        "def test_mean():\n"
        "    assert mean([1, 2, 3]) == 2\n"
        "\n"
        "\n"
        "def test_mean_single():\n"
        "    assert mean([4]) == 4\n"
        "\n"
        "\n"
        "def test_clamp_inside():\n"
        "    assert clamp(5, 0, 10) == 5\n"
        "\n"
        "\n"
        "def test_clamp_low():\n"
        "    assert clamp(-1, 0, 10) == 0\n"
        "\n"
        "\n"
        "def test_clamp_high():\n"
        "    assert clamp(11, 0, 10) == 10\n"
    ),
}


class GitError(BatonError):
    """A git command failed; the message carries its stderr."""


class StaleBaseError(BatonError):
    """The branch is no longer at the base commit the push was prepared against."""


def git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment every git call runs in: fixed identity, no user or system configuration."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_IDENTITY)
    env.update({"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0"})
    # Commits are dated by Baton's clock (the wall clock live, the virtual one in the simulation, where a
    # commit's hash must not depend on when a seed happened to run).
    stamp = f"@{int(clock.now().timestamp())} +0000"
    env.update({"GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp})
    env.update(extra or {})
    return env


def git(args: Sequence[str], *, cwd: Path | None = None, git_dir: Path | None = None, stdin: bytes | None = None,
        env: Mapping[str, str] | None = None, check: bool = True) -> bytes:
    """Run one git command; its stdout, or GitError (with stderr) when it fails and `check`."""
    command = ["git"] + ([f"--git-dir={git_dir}"] if git_dir is not None else []) + list(args)
    done = subprocess.run(command, cwd=cwd, input=stdin, capture_output=True, env=git_env(env), timeout=60)
    if check and done.returncode != 0:
        raise GitError(f"git {' '.join(args)} failed ({done.returncode}): {done.stderr.decode(errors='replace').strip()}")
    return done.stdout


def branch_head(bare: Path, branch: str) -> str | None:
    """The commit `branch` points at in a repository, or None when it does not exist."""
    out = git(["rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}"], git_dir=bare, check=False)
    text = out.decode().strip()
    return text if SHA.match(text) else None


def create_seed_repository(bare: Path, files: Mapping[str, str] = SEED_PROJECT, *, branch: str = "main") -> str:
    """Create a bare repository holding `files` in one commit on `branch`; return that commit."""
    bare.parent.mkdir(parents=True, exist_ok=True)
    git(["init", "--quiet", "--bare", f"--initial-branch={branch}", str(bare)])
    with tempfile.TemporaryDirectory(prefix="seed-") as scratch:
        work = Path(scratch)
        git(["init", "--quiet", f"--initial-branch={branch}"], cwd=work)
        for name, text in files.items():
            path = work / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        git(["add", "--all"], cwd=work)
        git(["commit", "--quiet", "-m", "calc: first version"], cwd=work,
            env={"GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"})
        git(["push", "--quiet", str(bare), f"HEAD:refs/heads/{branch}"], cwd=work)
    head = branch_head(bare, branch)
    assert head is not None
    return head


def commit_file(bare: Path, branch: str, path: str, text: str, message: str) -> str:
    """Commit one file's new content on top of `branch` (an upstream change); return the new commit."""
    base = branch_head(bare, branch)
    if base is None:
        raise GitError(f"no branch {branch!r}")
    blob = git(["hash-object", "-w", "--stdin"], git_dir=bare, stdin=text.encode("utf-8")).decode().strip()
    with tempfile.TemporaryDirectory(prefix="index-") as scratch:
        env = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
        git(["read-tree", base], git_dir=bare, env=env)
        git(["update-index", "--add", "--cacheinfo", f"100644,{blob},{path}"], git_dir=bare, env=env)
        tree = git(["write-tree"], git_dir=bare, env=env).decode().strip()
    commit = git(["commit-tree", tree, "-p", base, "-m", message], git_dir=bare).decode().strip()
    git(["update-ref", f"refs/heads/{branch}", commit, base], git_dir=bare)
    return commit


@dataclass(frozen=True)
class AppliedPush:
    """What a push did to the bare repository."""

    commit: str
    tree: str
    previous: str


def apply_patch_commit(bare: Path, branch: str, base_commit: str, patch: bytes, message: str) -> AppliedPush:
    """Commit `patch` on `base_commit` and move `branch` there, only if the branch is still at `base_commit`.

    StaleBaseError when the branch moved (checked first, and again by the
    compare-and-swap of update-ref); GitError when the patch does not apply.
    """
    head = branch_head(bare, branch)
    if head != base_commit:
        raise StaleBaseError(f"branch {branch!r} is at {head}, not at the push's base {base_commit}")
    with tempfile.TemporaryDirectory(prefix="push-") as scratch:
        env = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
        patch_file = Path(scratch) / "change.patch"
        patch_file.write_bytes(patch)
        git(["read-tree", base_commit], git_dir=bare, env=env)
        git(["apply", "--cached", "--whitespace=nowarn", str(patch_file)], git_dir=bare, env=env)
        tree = git(["write-tree"], git_dir=bare, env=env).decode().strip()
    commit = git(["commit-tree", tree, "-p", base_commit, "-m", message], git_dir=bare).decode().strip()
    moved = subprocess.run(
        ["git", f"--git-dir={bare}", "update-ref", f"refs/heads/{branch}", commit, base_commit],
        capture_output=True, env=git_env(), timeout=60,
    )
    if moved.returncode != 0:
        raise StaleBaseError(f"branch {branch!r} moved while the push was applied: {moved.stderr.decode().strip()}")
    return AppliedPush(commit=commit, tree=tree, previous=base_commit)
