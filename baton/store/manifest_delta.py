"""Checkpoint rows stored as deltas of their parent, so a manifest costs what changed.

Most fields of a checkpoint (release, environment, placement, ledgers,
authority) are the same refs as in its parent. A row holds either the full
body or only the fields that differ from the parent's body; the identity
fields the row already has as columns (id, seq, hash, parent id) and the
parent's hash (the previous row's hash) are not repeated in a delta. Every
`FULL_EVERY`-th checkpoint of a run is stored whole, so rebuilding any body
reads at most that many rows. Rebuilt bodies are validated like any other,
so a corrupted delta or column fails the checkpoint's own hash check.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

FULL = "full"
DELTA = "delta"
FULL_EVERY = 32

_FROM_COLUMNS = ("checkpoint_id", "seq", "parent_checkpoint_id", "parent_checkpoint_hash", "checkpoint_hash")


@dataclass(frozen=True)
class StoredRow:
    """The columns of one checkpoint row that rebuilding needs."""

    checkpoint_id: str
    seq: int
    checkpoint_hash: str
    parent_checkpoint_id: str | None
    kind: str
    text: str


def encode(body: Mapping[str, Any], parent: Mapping[str, Any] | None, seq: int) -> tuple[str, str]:
    """(kind, text) to store for `body` given its parent's body (None: no parent known)."""
    if parent is None or seq % FULL_EVERY == 0:
        return FULL, json.dumps(body, separators=(",", ":"), ensure_ascii=False)
    changed = {
        key: value
        for key, value in body.items()
        if key not in _FROM_COLUMNS and (key not in parent or parent[key] != value)
    }
    removed = [key for key in parent if key not in body]
    return DELTA, json.dumps({"set": changed, "unset": removed}, separators=(",", ":"), ensure_ascii=False)


def apply(parent: Mapping[str, Any], row: StoredRow) -> dict[str, Any]:
    """The body of delta `row` whose parent's body is `parent`."""
    if row.kind != DELTA:
        raise ValueError(f"checkpoint row {row.checkpoint_id} of kind {row.kind!r} is not a delta")
    document = json.loads(row.text)
    unset = set(document.get("unset", ()))
    body = {key: value for key, value in parent.items() if key not in unset}
    body.update(document["set"])
    body.update(
        checkpoint_id=row.checkpoint_id,
        seq=row.seq,
        parent_checkpoint_id=row.parent_checkpoint_id,
        parent_checkpoint_hash=parent.get("checkpoint_hash"),
        checkpoint_hash=row.checkpoint_hash,
    )
    return body


def rebuild(rows: Iterable[StoredRow]) -> dict[str, Any]:
    """The body of the last of `rows` (oldest first, starting with a full row)."""
    body: dict[str, Any] | None = None
    for row in rows:
        if row.kind == FULL:
            body = dict(json.loads(row.text))
        elif body is None:
            raise ValueError(f"checkpoint row {row.checkpoint_id} is a delta with no full row before it")
        else:
            body = apply(body, row)
    if body is None:
        raise ValueError("no checkpoint rows to rebuild from")
    return body
