"""The fenced, idempotent, durable side-effect log shared by the HTTP targets.

One `MutationLog` owns a directory and four files in it:

- `<effects>.jsonl`: one line per side effect the target performed (the
  deploy service calls it `deployments.jsonl`, the corpus `publications.jsonl`);
  each line holds `seq`, `operation_id`, `idempotency_key`, `run_id`, `epoch`,
  `at` and the payload fields. Counting lines per `idempotency_key` counts
  side effects.
- `requests.jsonl`: one line per answered mutation request: `at`,
  `operation_id`, `idempotency_key`, `run_id`, `epoch`, `result` (applied,
  replayed, fenced, sealed, payload_mismatch, operation_id_reused) and `detail`.
- `sealed.jsonl`: operation ids this target has declared NOT_COMMITTED to a
  lookup; a later request under such an id is refused, so the answer stays true.
- `fences.sqlite3`: the highest fencing epoch seen per run (`baton.fencing.FenceGuard`).

Rules of `apply`, in order: a fencing epoch below the run's mark is refused;
a sealed operation id is refused; a known idempotency key with the same
payload, from the same run, returns the recorded effect (a replay, no new
line); with a different payload or from another run it is refused; otherwise one line is appended and fsynced before the
caller can answer. One lock serializes all of it, and an exclusive lock on
`DIR/.lock` keeps a second process from serving the same directory.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from baton.ablation import Ablation, is_ablated
from baton.errors import BatonError, FencedTokenError, IdempotencyConflictError, PayloadMismatchError
from baton.fencing import FenceGuard, FencingToken
from baton.models.operation import OperationState
from baton.durable_files import append_line, read_lines, repair_tail, utc_now_text

REQUESTS_FILE = "requests.jsonl"
SEALED_FILE = "sealed.jsonl"
FENCES_FILE = "fences.sqlite3"


class DirectoryInUseError(BatonError):
    """Another process already serves this target directory."""


class SealedOperationError(BatonError):
    """The operation id was already declared NOT_COMMITTED; it can never commit now."""


class EffectRefusedError(BatonError):
    """The target's own effect refused the request (nothing was applied); `reason` goes to the request log."""

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Applied:
    """The effect a request resolved to; `replayed` when it was recorded earlier."""

    record: dict[str, Any]
    replayed: bool


FENCE_ADVANCED = "fence_advanced"
"""The `result` of a request-log line recording a fence announcement (no operation, no key)."""


