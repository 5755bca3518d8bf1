"""The history checker finds each broken invariant in hand-made histories, and passes sound ones."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from baton.checker import TargetEffect, Violation, check
from baton.cli.history_cmd import register
from baton.history import HistoryOp, JsonlHistory, OpType, pairs, read_history, write_history
from baton.identity import ref_of
from baton.models import Event, EventType, OperationEntry, OperationState

RUN = "run-x"
T0 = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.timezone.utc)


def op(kind: str, f: str, process: str, *, epoch: int | None = None, key: str | None = None,
       op_id: str | None = None, run: str = RUN, **value: Any) -> HistoryOp:
    return HistoryOp(type=OpType(kind), f=f, process=process, run_id=run, epoch=epoch, key=key,
                     operation_id=op_id, value=value)


def acquire(process: str, epoch: int, *, takeover: bool = False) -> list[HistoryOp]:
    return [op("invoke", "acquire", process, epoch=epoch - 1, owner=process),
            op("ok", "acquire", process, epoch=epoch, owner=process, takeover=takeover)]


def fence(epoch: int) -> list[HistoryOp]:
    return [op("invoke", "fence", "coordinator", epoch=epoch), op("ok", "fence", "coordinator", epoch=epoch)]


def mutate(process: str, epoch: int, key: str, op_id: str, outcome: str = "ok", **value: Any) -> list[HistoryOp]:
    completions: dict[str, dict[str, Any]] = {
        "ok": {"state": "COMMITTED", "replayed": False}, "info": {"state": "UNKNOWN"}, "fail": {"error": "stale_epoch"},
    }
    done = completions[outcome]
    return [op("invoke", "mutate", process, epoch=epoch, key=key, op_id=op_id),
            op(outcome, "mutate", process, epoch=epoch, key=key, op_id=op_id, **{**done, **value})]


def reconcile(process: str, key: str, op_id: str, state: str) -> list[HistoryOp]:
    return [op("invoke", "reconcile", process, key=key, op_id=op_id),
            op("ok", "reconcile", process, key=key, op_id=op_id, state=state)]


def entry(op_id: str, key: str, state: OperationState, epoch: int = 1, minute: int = 0) -> OperationEntry:
    return OperationEntry(operation_id=op_id, run_id=RUN, idempotency_key=key, epoch=epoch, kind="deploy",
                          target="ledger", payload_ref=ref_of({"k": key}), state=state,
                          recorded_at=T0 + dt.timedelta(minutes=minute))


def effect(seq: int, key: str, op_id: str, epoch: int) -> TargetEffect:
    return TargetEffect(seq=seq, run_id=RUN, idempotency_key=key, operation_id=op_id, epoch=epoch)


def lease_event(epoch: int, owner: str) -> Event:
    return Event(event_type=EventType.LEASE_ACQUIRED, run_id=RUN, at=T0, target_epoch=epoch, detail={"owner": owner})


def found(violations: list[Violation]) -> set[int]:
    return {violation.invariant for violation in violations}


# --- a sound history -----------------------------------------------------------------------------


def sound_history() -> list[HistoryOp]:
    return [
        *acquire("a", 1), *fence(1),
        *mutate("a", 1, "k1", "op1"),
        *mutate("a", 1, "k1", "op1b", replayed=True),
        *mutate("a", 1, "k2", "op2", outcome="info"),
        *acquire("b", 2, takeover=True), *fence(2),
        *mutate("a", 1, "k3", "op3", outcome="fail"),
        *reconcile("b", "k2", "op2", "NOT_COMMITTED"),
        *mutate("b", 2, "k2", "op4"),
    ]


def test_a_sound_history_has_no_violations() -> None:
    ledger = [entry("op1", "k1", OperationState.COMMITTED), entry("op2", "k2", OperationState.NOT_COMMITTED),
              entry("op4", "k2", OperationState.COMMITTED, epoch=2, minute=1)]
    effects = [effect(1, "k1", "op1", 1), effect(2, "k2", "op4", 2)]
    events = [lease_event(1, "a"), lease_event(2, "b")]
    assert check(sound_history(), ledger, effects, events) == []


def test_a_stale_call_racing_a_takeover_is_not_a_violation() -> None:
    # Invoked before epoch 2 was acquired, answered after: the order is unknown, so nothing is proven.
    history = [*acquire("a", 1), op("invoke", "mutate", "a", epoch=1, key="k", op_id="op1"), *acquire("b", 2),
               op("ok", "mutate", "a", epoch=1, key="k", op_id="op1", state="COMMITTED", replayed=False)]
    assert check(history) == []


# --- invariant 1 -----------------------------------------------------------------------------------


def test_invariant_1_two_fresh_commits_of_one_key() -> None:
    history = [*acquire("a", 1), *mutate("a", 1, "k", "op1"), *mutate("a", 1, "k", "op2")]
    violations = check(history)
    assert found(violations) == {1}
    assert "2 distinct operations were committed" in violations[0].explain()


def test_invariant_1_in_the_ledger_and_at_the_target() -> None:
    ledger = [entry("op1", "k", OperationState.COMMITTED), entry("op2", "k", OperationState.COMMITTED, minute=1)]
    assert found(check([], ledger=ledger)) == {1, 4}  # also: a retry after a non-NOT_COMMITTED attempt
    violations = check([], effects=[effect(1, "k", "op1", 1), effect(2, "k", "op2", 1)])
    assert found(violations) == {1} and "applied it 2 times" in violations[0].message


# --- invariant 2 -----------------------------------------------------------------------------------


@pytest.mark.parametrize("outcome", ["ok", "info"])
def test_invariant_2_a_stale_epoch_accepted_after_a_newer_epoch_was_acquired(outcome: str) -> None:
    history = [*acquire("a", 1), *acquire("b", 2), *mutate("a", 1, "k", "op1", outcome=outcome)]
    violations = [v for v in check(history) if v.invariant == 2]
    assert len(violations) == 1
    assert "epoch 1 after epoch 2 had been acquired" in violations[0].message


# --- invariant 3 -----------------------------------------------------------------------------------


def test_invariant_3_two_owners_of_one_epoch() -> None:
    history = [*acquire("a", 1), *acquire("b", 1)]
    violations = check(history)
    assert 3 in found(violations)
    assert any("acquired by 2 owners" in v.message for v in violations)


def test_invariant_3_an_epoch_going_backwards() -> None:
    history = [*acquire("a", 3), *acquire("b", 2)]
    violations = check(history)
    assert found(violations) == {3}
    assert "epochs must only increase" in violations[0].message


def test_invariant_3_in_the_event_log() -> None:
    violations = check([], events=[lease_event(1, "a"), lease_event(2, "b"), lease_event(2, "c")])
    assert found(violations) == {3} and "epoch 2 acquired after epoch 2" in violations[0].message


# --- invariant 4 -----------------------------------------------------------------------------------


def test_invariant_4_unknown_reported_as_success() -> None:
    history = [*acquire("a", 1), *mutate("a", 1, "k", "op1", state="UNKNOWN")]
    violations = check(history)
    assert found(violations) == {4} and "reported success" in violations[0].message


def test_invariant_4_retry_after_a_timeout_without_reconciliation() -> None:
    history = [*acquire("a", 1), *mutate("a", 1, "k", "op1", outcome="info"), *mutate("a", 1, "k", "op2")]
    violations = check(history)
    assert found(violations) == {4} and "without a NOT_COMMITTED reconciliation" in violations[0].message


def test_invariant_4_retry_after_a_killed_worker_without_reconciliation() -> None:
    killed = op("invoke", "mutate", "a", epoch=1, key="k", op_id="op1")
    history = [*acquire("a", 1), killed, *acquire("b", 2), *mutate("b", 2, "k", "op2")]
    assert found(check(history)) == {4}
    # Reconciled as COMMITTED is not a licence to commit again either.
    history = [*acquire("a", 1), killed, *acquire("b", 2), *reconcile("b", "k", "op1", "COMMITTED"),
               *mutate("b", 2, "k", "op2")]
    violations = check(history)
    assert found(violations) == {1} and "op1, op2" in violations[0].message
    # Reconciled as NOT_COMMITTED: the retry is sound.
    history = [*acquire("a", 1), killed, *acquire("b", 2), *reconcile("b", "k", "op1", "NOT_COMMITTED"),
               *mutate("b", 2, "k", "op2")]
    assert check(history) == []


def test_invariant_4_in_the_ledger() -> None:
    history = [*acquire("a", 1), *mutate("a", 1, "k", "op1")]
    violations = check(history, ledger=[entry("op1", "k", OperationState.UNKNOWN)])
    assert found(violations) == {4} and "ledger records it UNKNOWN" in violations[0].message
    retried = [entry("op1", "k", OperationState.UNKNOWN), entry("op2", "k", OperationState.COMMITTED, minute=1)]
    assert found(check([], ledger=retried)) == {4}
    wrong = [entry("op1", "k", OperationState.NOT_COMMITTED)]
    violations = check([], ledger=wrong, effects=[effect(1, "k", "op1", 1)])
    assert found(violations) == {4} and "without asking the target" in violations[0].message


# --- invariant 5 -----------------------------------------------------------------------------------


def test_invariant_5_mutating_before_the_epoch_was_acquired() -> None:
    history = [*acquire("a", 1), *mutate("b", 2, "k", "op1"), *acquire("b", 2)]
    violations = check(history)
    assert 5 in found(violations)
    assert any("before that epoch was acquired" in v.message for v in violations)


def test_invariant_5_mutating_before_the_targets_were_fenced() -> None:
    history = [*acquire("a", 1), *fence(1), *acquire("b", 2, takeover=True), *mutate("b", 2, "k", "op1"), *fence(2)]
    violations = check(history)
    assert found(violations) == {5} and "before the targets were fenced" in violations[0].message


def test_invariant_5_the_old_owner_acting_after_the_new_one() -> None:
    history = [*mutate("b", 2, "k1", "op1"), *mutate("a", 1, "k2", "op2")]
    violations = check(history)
    assert found(violations) == {5} and "the old owner was not fenced" in violations[0].message
    effects = [effect(1, "k1", "op1", 2), effect(2, "k2", "op2", 1)]
    violations = check([], effects=effects)
    assert found(violations) == {5} and "after it had applied epoch 2" in violations[0].message


# --- files and the command ------------------------------------------------------------------------


def test_histories_round_trip_through_jsonl_and_pair_up(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    sink = JsonlHistory(path)
    original = sound_history()
    for record in original:
        sink.record(record)
    with path.open("a") as handle:
        handle.write('{"type": "inv')  # a writer killed mid-line
    loaded = read_history(path)
    assert loaded == original
    calls = list(pairs(loaded))
    assert all(done is not None for _, _, _, done in calls)


def _cli() -> typer.Typer:
    app = typer.Typer()
    register(app)

    @app.callback()
    def main() -> None:  # keeps check-history a sub-command
        """test app"""

    return app


def test_check_history_command_exits_1_on_violations_and_0_otherwise(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    write_history(good, sound_history())
    write_history(bad, [*acquire("a", 1), *acquire("b", 2), *mutate("a", 1, "k", "op1"), *mutate("b", 2, "k", "op2")])
    runner = CliRunner()
    passed = runner.invoke(_cli(), ["check-history", str(good)])
    assert passed.exit_code == 0, passed.output
    assert "invariants 1-5 hold" in passed.output
    failed = runner.invoke(_cli(), ["check-history", str(bad)])
    assert failed.exit_code == 1, failed.output
    assert "violation" in failed.output


def test_the_command_is_registered_on_the_baton_app() -> None:
    from baton.cli import COMMAND_MODULES

    assert "baton.cli.history_cmd" in COMMAND_MODULES
