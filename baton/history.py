"""Jepsen-style histories of ownership and gateway calls.

Every call that matters to invariants 1-5 is written twice: an `invoke` record
when it starts and one completion when it ends, `ok` (it took effect),
`fail` (it certainly did not) or `info` (nobody knows). Records carry the
process that made the call, the run, the epoch it spoke for, the idempotency
key and the operation id, so `baton.checker` can judge any history after the
fact.

Functions (`f`) used by Baton:

* `acquire` - lease acquisition or coordinator takeover (value: owner, epoch won),
* `fence` - a target told that an epoch now rules the run,
* `mutate` - a gateway call (value: state, replayed, error),
* `reconcile` - asking a target about an operation (value: state),
* `release` - a lease given up.

On disk a history is JSON Lines, one record per line, appended under an
exclusive `flock` so several processes can share one file; line order is the
order of the history.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
from collections.abc import Iterable, Iterator
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, JsonValue


class OpType(StrEnum):
    """Jepsen's four record types."""

    INVOKE = "invoke"
    OK = "ok"
    FAIL = "fail"
    INFO = "info"


class HistoryOp(BaseModel):
    """One history record."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: OpType
    f: str = Field(min_length=1)
    process: str = Field(min_length=1)
    run_id: str = Field(min_length=1)
    epoch: int | None = None
    key: str | None = None
    operation_id: str | None = None
    time_ns: int = Field(default_factory=time.time_ns)
    value: dict[str, JsonValue] = Field(default_factory=dict)


class HistorySink(Protocol):
    """Where history records go."""

    def record(self, op: HistoryOp) -> None:
        """Append one record."""
        ...


class ListHistory:
    """An in-memory history, safe to share between threads."""

    def __init__(self) -> None:
        self._ops: list[HistoryOp] = []
        self._lock = threading.Lock()

    def record(self, op: HistoryOp) -> None:
        with self._lock:
            self._ops.append(op)

    @property
    def ops(self) -> list[HistoryOp]:
        """A copy of the records so far, in order."""
        with self._lock:
            return list(self._ops)


class JsonlHistory:
    """An append-only JSONL history file that several processes may share.

    Each record is one `write` under `flock`, so it survives the writer being
    killed right after; `durable=True` also fsyncs it (survives power loss).
    """

    def __init__(self, path: Path | str, *, durable: bool = False) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.durable = durable
        self._lock = threading.Lock()

    def record(self, op: HistoryOp) -> None:
        line = (op.model_dump_json() + "\n").encode("utf-8")
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                try:
                    os.write(fd, line)
                    if self.durable:
                        os.fsync(fd)
                finally:
                    fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)

    @property
    def ops(self) -> list[HistoryOp]:
        """All records in the file, in order."""
        return read_history(self.path)


class NullHistory:
    """Discards everything (for callers that do not keep a history)."""

    def record(self, op: HistoryOp) -> None:  # noqa: D102 - nothing to say
        return None


def read_history(path: Path | str) -> list[HistoryOp]:
    """Read a JSONL history; a torn last line (writer killed mid-write) is ignored."""
    ops: list[HistoryOp] = []
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines):
                break
            raise ValueError(f"{path}:{number}: not a JSON history record") from None
        ops.append(HistoryOp.model_validate(data))
    return ops


def write_history(path: Path | str, ops: Iterable[HistoryOp]) -> None:
    """Write records to a fresh JSONL file (for hand-made histories and exports)."""
    Path(path).write_text("".join(op.model_dump_json() + "\n" for op in ops), encoding="utf-8")


class Recorder:
    """Writes invoke/completion pairs for one process to a sink."""

    def __init__(self, sink: HistorySink | None, process: str) -> None:
        self._sink: HistorySink = sink if sink is not None else NullHistory()
        self.process = process

    def _emit(self, type_: OpType, f: str, run_id: str, **fields: Any) -> None:
        self._sink.record(HistoryOp(type=type_, f=f, process=self.process, run_id=run_id, **fields))

    def invoke(self, f: str, run_id: str, **fields: Any) -> None:
        """The call starts."""
        self._emit(OpType.INVOKE, f, run_id, **fields)

    def ok(self, f: str, run_id: str, **fields: Any) -> None:
        """The call took effect."""
        self._emit(OpType.OK, f, run_id, **fields)

    def fail(self, f: str, run_id: str, **fields: Any) -> None:
        """The call certainly did not take effect."""
        self._emit(OpType.FAIL, f, run_id, **fields)

    def info(self, f: str, run_id: str, **fields: Any) -> None:
        """Nobody knows whether the call took effect."""
        self._emit(OpType.INFO, f, run_id, **fields)


def pairs(ops: Iterable[HistoryOp]) -> Iterator[tuple[int, HistoryOp, int | None, HistoryOp | None]]:
    """Match each invoke with its completion (same process and f, next in that process).

    Yields (invoke index, invoke, completion index or None, completion or None).
    A process whose call never completed (it was killed) yields None.
    """
    ops = list(ops)
    open_calls: dict[tuple[str, str], int] = {}
    matched: dict[int, int] = {}
    for index, op in enumerate(ops):
        slot = (op.process, op.f)
        if op.type is OpType.INVOKE:
            open_calls[slot] = index
        elif slot in open_calls:
            matched[open_calls.pop(slot)] = index
    for index, op in enumerate(ops):
        if op.type is OpType.INVOKE:
            done = matched.get(index)
            yield index, op, done, (ops[done] if done is not None else None)