class MutationLog:
    """Side effects of one target, kept in files under `directory`."""

    def __init__(self, directory: Path | str, effects_file: str) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._dir_lock = _lock_directory(self.directory)
        self.effects_path = self.directory / effects_file
        self.requests_path = self.directory / REQUESTS_FILE
        self.sealed_path = self.directory / SEALED_FILE
        for path in (self.effects_path, self.requests_path, self.sealed_path):
            repair_tail(path)
        self.fence = FenceGuard(self.directory / FENCES_FILE)
        self._lock = threading.Lock()
        self._effects: list[dict[str, Any]] = read_lines(self.effects_path)
        self._by_key = {record["idempotency_key"]: record for record in self._effects}
        self._by_operation = {record["operation_id"]: record for record in self._effects}
        for request in read_lines(self.requests_path):
            if request["result"] == "replayed" and request["idempotency_key"] in self._by_key:
                self._by_operation.setdefault(request["operation_id"], self._by_key[request["idempotency_key"]])
        self._sealed = {line["operation_id"] for line in read_lines(self.sealed_path)}

    def refuse_if_fenced(self, operation_id: str, key: str, token: FencingToken) -> FencedTokenError | None:
        """The fence, read-only, before anything else is looked at: a request below the run's mark is logged
        `fenced` and its error returned (None otherwise). A stale owner's request is so refused as stale even
        when its capability has lapsed meanwhile; the mark is never raised here (`apply` admits under its lock)."""
        if is_ablated(Ablation.TARGET_FENCE):
            return None
        with self._lock:
            mark = self.fence.highest(token.run_id)
            if mark is None or token.epoch >= mark:
                return None
            error = FencedTokenError(
                f"fencing token for run {token.run_id!r} carries epoch {token.epoch}, but this target has already "
                f"seen epoch {mark}: the sender was fenced off", run_id=token.run_id, epoch=token.epoch,
                highest_seen=mark)
            self._log(operation_id, key, token, "fenced", str(error))
            return error

    def refuse(self, operation_id: str, key: str, token: FencingToken, result: str, detail: str) -> None:
        """Record a request refused before `apply` (its capability did not fit), under the same lock."""
        with self._lock:
            self._log(operation_id, key, token, result, detail)

    def _log(self, operation_id: str, key: str, token: FencingToken, result: str, detail: str = "") -> None:
        append_line(
            self.requests_path,
            {
                "at": utc_now_text(),
                "operation_id": operation_id,
                "idempotency_key": key,
                "run_id": token.run_id,
                "epoch": token.epoch,
                "result": result,
                "detail": detail,
            },
        )

    def apply(
        self, operation_id: str, idempotency_key: str, token: FencingToken, payload: Mapping[str, Any],
        perform: Callable[[], Mapping[str, Any]] | None = None,
    ) -> Applied:
        """Record one side effect, or resolve the request to the one already recorded.

        `perform`, when given, is the effect itself (e.g. moving a git branch): it
        runs under the lock after every check passed and before the line is
        written; what it returns is recorded under `outcome`, and an
        EffectRefusedError it raises is logged with its reason and re-raised.

        Raises SealedOperationError, FencedTokenError, PayloadMismatchError,
        IdempotencyConflictError (an operation id reused for another key) or EffectRefusedError.
        """
        with self._lock:
            try:  # the fence first: a stale owner's request is refused as stale, whatever else is wrong with it
                if not is_ablated(Ablation.TARGET_FENCE):
                    self.fence.admit(token)
            except FencedTokenError as exc:
                self._log(operation_id, idempotency_key, token, "fenced", str(exc))
                raise
            if operation_id in self._sealed:
                self._log(operation_id, idempotency_key, token, "sealed")
                raise SealedOperationError(f"operation {operation_id} was already declared NOT_COMMITTED")
            known = None if is_ablated(Ablation.IDEMPOTENCY) else self._by_key.get(idempotency_key)
            if known is not None:
                recorded = {name: known.get(name) for name in payload}
                same_run = known["run_id"] == token.run_id
                if not same_run or recorded != dict(payload) or set(payload) != _payload_fields(known):
                    self._log(operation_id, idempotency_key, token, "payload_mismatch")
                    raise PayloadMismatchError(
                        f"idempotency key {idempotency_key!r} was used for a different request",
                        run_id=token.run_id, idempotency_key=idempotency_key, operation_id=known["operation_id"],
                    )
                self._log(operation_id, idempotency_key, token, "replayed", f"recorded as {known['operation_id']}")
                self._by_operation.setdefault(operation_id, known)
                return Applied(record=known, replayed=True)
            if operation_id in self._by_operation:
                self._log(operation_id, idempotency_key, token, "operation_id_reused")
                raise IdempotencyConflictError(
                    f"operation id {operation_id} already belongs to another idempotency key",
                    run_id=token.run_id, idempotency_key=idempotency_key, operation_id=operation_id,
                )
            outcome: dict[str, Any] = {}
            if perform is not None:
                try:
                    outcome = dict(perform())
                except EffectRefusedError as exc:
                    self._log(operation_id, idempotency_key, token, exc.reason, str(exc))
                    raise
            record = {
                **dict(payload),
                **({"outcome": outcome} if perform is not None else {}),
                "seq": len(self._effects) + 1,
                "operation_id": operation_id,
                "idempotency_key": idempotency_key,
                "run_id": token.run_id,
                "epoch": token.epoch,
                "at": utc_now_text(),
            }
            append_line(self.effects_path, record)
            self._effects.append(record)
            self._by_key[idempotency_key] = record
            self._by_operation[operation_id] = record
            self._log(operation_id, idempotency_key, token, "applied")
            return Applied(record=record, replayed=False)

    def lookup(self, operation_id: str) -> OperationState:
        """COMMITTED if the operation took effect here; otherwise seal it and say NOT_COMMITTED."""
        with self._lock:
            if operation_id in self._by_operation:
                return OperationState.COMMITTED
            if operation_id not in self._sealed:
                append_line(self.sealed_path, {"operation_id": operation_id, "at": utc_now_text(), "reason": "looked up"})
                self._sealed.add(operation_id)
            return OperationState.NOT_COMMITTED

    def advance_fence(self, token: FencingToken) -> int:
        """Raise the run's mark to at least `token.epoch` (a new owner announcing itself), and log the announcement."""
        with self._lock:
            mark = self.fence.advance(token)
            self._log("", "", token, FENCE_ADVANCED, f"mark now {mark}")
            return mark

    def close(self) -> None:
        """Release the directory lock (the process exiting does the same)."""
        if self._dir_lock >= 0:
            os.close(self._dir_lock)
            self._dir_lock = -1

    def effects(self) -> list[dict[str, Any]]:
        """Every recorded side effect, oldest first."""
        with self._lock:
            return list(self._effects)


def _lock_directory(directory: Path) -> int:
    """Hold an exclusive lock on `directory/.lock` for the life of the process."""
    fd = os.open(directory / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise DirectoryInUseError(f"{directory} is already served by another process") from None
    return fd


_BOOKKEEPING = frozenset({"seq", "operation_id", "idempotency_key", "run_id", "epoch", "at", "outcome"})


def _payload_fields(record: Mapping[str, Any]) -> set[str]:
    return set(record) - _BOOKKEEPING
