"""Print the kill-point table (Markdown) from the JSON lines `test_kill_points.py` writes.

    BATON_KILL_POINT_REPORT=/tmp/kill-points.jsonl .venv/bin/python -m pytest -q -n 0 tests/crash/test_kill_points.py
    .venv/bin/python tests/crash/kill_point_table.py /tmp/kill-points.jsonl

Every number comes from a live run: the effects from the deploy target's own
`deployments.jsonl`, the owners from the lease grants, the recovery from
`baton recover --json`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from baton.fault_points import KillPoint

WHO = {
    KillPoint.PREPARE_REQUESTED: "coordinator", KillPoint.PREPARE_RESERVED: "coordinator",
    KillPoint.COMMIT_TRANSFERRED: "coordinator", KillPoint.ADOPT_CLAIMED: "adopting worker",
    KillPoint.RESTORE_STARTED: "adopting worker", KillPoint.CONFIRM_SEALED: "adopting worker",
}
ORDER = list(WHO)


def _owners(row: dict[str, object]) -> str:
    pairs = zip(row["epochs"], row["owners"], strict=True)  # type: ignore[call-overload]
    return ", ".join(f"{epoch}:{owner.removeprefix('worker:').removeprefix('placement:')}" for epoch, owner in pairs)


def table(rows: list[dict[str, object]]) -> str:
    """The Markdown table, one line per (point, backend), in the order of the move."""
    rows = sorted(rows, key=lambda r: (ORDER.index(KillPoint(str(r["point"]))), str(r["backend"])))
    lines = [
        "| kill point | process killed | backend | recovery (`baton recover`) | 2nd recover | run | finished by "
        "(placement) | epoch:owner grants | effects in target file (per logical op / per key) | kill→end s | test s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        point = KillPoint(str(r["point"]))
        per_op = ", ".join(f"{op}: {n}" for op, n in r["effects_per_operation"].items())  # type: ignore[attr-defined]
        per_key = max(r["effects_per_key"].values(), default=0)  # type: ignore[attr-defined]
        recovery = "; ".join(r["recovery"]) or "none needed (the target's worker adopted the reservation)"  # type: ignore[arg-type]
        lines.append(
            f"| `{point.value}` | {WHO[point]} | {r['backend']} | {recovery} | {r['second_recovery']} actions | "
            f"{r['status']} | {str(r['finished_by']).removeprefix('worker:')} ({r['final_placement']}) | "
            f"{_owners(r)} | {r['effects_total']} total; {per_op}; max {per_key} per key | "
            f"{r['kill_to_end_s']} | {r['test_s']} |"
        )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    rows = [json.loads(line) for line in Path(argv[0]).read_text().splitlines() if line.strip()]
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
