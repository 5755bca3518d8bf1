"""Independent audit of a target's side effects, from its JSON Lines file alone.

Nothing here asks the service or trusts its in-memory state: it reads the
file the service fsynced, line by line, with the standard `json` module. The
same count takes one shell line (see docs/targets.md):

    jq -r .idempotency_key deployments.jsonl | sort | uniq -c
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from baton.checker import TargetEffect


def _complete_lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    data = path.read_bytes()
    complete = data[: data.rfind(b"\n") + 1]  # a torn last line was never acknowledged
    return [json.loads(line) for line in complete.splitlines() if line.strip()]


def count_by_key(path: Path) -> dict[str, Any]:
    """`{"file", "total", "per_key", "duplicates"}`: side effects per idempotency key."""
    per_key = Counter(str(line["idempotency_key"]) for line in _complete_lines(path))
    return {
        "file": path.name,
        "total": sum(per_key.values()),
        "per_key": dict(sorted(per_key.items())),
        "duplicates": {key: count for key, count in sorted(per_key.items()) if count > 1},
    }


def effects_of(path: Path) -> list[TargetEffect]:
    """The file's side effects as `baton.checker.TargetEffect`s, in the target's order."""
    return [
        TargetEffect(
            seq=int(line["seq"]),
            run_id=str(line["run_id"]),
            idempotency_key=str(line["idempotency_key"]),
            operation_id=str(line["operation_id"]),
            epoch=int(line["epoch"]),
        )
        for line in _complete_lines(path)
    ]
