"""Pieces for the coding agent's tests: a guarded git remote, in-process services, plain readers."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from baton.authority import AuthorityService
from baton.authority_keys import JWKS_FILE
from baton.targets.git_remote_service import PUSH_POLICY, GitRemoteClient, git_remote_process
from baton.targets.service_process import ServiceProcess

REPO = "calc"


@pytest.fixture
def remote_dir(tmp_path: Path) -> Path:
    return tmp_path / "targets" / "git"


@pytest.fixture
def remote(remote_dir: Path, authority: AuthorityService, tmp_path: Path) -> Iterator[ServiceProcess]:
    """A git remote that checks capabilities itself against the test authority's published keys."""
    trust = tmp_path / "authority" / JWKS_FILE
    assert trust.exists()
    with git_remote_process(remote_dir, guard=PUSH_POLICY.arguments(trust), repositories=[REPO]) as process:
        yield process


@pytest.fixture
def remote_client(remote: ServiceProcess) -> Iterator[GitRemoteClient]:
    with GitRemoteClient(remote.url) as client:
        yield client


def jsonl(path: Path) -> list[dict[str, Any]]:
    """A JSON Lines file read with the standard library alone (complete lines only)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines(keepends=True)
            if line.endswith("\n") and line.strip()]


def plain_checkpoints(home: Path, run_id: str) -> list[dict[str, Any]]:
    """Every checkpoint body of a run, rebuilt from the SQLite rows with sqlite3 and json alone."""
    conn = sqlite3.connect(f"file:{home / 'baton.db'}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT checkpoint_id, seq, checkpoint_hash, parent_checkpoint_id, body_kind, body "
                            "FROM checkpoints WHERE run_id = ? ORDER BY seq", (run_id,)).fetchall()
    finally:
        conn.close()
    bodies: list[dict[str, Any]] = []
    for checkpoint_id, seq, checkpoint_hash, parent_id, kind, text in rows:
        document = json.loads(text)
        if kind == "full":
            body = dict(document)
        else:
            body = {k: v for k, v in bodies[-1].items() if k not in set(document.get("unset", ()))}
            body.update(document["set"])
        body.update(checkpoint_id=checkpoint_id, seq=seq, checkpoint_hash=checkpoint_hash,
                    parent_checkpoint_id=parent_id)
        bodies.append(body)
    return bodies


def plain_blob(home: Path, ref: str) -> Any:
    """A JSON blob of the store read straight from its file (`blobs/<2 hex>/<62 hex>`)."""
    digest = ref.removeprefix("sha256:")
    return json.loads((home / "blobs" / digest[:2] / digest[2:]).read_bytes())
