"""Check DESIGN.md invariants 1-5 over a history, an operation ledger and a target's records.

Every rule here is conservative: it reports a violation only when the records
prove one. Real-time order comes from history positions: if call A completed
before call B was invoked, A happened before B. Calls that never completed
(their process was killed) are treated as possibly in effect.

The inputs are all optional except the history:

* `history` - `baton.history.HistoryOp` records in order,
* `ledger` - the gateway's `OperationEntry` rows (every attempt of every key),
* `effects` - the side effects a target itself recorded, in its own order,
* `events` - the run event log (lease acquisitions).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict, Field

from baton.history import HistoryOp, OpType, pairs
from baton.models.events import Event, EventType
from baton.models.operation import OperationEntry, OperationState

INVARIANTS: dict[int, str] = {
    1: "no logical operation is committed twice (per idempotency key)",
    2: "the gateway accepts no mutation whose epoch is below the run's current epoch",
    3: "at most one owner per run per epoch; epochs only increase",
    4: "an UNKNOWN outcome is reconciled against the target before any retry and never reported as success",
    5: "a new owner starts only after the old epoch is fenced",
}


class TargetEffect(BaseModel):
    """One side effect as the target itself recorded it (`seq` is the target's order)."""

    model_config = ConfigDict(frozen=True)

    seq: int
    run_id: str
    idempotency_key: str
    operation_id: str
    epoch: int


class Violation(BaseModel):
    """A broken invariant, with the records that prove it."""

    model_config = ConfigDict(frozen=True)

    invariant: int = Field(ge=1, le=5)
    message: str
    history_indexes: tuple[int, ...] = ()

    def explain(self) -> str:
        """One line: which invariant, what it says, and what broke it."""
        where = f" (history records {', '.join(map(str, self.history_indexes))})" if self.history_indexes else ""
        return f"invariant {self.invariant} ({INVARIANTS[self.invariant]}): {self.message}{where}"


def check(
    history: Sequence[HistoryOp],
    ledger: Iterable[OperationEntry] = (),
    effects: Iterable[TargetEffect] = (),
    events: Iterable[Event] = (),
) -> list[Violation]:
    """All violations of invariants 1-5 that the records prove; empty when none."""
    ops = list(history)
    entries = list(ledger)
    target = sorted(effects, key=lambda effect: effect.seq)
    found: list[Violation] = []
    found += _single_commit(ops, entries, target)
    found += _no_stale_acceptance(ops)
    found += _one_owner_per_epoch(ops, list(events))
    found += _unknown_reconciled(ops, entries, target)
    found += _fenced_before_start(ops, target)
    return found


# --- helpers -----------------------------------------------------------------------------------


def _calls(ops: list[HistoryOp], f: str) -> list[tuple[int, HistoryOp, int | None, HistoryOp | None]]:
    return [call for call in pairs(ops) if call[1].f == f]


def _fresh_commit(done: HistoryOp | None) -> bool:
    """A completion that reports a new (not replayed) committed effect."""
    return done is not None and done.type is OpType.OK and not bool(done.value.get("replayed", False))


def _acquired(ops: list[HistoryOp]) -> list[tuple[int, HistoryOp, int, HistoryOp]]:
    return [
        (i, inv, j, done)
        for i, inv, j, done in _calls(ops, "acquire")
        if j is not None and done is not None and done.type is OpType.OK and done.epoch is not None
    ]


# --- invariant 1 -------------------------------------------------------------------------------


def _single_commit(ops: list[HistoryOp], entries: list[OperationEntry], target: list[TargetEffect]) -> list[Violation]:
    out: list[Violation] = []
    # Commits the history proves: fresh gateway commits, and operations a target confirmed on reconciliation.
    commits: dict[tuple[str, str], dict[str, int]] = defaultdict(dict)
    for i, inv, j, done in _calls(ops, "mutate"):
        if inv.key is not None and j is not None and done is not None and _fresh_commit(done):
            commits[(inv.run_id, inv.key)].setdefault(done.operation_id or inv.operation_id or f"#{j}", j)
    for i, inv, j, done in _calls(ops, "reconcile"):
        if inv.key is not None and j is not None and done is not None and done.type is OpType.OK \
                and done.value.get("state") == "COMMITTED":
            commits[(inv.run_id, inv.key)].setdefault(done.operation_id or inv.operation_id or f"#{j}", j)
    for (run_id, key), where in commits.items():
        if len(where) > 1:
            out.append(
                Violation(
                    invariant=1,
                    message=(
                        f"run {run_id!r} key {key!r}: {len(where)} distinct operations were committed "
                        f"({', '.join(sorted(where))})"
                    ),
                    history_indexes=tuple(sorted(where.values())),
                )
            )
    committed: dict[tuple[str, str], list[str]] = defaultdict(list)
    for entry in entries:
        if entry.state is OperationState.COMMITTED:
            committed[(entry.run_id, entry.idempotency_key)].append(entry.operation_id)
    for (run_id, key), op_ids in committed.items():
        if len(op_ids) > 1:
            out.append(
                Violation(
                    invariant=1,
                    message=f"run {run_id!r} key {key!r}: the ledger holds {len(op_ids)} COMMITTED operations {op_ids}",
                )
            )
    applied: dict[tuple[str, str], list[int]] = defaultdict(list)
    for effect in target:
        applied[(effect.run_id, effect.idempotency_key)].append(effect.seq)
    for (run_id, key), seqs in applied.items():
        if len(seqs) > 1:
            out.append(
                Violation(
                    invariant=1,
                    message=f"run {run_id!r} key {key!r}: the target applied it {len(seqs)} times (target seq {seqs})",
                )
            )
    return out


# --- invariant 2 -------------------------------------------------------------------------------


def _no_stale_acceptance(ops: list[HistoryOp]) -> list[Violation]:
    """A mutation accepted although a higher epoch had already been acquired before it was invoked."""
    out: list[Violation] = []
    mutations = {i: (inv, j, done) for i, inv, j, done in _calls(ops, "mutate")}
    completed_acquire = {j: done for _, _, j, done in _acquired(ops)}
    current: dict[str, tuple[int, int]] = {}
    for index, op in enumerate(ops):
        if index in completed_acquire and op.epoch is not None:
            best = current.get(op.run_id)
            if best is None or op.epoch > best[0]:
                current[op.run_id] = (op.epoch, index)
        if index not in mutations:
            continue
        inv, j, done = mutations[index]
        known = current.get(inv.run_id)
        if known is None or inv.epoch is None or inv.epoch >= known[0] or done is None or j is None:
            continue
        if done.type in (OpType.OK, OpType.INFO):
            out.append(
                Violation(
                    invariant=2,
                    message=(
                        f"run {inv.run_id!r}: {inv.process} called with epoch {inv.epoch} after epoch {known[0]} "
                        f"had been acquired, and the gateway answered {done.type.value}"
                        f" ({done.value.get('state', '')}) instead of refusing it"
                    ),
                    history_indexes=(known[1], index, j),
                )
            )
    return out


# --- invariant 3 -------------------------------------------------------------------------------


def _one_owner_per_epoch(ops: list[HistoryOp], events: list[Event]) -> list[Violation]:
    out: list[Violation] = []
    owners: dict[tuple[str, int], dict[str, int]] = defaultdict(dict)
    for _, inv, j, done in _acquired(ops):
        owner = str(done.value.get("owner") or done.process)
        owners[(done.run_id, int(done.epoch or 0))].setdefault(owner, j)
    for (run_id, epoch), held in owners.items():
        if len(held) > 1:
            out.append(
                Violation(
                    invariant=3,
                    message=f"run {run_id!r} epoch {epoch} was acquired by {len(held)} owners: {sorted(held)}",
                    history_indexes=tuple(sorted(held.values())),
                )
            )
    # Epochs only increase: an acquisition invoked after another completed must win a higher epoch.
    acquisitions = {i: (j, done) for i, _, j, done in _acquired(ops)}
    completions = {j: (i, done) for i, (j, done) in acquisitions.items()}
    highest: dict[str, tuple[int, int]] = {}
    floor_at_invoke: dict[int, tuple[int, int] | None] = {}
    for index, op in enumerate(ops):
        if index in acquisitions:
            floor_at_invoke[index] = highest.get(op.run_id)
        if index in completions:
            start, done = completions[index]
            floor = floor_at_invoke.get(start)
            epoch = int(done.epoch or 0)
            if floor is not None and epoch <= floor[0]:
                out.append(
                    Violation(
                        invariant=3,
                        message=(
                            f"run {done.run_id!r}: {done.process} acquired epoch {epoch} although epoch {floor[0]} "
                            "had already been acquired before it asked: epochs must only increase"
                        ),
                        history_indexes=(floor[1], start, index),
                    )
                )
            best = highest.get(done.run_id)
            if best is None or epoch > best[0]:
                highest[done.run_id] = (epoch, index)
    # The event log tells the same story in commit order.
    last: dict[str, int] = {}
    for event in events:
        if event.event_type is not EventType.LEASE_ACQUIRED or event.target_epoch is None:
            continue
        previous = last.get(event.run_id)
        if previous is not None and event.target_epoch <= previous:
            out.append(
                Violation(
                    invariant=3,
                    message=(
                        f"run {event.run_id!r}: the event log records epoch {event.target_epoch} "
                        f"acquired after epoch {previous}"
                    ),
                )
            )
        last[event.run_id] = max(previous or event.target_epoch, event.target_epoch)
    return out


# --- invariant 4 -------------------------------------------------------------------------------


def _unknown_reconciled(ops: list[HistoryOp], entries: list[OperationEntry], target: list[TargetEffect]) -> list[Violation]:
    out: list[Violation] = []
    calls = _calls(ops, "mutate")
    for i, inv, j, done in calls:
        if done is not None and done.type is OpType.OK and done.value.get("state") not in (None, "COMMITTED"):
            out.append(
                Violation(
                    invariant=4,
                    message=(
                        f"run {inv.run_id!r} key {inv.key!r}: the gateway reported success for an operation "
                        f"in state {done.value.get('state')}"
                    ),
                    history_indexes=(i, j or i),
                )
            )
    # After an ambiguous attempt, a new effect on the same key needs a NOT_COMMITTED reconciliation first.
    ambiguous: dict[tuple[str, str], tuple[int, str | None]] = {}
    reconciled: dict[tuple[str, str], int] = {}
    reconcile_done = {
        j: done for _, _, j, done in _calls(ops, "reconcile") if j is not None and done is not None
    }
    mutate_invokes = {i: (inv, j, done) for i, inv, j, done in calls}
    mutate_done = {j: (i, inv, done) for i, inv, j, done in calls if j is not None}
    for index, op in enumerate(ops):
        if index in reconcile_done and op.key is not None and op.type is OpType.OK:
            if op.value.get("state") == "NOT_COMMITTED":
                reconciled[(op.run_id, op.key)] = index
            elif op.value.get("state") == "COMMITTED":
                ambiguous.pop((op.run_id, op.key), None)
        if index in mutate_invokes:
            inv, j, done = mutate_invokes[index]
            if inv.key is None:
                continue
            slot = (inv.run_id, inv.key)
            if done is None:
                ambiguous.setdefault(slot, (index, inv.operation_id))
        if index in mutate_done:
            start, inv, done = mutate_done[index]
            if inv.key is None or done is None:
                continue
            slot = (inv.run_id, inv.key)
            if done.type is OpType.INFO:
                ambiguous.setdefault(slot, (index, done.operation_id or inv.operation_id))
            elif _fresh_commit(done) and slot in ambiguous:
                first, op_id = ambiguous[slot]
                cleared = reconciled.get(slot)
                same_op = op_id is not None and op_id == (done.operation_id or inv.operation_id)
                if not same_op and (cleared is None or cleared < first or cleared > start):
                    out.append(
                        Violation(
                            invariant=4,
                            message=(
                                f"run {inv.run_id!r} key {inv.key!r}: attempt {op_id} had an unknown outcome, and a new "
                                f"attempt committed without a NOT_COMMITTED reconciliation in between"
                            ),
                            history_indexes=(first, start, index),
                        )
                    )
                ambiguous.pop(slot, None)
                reconciled.pop(slot, None)
    # The ledger must agree: nothing reported ok may be recorded UNKNOWN, no retry may follow an unresolved attempt.
    ledger_state = {entry.operation_id: entry.state for entry in entries}
    for i, inv, j, done in calls:
        if done is None or done.type is not OpType.OK:
            continue
        op_id = done.operation_id or inv.operation_id
        if op_id in ledger_state and ledger_state[op_id] is not OperationState.COMMITTED:
            out.append(
                Violation(
                    invariant=4,
                    message=(
                        f"operation {op_id} was reported ok by the gateway but the ledger records it "
                        f"{ledger_state[op_id].value}"
                    ),
                    history_indexes=(i, j or i),
                )
            )
    by_key: dict[tuple[str, str], list[OperationEntry]] = defaultdict(list)
    for entry in entries:
        by_key[(entry.run_id, entry.idempotency_key)].append(entry)
    for (run_id, key), attempts in by_key.items():
        attempts.sort(key=lambda entry: entry.recorded_at)
        for older in attempts[:-1]:
            if older.state is not OperationState.NOT_COMMITTED:
                out.append(
                    Violation(
                        invariant=4,
                        message=(
                            f"run {run_id!r} key {key!r}: operation {older.operation_id} is {older.state.value}, "
                            "yet a later attempt was made; only a NOT_COMMITTED attempt may be retried"
                        ),
                    )
                )
    applied = {effect.operation_id for effect in target}
    for entry in entries:
        if entry.state is OperationState.NOT_COMMITTED and entry.operation_id in applied:
            out.append(
                Violation(
                    invariant=4,
                    message=(
                        f"operation {entry.operation_id} is recorded NOT_COMMITTED but the target applied it: "
                        "the outcome was decided without asking the target"
                    ),
                )
            )
    return out


# --- invariant 5 -------------------------------------------------------------------------------


def _fenced_before_start(ops: list[HistoryOp], target: list[TargetEffect]) -> list[Violation]:
    out: list[Violation] = []
    acquired_runs = {done.run_id for _, _, _, done in _acquired(ops)}
    acquired_at: dict[tuple[str, int], int] = {}
    for _, _, j, done in _acquired(ops):
        acquired_at.setdefault((done.run_id, int(done.epoch or 0)), j)
    takeovers = {
        (done.run_id, int(done.epoch or 0)) for _, _, _, done in _acquired(ops) if done.value.get("takeover")
    }
    fenced_at: dict[tuple[str, int], int] = {}
    fence_runs: set[str] = set()
    for _, _, fence_at, fenced in _calls(ops, "fence"):
        if fence_at is not None and fenced is not None and fenced.type is OpType.OK and fenced.epoch is not None:
            fence_runs.add(fenced.run_id)
            fenced_at.setdefault((fenced.run_id, fenced.epoch), fence_at)
    newest_effect: dict[str, tuple[int, int]] = {}
    calls = _calls(ops, "mutate")
    completed = {j: (i, inv, done) for i, inv, j, done in calls if j is not None}
    outcome_of = {i: done for i, _, _, done in calls}
    for index, op in enumerate(ops):
        if op.f == "mutate" and op.type is OpType.INVOKE and op.epoch is not None:
            slot = (op.run_id, op.epoch)
            if op.run_id in acquired_runs:
                start = acquired_at.get(slot)
                if start is None or start > index:
                    out.append(
                        Violation(
                            invariant=5,
                            message=(
                                f"run {op.run_id!r}: {op.process} mutated with epoch {op.epoch} before that epoch "
                                "was acquired"
                            ),
                            history_indexes=(index,),
                        )
                    )
            if op.run_id in fence_runs and slot in takeovers:
                fence = fenced_at.get(slot)
                if fence is None or fence > index:
                    out.append(
                        Violation(
                            invariant=5,
                            message=(
                                f"run {op.run_id!r}: the new owner mutated at epoch {op.epoch} before the targets "
                                "were fenced at that epoch"
                            ),
                            history_indexes=(index,),
                        )
                    )
            newest = newest_effect.get(op.run_id)
            if newest is not None and op.epoch < newest[0]:
                # Invoked after a newer epoch demonstrably acted; it must not take effect.
                if _fresh_commit(outcome_of.get(index)):
                    out.append(
                        Violation(
                            invariant=5,
                            message=(
                                f"run {op.run_id!r}: a mutation at epoch {op.epoch} took effect after epoch "
                                f"{newest[0]} had already acted: the old owner was not fenced"
                            ),
                            history_indexes=(newest[1], index),
                        )
                    )
        if index in completed:
            _, call, outcome = completed[index]
            if _fresh_commit(outcome) and call.epoch is not None:
                best = newest_effect.get(call.run_id)
                if best is None or call.epoch > best[0]:
                    newest_effect[call.run_id] = (call.epoch, index)
    highest: dict[str, int] = {}
    for effect in target:
        seen = highest.get(effect.run_id)
        if seen is not None and effect.epoch < seen:
            out.append(
                Violation(
                    invariant=5,
                    message=(
                        f"run {effect.run_id!r}: the target applied operation {effect.operation_id} at epoch "
                        f"{effect.epoch} after it had applied epoch {seen}: the old epoch was not fenced"
                    ),
                )
            )
        highest[effect.run_id] = max(seen if seen is not None else effect.epoch, effect.epoch)
    return out
