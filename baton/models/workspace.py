"""Workspace identity of a coding run."""

from __future__ import annotations

from pydantic import Field

from baton.models.base import Record, Ref


class WorkspaceIdentity(Record):
    """Repository, base commit, worktree and patch hashes, build environment and test commands."""

    repository_url: str = Field(min_length=1)
    base_commit: str = Field(pattern=r"^[0-9a-f]{7,64}$")
    worktree_ref: Ref
    patch_ref: Ref | None = None
    build_environment_ref: Ref | None = None
    lockfile_refs: dict[str, Ref] = Field(default_factory=dict)
    test_commands: tuple[str, ...] = ()
    verification_output_refs: tuple[Ref, ...] = ()
