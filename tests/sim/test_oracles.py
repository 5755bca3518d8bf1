"""Each oracle can fail: tamper with one raw record of a clean run and the matching invariant is reported.

The tampering edits only what the oracles read (a target's own file, the
network's log, the lease history, a raw row), never Baton's verdicts.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from baton.sim.faults import FaultPlan
from baton.sim.runner import config_for
from baton.sim.world import SimRecords, run_world


def _violations(tamper: Callable[[SimRecords], None], seed: int = 4) -> list[str]:
    return run_world(config_for(seed, 0, plan=FaultPlan()), before_check=tamper).violations


def _deployments(records: SimRecords) -> list[dict]:
    path = records.root / "deploy" / "deployments.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _append(records: SimRecords, name: str, line: dict) -> None:
    with (records.root / "deploy" / name).open("a") as handle:
        handle.write(json.dumps(line) + "\n")


def test_clean_run_has_no_violation() -> None:
    assert _violations(lambda records: None) == []


def test_i1_a_second_side_effect_for_one_key() -> None:
    def tamper(records: SimRecords) -> None:
        first = _deployments(records)[0]
        _append(records, "deployments.jsonl", {**first, "seq": first["seq"] + 1, "operation_id": "op-again"})

    assert any(v.startswith("I1:") for v in _violations(tamper))


def test_i2_and_i5_a_target_accepting_an_old_epoch() -> None:
    def tamper(records: SimRecords) -> None:
        apply = next(m for m in records.network.messages if m.path == "/deployments" and m.deliveries)
        apply.epoch = 1
        fence = next(m for m in records.network.messages if m.path == "/fence" and m.fence_epoch)
        fence.fence_epoch = 99

    found = _violations(tamper)
    assert any(v.startswith("I2:") for v in found), found


def test_i3_two_owners_in_one_epoch_and_an_epoch_going_back() -> None:
    def tamper(records: SimRecords) -> None:
        when, run_id, _owner, epoch = records.lease_history[-1]
        records.lease_history.append((when + 1, run_id, "worker:intruder", epoch))
        records.lease_history.append((when + 2, run_id, "worker:intruder", epoch - 1))

    found = _violations(tamper)
    assert any("had owners" in v for v in found) and any("back to" in v for v in found), found


def test_i4_a_retry_without_reconciliation_and_success_without_effect() -> None:
    def tamper(records: SimRecords) -> None:
        apply = next(m for m in records.network.messages if m.path == "/deployments")
        apply.answered = False
        duplicate = type(apply)(**{**apply.__dict__, "seq": apply.seq + 1000, "deliveries": []})
        records.network.messages.append(duplicate)
        path = records.root / "deploy" / "deployments.jsonl"
        path.write_text("")

    found = _violations(tamper)
    assert any("sent again" in v for v in found), found
    assert any("reported verified" in v for v in found), found


def test_i5_mutation_before_the_fence() -> None:
    def tamper(records: SimRecords) -> None:
        for message in records.network.messages:
            if message.path == "/fence":
                message.deliveries = [(t, 503, e, o) for t, _s, e, o in message.deliveries]

    assert any(v.startswith("I5:") for v in _violations(tamper))


def test_i6_effect_without_evidence_for_its_candidate() -> None:
    def tamper(records: SimRecords) -> None:
        path = records.root / "deploy" / "deployments.jsonl"
        lines = _deployments(records)
        lines[0]["version"] = "9.9.9-unverified"
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))

    assert any(v.startswith("I6:") for v in _violations(tamper))


def test_i7_authority_above_the_run_and_a_stored_credential() -> None:
    from baton.models import AuthorityLevel

    def tamper(records: SimRecords) -> None:
        for run_id in list(records.launch_authority):
            records.launch_authority[run_id] = AuthorityLevel.OBSERVE
        token = next(m.capability for m in records.network.messages if m.capability)
        leaked = b"checkpoint note: " + token.encode()
        records.store.raw("INSERT INTO blobs (digest, data) VALUES (?, ?)", (b"leak", leaked))

    found = _violations(tamper)
    assert any("above the run" in v for v in found), found
    assert any("stored in a checkpoint" in v for v in found), found


def test_i10_a_run_that_never_ends() -> None:
    def tamper(records: SimRecords) -> None:
        records.store.raw("SELECT 1")
        records.settled = False

    assert any(v.startswith("I10:") for v in _violations(tamper))


STALE_PLAN = FaultPlan.from_json('[{"arg": "idempotency", "at": 7, "kind": "doc_change"}, '
                                 '{"arg": "400.0", "at": 11, "kind": "stall"}]')
"""Seed 8, research: a cited document changes, then the worker freezes 400 s (past the 120 s budget) before publishing."""


def _research(seed: int, plan: FaultPlan, ablate: tuple[str, ...] = (),
              tamper: Callable[[SimRecords], None] | None = None) -> list[str]:
    from baton.models import RunKind

    config = config_for(seed, 0, plan=plan, kinds=(RunKind.RESEARCH,), ablate=ablate)
    return run_world(config, before_check=tamper).violations


def test_i9_the_protected_run_revalidates_and_publishes_the_current_version() -> None:
    assert _research(8, STALE_PLAN) == []


def test_i9_with_freshness_ablated_the_stale_version_is_published_and_caught() -> None:
    violations = _research(8, STALE_PLAN, ("freshness",))
    assert any(v.startswith("I9:") and "idempotency" in v for v in violations), violations


def test_i9_a_change_after_the_publication_is_no_violation() -> None:
    """Tampering the corpus's history only: dated after the publication, the quoted version was current then."""
    def later(records: SimRecords) -> None:
        path = records.root / "corpus" / "documents.json"
        doc = json.loads(path.read_text())
        for version in doc["documents"]["idempotency"][1:]:
            version["changed_at"] = "2027-01-01T00:00:00Z"
        path.write_text(json.dumps(doc))

    assert not [v for v in _research(8, STALE_PLAN, ("freshness",), later) if v.startswith("I9:")]


