"""Pieces for the coding agent's tests: a guarded git remote, in-process services, plain readers."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from baton.authority import AuthorityService
from baton.authority_keys import JWKS_FILE
from baton.faults.oracles import inflate
from baton.store.blobs_sql import decode_body
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


def _row_text(text: str | None, packed: bytes | None) -> str:
    """A row's JSON body: kept as text, or packed (inflated by the fault matrix's standard-library oracle)."""
    if packed is None:
        return str(text)
    inflated = inflate(bytes(packed))
    assert inflated is not None, "a packed checkpoint row does not inflate"
    return inflated.decode("utf-8")


def plain_checkpoints(home: Path, run_id: str) -> list[dict[str, Any]]:
    """Every checkpoint body of a run, rebuilt from the SQLite rows with sqlite3, zlib and json alone."""
    conn = sqlite3.connect(f"file:{home / 'baton.db'}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT checkpoint_id, seq, checkpoint_hash, parent_checkpoint_id, body_kind, body, packed "
                            "FROM checkpoints WHERE run_id = ? ORDER BY seq", (run_id,)).fetchall()
    finally:
        conn.close()
    bodies: list[dict[str, Any]] = []
    for checkpoint_id, seq, checkpoint_hash, parent_id, kind, text, packed in rows:
        document = json.loads(_row_text(text, packed))
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
    """A JSON blob of the store read straight from disk (see `plain_bytes`)."""
    return json.loads(plain_bytes(home, ref))


class CodingStack:
    """The authority, the deploy/corpus/git targets and a supervisor whose workers start on demand."""

    def __init__(self, home: Path, authority: Any, supervisor: Any, git_remote: ServiceProcess) -> None:
        self.home = home
        self.authority = authority
        self.supervisor = supervisor
        self.git_remote = git_remote

    def start_worker(self, name: str, placement: str) -> Any:
        slot = self.supervisor.add(name, placement)
        self.supervisor.start(slot)
        return slot


@contextmanager
def coding_stack(home: Path, repositories: list[str], **options: str) -> Iterator[CodingStack]:
    """Everything a live coding run needs, in the fleet's order: authority, targets, then workers."""
    from baton.authority_http import AuthorityServiceProcess
    from baton.runtime.supervisor import Supervisor
    from baton.targets.service_process import target_data_dir

    from builders.live import live_targets

    with AuthorityServiceProcess(home / "authority", f"sqlite:///{home / 'baton.db'}") as authority, \
            live_targets(home), \
            git_remote_process(target_data_dir("git", home), guard=PUSH_POLICY.arguments(home / "authority" / JWKS_FILE),
                               repositories=repositories) as git_remote:
        supervisor = Supervisor(home=home, log_dir=home / "logs", history_path=home / "history.jsonl",
                                options={"lease-ttl-s": "3", "authority-url": authority.url, **options},
                                provision=authority.provision)
        try:
            yield CodingStack(home, authority, supervisor, git_remote)
        finally:
            supervisor.stop_all(grace_s=3.0)


def plain_bytes(home: Path, ref: str) -> bytes:
    """Raw blob bytes straight from disk: a large blob's file (`blobs/<2 hex>/<62 hex>`), else the
    SQLite store's blob table, keyed by the raw digest, read with sqlite3 alone."""
    digest = ref.removeprefix("sha256:")
    path = home / "blobs" / digest[:2] / digest[2:]
    if path.exists():
        return path.read_bytes()
    conn = sqlite3.connect(f"file:{home / 'baton.db'}?mode=ro", uri=True)
    try:
        row = conn.execute("SELECT data, codec FROM blobs WHERE digest = ?", (bytes.fromhex(digest),)).fetchone()
    finally:
        conn.close()
    if row is None:
        raise FileNotFoundError(f"blob {ref} is neither a file under {home / 'blobs'} nor a row of the blob table")
    return decode_body(ref, int(row[1]), bytes(row[0]))  # the row may keep its body compressed
