"""Stale-worker rejections as the targets themselves recorded them, and a check that each was right.

Every HTTP target writes one line per answered mutation request to its own
`requests.jsonl` (`baton.targets.mutation_log`), `result` `fenced` when its
fence refused an epoch below the highest it had seen for the run. Those lines
are the count; Baton's own STALE_WORKER_REJECTED events are not (a refusal at
the gateway never reaches a target, and a worker could report anything).

The check judges each target's log against the store's grants (LEASE_ACQUIRED
events: which epochs were ever issued for a run), in the target's own order:

* a refusal is right only if a higher epoch than the refused one was issued
  for the run: otherwise the target refused a current owner;
* a request applied with an epoch below one the same target had already seen
  for the run is a stale mutation accepted (the fence let it through).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from baton.models import Event
from baton.durable_files import read_lines
from baton.targets.mutation_log import REQUESTS_FILE

FENCED = "fenced"
APPLIED = "applied"
TARGETS: tuple[str, ...] = ("deploy", "corpus", "git", "webapp")


class TargetRequest(BaseModel):
    """One answered mutation request, as a target logged it."""

    model_config = ConfigDict(frozen=True)

    target: str
    line: int
    run_id: str
    epoch: int
    operation_id: str
    result: str


def target_requests(home: Path, run_ids: Iterable[str], targets: Sequence[str] = TARGETS) -> list[TargetRequest]:
    """Every request line of the fleet's runs in each target's `requests.jsonl`, in that file's order."""
    wanted = set(run_ids)
    requests = []
    for target in targets:
        for index, line in enumerate(read_lines(home / "targets" / target / REQUESTS_FILE)):
            if str(line.get("run_id")) in wanted:
                requests.append(TargetRequest(target=target, line=index + 1, run_id=str(line["run_id"]),
                                              epoch=int(line["epoch"]), operation_id=str(line["operation_id"]),
                                              result=str(line["result"])))
    return requests


def fenced_by_target(requests: Sequence[TargetRequest]) -> dict[str, int]:
    """How many requests each target's fence refused."""
    counts: dict[str, int] = {}
    for request in requests:
        if request.result == FENCED:
            counts[request.target] = counts.get(request.target, 0) + 1
    return dict(sorted(counts.items()))


def granted_epochs(leases: Iterable[Event]) -> dict[str, int]:
    """The highest epoch the store ever granted each run (from its LEASE_ACQUIRED events)."""
    highest: dict[str, int] = {}
    for event in leases:
        epoch = event.target_epoch if event.target_epoch is not None else event.source_epoch
        if epoch is not None:
            highest[event.run_id] = max(highest.get(event.run_id, 0), epoch)
    return highest


def stale_findings(requests: Sequence[TargetRequest], granted: Mapping[str, int]) -> list[str]:
    """What the targets' logs show wrong: a refusal of a current epoch, or a stale request applied."""
    findings = []
    seen: dict[tuple[str, str], int] = {}
    for request in requests:
        where = f"{request.target} requests.jsonl line {request.line}"
        if request.result == FENCED and request.epoch >= granted.get(request.run_id, 0):
            findings.append(f"{where}: run {request.run_id} refused as fenced at epoch {request.epoch}, but no higher "
                            f"epoch was ever granted (highest {granted.get(request.run_id, 0)})")
        mark = seen.get((request.target, request.run_id))
        if request.result == APPLIED and mark is not None and request.epoch < mark:
            findings.append(f"{where}: run {request.run_id} applied at epoch {request.epoch} after the target had seen "
                            f"epoch {mark}: a stale mutation got through")
        seen[(request.target, request.run_id)] = max(mark or 0, request.epoch)
    return findings
