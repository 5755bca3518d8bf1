"""Checkpoint rows stored as deltas of their parent, so a manifest costs what changed.

Most fields of a checkpoint (release, environment, placement, ledgers,
authority) are the same refs as in its parent. A row holds either the full
body or only the fields that differ from the parent's body; every
`FULL_EVERY`-th checkpoint of a run is stored whole, so rebuilding any body
reads at most that many rows. Rebuilt bodies are validated like any other,
so a corrupted delta fails the checkpoint's own hash check.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

FULL = "full"
DELTA = "delta"
FULL_EVERY = 32


def encode(body: Mapping[str, Any], parent: Mapping[str, Any] | None, seq: int) -> tuple[str, str]:
    """(kind, text) to store for `body` given its parent's body (None: no parent known)."""
    if parent is None or seq % FULL_EVERY == 0:
        return FULL, json.dumps(body, separators=(",", ":"), ensure_ascii=False)
    changed = {key: value for key, value in body.items() if key not in parent or parent[key] != value}
    removed = [key for key in parent if key not in body]
    return DELTA, json.dumps({"set": changed, "unset": removed}, separators=(",", ":"), ensure_ascii=False)


def rebuild(rows: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """The body of the last of `rows` ((kind, text) oldest first, starting with a full row)."""
    body: dict[str, Any] | None = None
    for kind, text in rows:
        document = json.loads(text)
        if kind == FULL:
            body = document
            continue
        if kind != DELTA or body is None:
            raise ValueError(f"checkpoint row of kind {kind!r} cannot be applied here")
        body = {key: value for key, value in body.items() if key not in set(document.get("unset", ()))}
        body.update(document["set"])
    if body is None:
        raise ValueError("no checkpoint rows to rebuild from")
    return body
