"""What a fault scenario observed, as an append-only JSON Lines log shared by every process of it.

Workers are instrumented like Jepsen clients: each consequential thing they do
is written down when it happens (which observation they relied on and what
the live source said at that moment, which model call was billed, which
artifact a verifier passed, which mutation was attempted with what authority,
what state a resumed worker started from, how the run ended). Outside
services write their own records too: the provider bills every model call,
the verifier logs every verdict, the identity provider lists every credential
it issued. The six questions are answered from these facts together with the
targets' own effect records, the store and the gateway history, never from
what a strategy claims about itself.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Literal, TypeVar

from pydantic import Field

from baton.models import BudgetLimits, BudgetUsage, Record

F = TypeVar("F", bound="Fact")
Outcome = Literal["committed", "replayed", "unknown", "rejected", "fenced", "refused"]
Status = Literal["verified", "failed", "escalated"]


class Fact(Record):
    """Base of every fact: which run, and when (the store's clock)."""

    run_id: str
    at: dt.datetime


class RunStarted(Fact):
    fact: Literal["run_started"] = "run_started"
    strategy: str
    authority_level: str
    limits: BudgetLimits


class ObservationUsed(Fact):
    """A worker relied on an observation: what it had recorded and what the live source said then."""

    fact: Literal["observation_used"] = "observation_used"
    worker: str
    step: str
    source: str
    recorded_content: str
    live_content: str
    observed_at: dt.datetime
    freshness_s: float
    mode: str


class Billed(Fact):
    """The provider (or a tool meter) charged the run."""

    fact: Literal["billed"] = "billed"
    worker: str
    charge: BudgetUsage
    what: str


class Verified(Fact):
    """A verifier judged one exact artifact."""

    fact: Literal["verified"] = "verified"
    worker: str
    candidate_hash: str
    passed: bool
    verifier: str


class MutationAttempted(Fact):
    """A worker tried a consequential operation, with the authority it held and the outcome it saw."""

    fact: Literal["mutation_attempted"] = "mutation_attempted"
    worker: str
    placement: str
    intent: str
    idempotency_key: str
    operation_id: str | None
    candidate_hash: str
    level: str
    ceiling: str
    approval_artifact: str | None
    approval_expires_at: dt.datetime | None
    outcome: Outcome


class Resumed(Fact):
    """The state a worker resumed a run with."""

    fact: Literal["resumed"] = "resumed"
    worker: str
    placement: str
    budget_used: BudgetUsage
    limits: BudgetLimits
    authority_level: str
    checkpoint_level: str
    ceiling: str


class Reconciled(Fact):
    """A worker asked a target what became of an operation."""

    fact: Literal["reconciled"] = "reconciled"
    worker: str
    operation_id: str
    intent: str
    state: str


class RunEnded(Fact):
    fact: Literal["run_ended"] = "run_ended"
    worker: str
    status: Status
    reason: str


class CredentialIssued(Fact):
    """A bearer credential some service handed out; it must never appear in portable state."""

    fact: Literal["credential_issued"] = "credential_issued"
    kind: str
    value: str = Field(repr=False)


FACT_TYPES: dict[str, type[Fact]] = {
    cls.model_fields["fact"].default: cls
    for cls in (RunStarted, ObservationUsed, Billed, Verified, MutationAttempted, Resumed, Reconciled, RunEnded,
                CredentialIssued)
}


class FactLog:
    """An append-only JSON Lines file of facts; appends are whole lines under `flock` (multi-process safe)."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def add(self, fact: Fact) -> None:
        line = (fact.model_dump_json() + "\n").encode("utf-8")
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                os.write(fd, line)
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)

    def all(self) -> list[Fact]:
        if not self.path.exists():
            return []
        facts: list[Fact] = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                data = json.loads(line)
                facts.append(FACT_TYPES[data["fact"]].model_validate(data))
        return facts

    def of(self, kind: type[F], run_id: str | None = None) -> list[F]:
        """Facts of one type (for one run), in the order they were written."""
        return [f for f in self.all() if isinstance(f, kind) and (run_id is None or f.run_id == run_id)]

    def __iter__(self) -> Iterator[Fact]:
        return iter(self.all())