def _budget_ledgers_read(records: SimRecords) -> int:
    from baton.sim.oracles import _blobs, _budget_used

    blobs = _blobs(records)
    return sum(_budget_used(body, blobs) is not None for (body,) in records.store.raw("SELECT body FROM checkpoints"))


def test_i8_reads_the_ledgers_and_a_resumed_run_starting_afresh_is_caught() -> None:
    from baton.sim.sec27_plans import PLANS

    plan = PLANS["killed-after-seal"]  # dies after VERIFIED; a new owner resumes it
    read: list[int] = []

    def count(records: SimRecords) -> None:
        read.append(_budget_ledgers_read(records))

    protected = run_world(config_for(plan.seed, 0, plan=plan.plan, kinds=plan.kinds), before_check=count)
    assert protected.violations == [] and read[0] >= 3  # the oracle reads ledgers: it is not vacuous
    ablated = run_world(config_for(plan.seed, 0, plan=plan.plan, kinds=plan.kinds, ablate=("budget-carry-over",)))
    assert any(v.startswith("I8:") and "model_calls used went from 1.0 to 0.0" in v for v in ablated.violations), \
        ablated.violations



def test_i2_baton_own_operations_rows_are_a_separate_internal_check() -> None:
    """Every lease row raised above the operations' epochs: only the check over Baton's own rows reports it, and
    it is not an outside oracle (an ablation is never attributed by it)."""
    from baton.sim.oracles import OWN_RECORDS_I2, outside_of

    def tamper(records: SimRecords) -> None:
        records.lease_history[:] = [(when, run_id, owner, epoch + 50)
                                    for when, run_id, owner, epoch in records.lease_history]

    found = _violations(tamper)
    assert any(v.startswith(f"{OWN_RECORDS_I2}:") for v in found), found
    assert not any(v.startswith("I2:") for v in found), found
    assert OWN_RECORDS_I2 not in outside_of(found)
    assert outside_of(["I2: x", f"{OWN_RECORDS_I2}: y", "owner_rule: z"]) == {"I2", "owner_rule"}
