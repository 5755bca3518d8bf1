"""`baton fleet` (and so `make demo`'s fleet) fails when the targets' own files show a run with two effects."""

from __future__ import annotations

from baton.cli.fleet_cmd import fleet_ok
from baton.runtime.fleet_summary import FleetSummary, SideEffects


def _summary(**changes: object) -> FleetSummary:
    base = FleetSummary(fleet_id="f", store="sqlite", duration_s=1.0, planned=2, runs=2, verified=2, failed=0,
                        escalated=0, active=0)
    return base.model_copy(update=changes)


def test_a_clean_fleet_passes() -> None:
    clean = SideEffects(target="deploy", file="d.jsonl", total=2, duplicate_keys={}, runs_with_several={})
    summary = _summary(side_effects=[clean])
    assert summary.oracle_failures == [] and fleet_ok(summary)


def test_two_effects_of_one_run_under_different_keys_fail_the_fleet() -> None:
    # No key repeats, so a count per key sees nothing; per run, the second deployment shows.
    several = SideEffects(target="deploy", file="d.jsonl", total=3, duplicate_keys={}, runs_with_several={"r1": 2})
    summary = _summary(side_effects=[several], runs_with_several_effects=1)
    assert summary.oracle_failures == ["deploy: run r1 has 2 side effects"]
    assert not fleet_ok(summary)


def test_checker_violations_and_timeouts_fail_the_fleet() -> None:
    assert not fleet_ok(_summary(checker_violations=["invariant 2: ..."]))
    assert not fleet_ok(_summary(timed_out=["r2"]))
