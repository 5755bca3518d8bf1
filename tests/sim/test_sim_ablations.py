"""Ablations under the simulation: with one protection off, a seed fails, its shrunk schedule still fails,
and replaying it gives the same event trail twice; with the protection on, the same schedule passes.

The pinned schedules come from `baton sim --seeds 100 --faults 5 --runs deploy,research --ablate NAME --json`
(docs/simulation.md has the whole table).
"""

from __future__ import annotations

import pytest

from baton.models import RunKind
from baton.sim.faults import FaultPlan
from baton.sim.runner import invariants_of, run_many, run_seed

BOTH = (RunKind.DEPLOY, RunKind.RESEARCH)
PINNED = {
    "reconcile-before-retry": (3, BOTH, "I4", '[{"arg": "", "at": 4, "kind": "drop_request"}, {"arg": "after", "at": 5, '
                               '"kind": "crash"}, {"arg": "", "at": 5, "kind": "drop_response"}, {"arg": "", "at": 8, '
                               '"kind": "drop_request"}]'),
    "lease-cas": (20, BOTH, "I3", '[{"arg": "better_model_released", "at": 21, "kind": "handoff"}, '
                  '{"arg": "12.0", "at": 23, "kind": "stall"}]'),  # writes 20 and 22 before a model call's reservation
    "freshness": (8, (RunKind.RESEARCH,), "I9", '[{"arg": "idempotency", "at": 7, "kind": "doc_change"}, '
                  '{"arg": "400.0", "at": 11, "kind": "stall"}]'),
}


@pytest.mark.parametrize("name", sorted(PINNED))
def test_the_shrunk_schedule_fails_only_with_the_protection_off_and_replays_identically(name: str) -> None:
    seed, kinds, invariant, schedule = PINNED[name]
    plan = FaultPlan.from_json(schedule)
    first = run_seed(seed, 0, (name,), plan=plan, kinds=kinds)
    second = run_seed(seed, 0, (name,), plan=plan, kinds=kinds)
    assert invariant in invariants_of(first), first.violations
    assert first.trail_hash == second.trail_hash
    protected = run_seed(seed, 0, plan=plan, kinds=kinds)
    assert protected.ok, protected.violations


def test_reconcile_before_retry_is_caught_within_the_first_seeds() -> None:
    """Seed 12 of the swarm mix (`baton.sim.scenarios`; seed 2 before the mix drew named scenarios)."""
    summary = run_many(range(20), 5, ablate=("reconcile-before-retry",), kinds=BOTH, stop_at_first_failure=True)
    assert summary.failing, "no seed of the first 20 caught the ablation"
    assert "I4" in invariants_of(summary.failing[0])


def test_the_sweep_goes_past_a_violating_seed_it_cannot_attribute() -> None:
    """A violating seed whose shrunk schedule also fails with the protections on (or with only the companions off)
    is no evidence for the ablation: the sweep counts it and goes on to the next violating seed."""
    from baton.sim.runner import ablation_sweep

    judged: list[int] = []

    def judge(seed: int, plan: FaultPlan, off: tuple[str, ...], others: tuple[str, ...], *,
              kinds: tuple[RunKind, ...]) -> dict[str, object]:
        judged.append(seed)
        assert off == ("reconcile-before-retry",) and others == ()
        return {"first_seed": seed, "violations": ["I4"], "protected_ok": len(judged) > 1,
                "companions_only_ok": True, "attributable": len(judged) > 1}

    [result] = ablation_sweep(["reconcile-before-retry"], 40, 5, kinds=BOTH, judge=judge)
    assert len(judged) == 2 and judged[0] < judged[1], judged
    assert result["caught"] is True
    assert result["skipped"] == 1 and result["skipped_seeds"] == [judged[0]]
    assert result["first_seed"] == judged[1] and result["seeds_run"] == judged[1] + 1


def test_the_sweep_reports_a_range_with_no_attributable_seed_as_uncaught() -> None:
    from baton.sim.runner import ablation_sweep

    judged: list[int] = []

    def judge(seed: int, plan: FaultPlan, off: tuple[str, ...], others: tuple[str, ...], *,
              kinds: tuple[RunKind, ...]) -> dict[str, object]:
        judged.append(seed)
        return {"first_seed": seed, "protected_ok": False, "attributable": False}

    [result] = ablation_sweep(["reconcile-before-retry"], 20, 5, kinds=BOTH, judge=judge)
    assert judged, "no seed of the first 20 violated"
    assert result["caught"] is False and result["seeds_run"] == 20
    assert result["skipped"] == len(judged) and result["skipped_seeds"] == judged


STOP30 = {
    'gate:region_change_forbidden': (64, (), 'owner_rule',
        '[{"arg": "same_region", "at": 0, "kind": "owner_rule"}, {"arg": "browser_pool_drained", "at": 14, "kind": "handoff"}, {"arg": "12.0", "at": 17, "kind": "stall"}]'),
    'gate:provider_change_forbidden': (33, (), 'owner_rule',
        '[{"arg": "same_provider", "at": 0, "kind": "owner_rule"}, {"arg": "ceiling_lowered", "at": 19, "kind": "catalog_change"}]'),
    'gate:non_exportable_state': (7, (), 'state_left_domain',
        '[{"arg": "non_exportable", "at": 0, "kind": "owner_rule"}, {"arg": "older_release_retired", "at": 17, "kind": "catalog_change"}]'),
    'gate:hardware_attestation_missing': (4, (), 'owner_rule',
        '[{"arg": "unsafe", "at": 0, "kind": "owner_rule"}]'),
    'gate:data_scope_unavailable': (197, (), 'owner_rule',
        '[{"arg": "data_scope", "at": 0, "kind": "owner_rule"}]'),
    'gate:behavioral_migration_unapproved': (2, (), 'withdrawn_release',
        '[{"arg": "approval_lapsed", "at": 0, "kind": "owner_rule"}, {"arg": "older_release_retired", "at": 17, "kind": "catalog_change"}]'),
    'gate:environment_changed': (3, ('resume-environment-check',), 'environment',
        '[{"arg": "scheduler_rebalance", "at": 1, "kind": "handoff", "on": "claim_operation"}, {"arg": "5.0", "at": 1, "kind": "stall", "on": "claim_operation"}, {"arg": "after", "at": 5, "kind": "crash"}, {"arg": "leases", "at": 22, "kind": "doc_change"}]'),
    'resume-environment-check': (3, ('gate:environment_changed',), 'environment',
        '[{"arg": "scheduler_rebalance", "at": 1, "kind": "handoff", "on": "claim_operation"}, {"arg": "5.0", "at": 1, "kind": "stall", "on": "claim_operation"}, {"arg": "after", "at": 5, "kind": "crash"}, {"arg": "leases", "at": 22, "kind": "doc_change"}]'),
    'gate:behavioral_migration_approved': (22, ('gate:runtime_changed',), 'withdrawn_release',
        '[{"arg": "environment_changed", "at": 11, "kind": "catalog_change"}, {"arg": "older_release_retired", "at": 18, "kind": "catalog_change"}]'),
    'gate:runtime_changed': (22, ('evidence-binding', 'gate:behavioral_migration_approved'), 'withdrawn_release',
        '[{"arg": "environment_changed", "at": 11, "kind": "catalog_change"}, {"arg": "older_release_retired", "at": 18, "kind": "catalog_change"}]'),
}
"""Stop 30's sweep (docs/benchmarks-sim-ablations-stop30.json, deploy and research runs): the ablation, its companions
switched off with it, the oracle that caught it, the shrunk schedule (owner rules, a retired release, the environment
pair's move after a document changed)."""


@pytest.mark.parametrize("name", sorted(STOP30))
def test_stop30_schedules_fail_only_with_the_ablation_off_and_replay_identically(name: str) -> None:
    seed, companions, oracle, schedule = STOP30[name]
    plan = FaultPlan.from_json(schedule)
    first = run_seed(seed, 0, (name, *companions), plan=plan, kinds=BOTH)
    second = run_seed(seed, 0, (name, *companions), plan=plan, kinds=BOTH)
    assert oracle in invariants_of(first), first.violations
    assert first.trail_hash == second.trail_hash
    protected = run_seed(seed, 0, plan=plan, kinds=BOTH)
    assert protected.ok, protected.violations
    if companions:
        alone = run_seed(seed, 0, companions, plan=plan, kinds=BOTH)
        assert alone.ok, alone.violations


STOP31 = {
    'gateway-epoch': (63, ('store-claim-epoch', 'target-fence'), 'I2', {'I2-own-records'},
        '[{"arg": "scheduler_rebalance", "at": 1, "kind": "handoff", "on": "claim_operation"}, {"arg": "5.0", "at": 1, "kind": "stall", "on": "claim_operation"}]'),
    'target-fence': (63, ('gateway-epoch', 'store-claim-epoch'), 'I2', {'I2-own-records'},
        '[{"arg": "scheduler_rebalance", "at": 1, "kind": "handoff", "on": "claim_operation"}, {"arg": "5.0", "at": 1, "kind": "stall", "on": "claim_operation"}]'),
    'idempotency': (2, ('reconcile-before-retry',), 'I1', {'I4'},
        '[{"arg": "0.5", "at": 8, "kind": "delay"}]'),
    'resume-terminal-guard': (37, (), 'I10', set(),
        '[{"arg": "2.0", "at": 2, "kind": "delay"}, {"arg": "release_withdrawn", "at": 22, "kind": "catalog_change"}, {"arg": "after", "at": 22, "kind": "crash"}]'),
}
"""Stop 31's sweep (docs/benchmarks-sim-ablations-stop31.json, deploy and research runs): the ablation, its companions,
the outside oracle that caught it, what the companions alone break, the shrunk schedule. An ablation is attributed by
an outside oracle the companions alone do not break: with only the epoch layers' companions off the run still breaks
Baton's own-records check (`I2-own-records`: the store opened the operation at the stale epoch before the gateway or
the target refused it), which attributes nothing; with only `reconcile-before-retry` off the key is sent again
without asking (`I4`) but the deploy service's own idempotency keeps one deployment (no `I1`)."""


_DOWNGRADED = ('[{"arg": "downgrade_allowed", "at": 0, "kind": "owner_rule"}, {"arg": "5.0", "at": 1, "kind": "stall", '
               '"on": "claim_operation"}, {"arg": "ceiling_lowered", "at": 20, "kind": "catalog_change"}]')
_ENDED_MOVED = ('[{"arg": "verifier_lost_after_move", "at": 1, "kind": "catalog_change", '
                '"on": "sealed:deploy:POSTCONDITION_VERIFIED"}, {"arg": "8.0", "at": 1, "kind": "hold", '
                '"on": "sealed:deploy:POSTCONDITION_VERIFIED"}]')
STOP32 = {
    'authority-downgrade': (80, ('authority-ceiling', 'gate:authority_downgraded', 'gateway-ceiling'), 'wrong_placement',
                            set(), _DOWNGRADED),
    'gateway-ceiling': (80, ('authority-ceiling', 'authority-downgrade', 'gate:authority_downgraded'), 'wrong_placement',
                        set(), _DOWNGRADED),
    'authority-ceiling': (80, ('authority-downgrade', 'gate:authority_downgraded', 'gateway-ceiling'), 'wrong_placement',
                          set(), _DOWNGRADED),
    'gate:authority_downgraded': (80, ('authority-ceiling', 'authority-downgrade', 'gateway-ceiling'), 'wrong_placement',
                                  set(), _DOWNGRADED),
    'gate:checkpoint_not_resumable': (47, ('resume-terminal-guard',), 'I10', set(), _ENDED_MOVED),
    'gate:migration_unsafe': (10, ('gate:hardware_attestation_missing', 'gate:non_exportable_state'), 'state_left_domain',
                              {'owner_rule'}, '[{"arg": "unsafe", "at": 0, "kind": "owner_rule"}, {"arg": "older_release_retired", "at": 14, "kind": "catalog_change"}]'),
    'approval-check': (26, (), 'expired_approval', set(),
        '[{"arg": "1000.0", "at": 1, "kind": "hold", "on": "sealed:deploy:COMMITTING"}]'),
    'evidence-binding': (20, ('gate:runtime_changed',), 'unverified_effect', set(),
        '[{"arg": "after", "at": 1, "kind": "crash", "on": "sealed:deploy:VERIFIED"}, '
        '{"arg": "", "at": 1, "kind": "replan", "on": "sealed:deploy:VERIFIED"}]'),
    'gate:schema_transform_required': (78, (), 'unfit_placement', set(), '[{"arg": "", "at": 0, "kind": "legacy_import"}]'),
    'gate:schema_transform_forbidden': (28, (), 'unfit_placement', set(),
        '[{"arg": "no_transform", "at": 0, "kind": "legacy_import"}]'),
}
"""Stop 32's new catches (docs/benchmarks-sim-ablations-stop32.json), in the same form as `STOP31`. The owner's allowed
downgrade (`faults.DOWNGRADE_ALLOWED`) lets the move onto the lowered ceiling commit, downgraded; each of the three
layers alone keeps the run from deploying there, and so does the gate's decided ceiling, which the resume caps the run's
authority at since stop 32 (before, the gate's finding was attributable to nothing: its companions alone deployed). The ended deploy run, its end unrecorded, is moved and its target
made unfit before adoption (`catalog_faults.AFTER_MOVE`): with the gate's terminal refusal and the resume's guard off
it never reports its end. The worker held at COMMITTING past its approval deploys only with the authority's approval check off
(the approver's own record against the deploy service's, `baton.sim.oracles_approval`). A second writer at the deploy
run's epoch seals VERIFIED over a re-planned spec (`faults.REPLAN`): with the evidence binding off (and the gate's
`runtime_changed`, its companion) the moved run deploys a spec the deploy verifier never passed (its own record against
the deploy service's, `baton.sim.oracles_verdicts`). The run whose owner wants both attested hardware and its state
kept in its trust domain, with the gate's two per-target findings off, works on its unattested source (`owner_rule`);
only with the sealed MIGRATION_UNSAFE class ignored too is it moved, and its state leaves its domain
(`state_left_domain`, named apart from `owner_rule` since stop 32 so the two harms are told apart). The schema plan
(docs/benchmarks-sim-ablations-stop32b.json): the operator imports the deploy run an older Baton sealed at schema 2
onto local-gpu-eu and moves it to cloud-eu, whose workers read only schema 3 (`baton.sim.legacy_import`); with the gate
reason off the cloud-eu worker restores the schema 2 state and the deploy service accepts its deployment (the workers'
restore record against the operator's, `baton.sim.oracles_restore`)."""


PINS = {"stop31": STOP31, "stop32": STOP32}
"""Every pinned catch since the outside-oracle attribution rule (stop 31), by the stop that pinned it."""


@pytest.mark.parametrize(("stop", "name"), [(stop, name) for stop, pins in PINS.items() for name in sorted(pins)])
def test_pinned_schedules_break_an_outside_oracle_only_with_the_ablation_off(stop: str, name: str) -> None:
    from baton.sim.oracles import outside_of

    seed, companions, oracle, alone_breaks, schedule = PINS[stop][name]
    plan = FaultPlan.from_json(schedule)
    first = run_seed(seed, 0, (name, *companions), plan=plan, kinds=BOTH)
    second = run_seed(seed, 0, (name, *companions), plan=plan, kinds=BOTH)
    assert oracle in outside_of(first.violations), first.violations
    assert first.trail_hash == second.trail_hash
    protected = run_seed(seed, 0, plan=plan, kinds=BOTH)
    assert protected.ok, protected.violations
    alone = run_seed(seed, 0, companions, plan=plan, kinds=BOTH) if companions else protected
    assert oracle not in outside_of(alone.violations), alone.violations
    assert invariants_of(alone) == alone_breaks, alone.violations


def test_attribution_counts_only_outside_oracles_the_companions_do_not_break(monkeypatch: pytest.MonkeyPatch) -> None:
    """`attribute` on canned outcomes: Baton's own-records check alone never attributes; an outside oracle the
    companions also break does not either; one they do not break does (with every protection on clean)."""
    from types import SimpleNamespace

    from baton.sim import runner
    from baton.sim.oracles import OWN_RECORDS_I2

    def judge(ablated: list[str], companions: list[str], protected: tuple[str, ...] = ()) -> bool:
        def fake_run(seed: int, faults: int, ablate: tuple[str, ...] = (), **_: object) -> SimpleNamespace:
            found = ablated if "x" in ablate else companions if ablate else list(protected)
            return SimpleNamespace(violations=found, ok=not found, trail_hash="h")

        monkeypatch.setattr(runner, "run_seed", fake_run)
        monkeypatch.setattr(runner, "shrink", lambda seed, plan, **_: (plan, 0))
        return bool(runner.attribute(0, FaultPlan(), ("x", "y"), ("y",))["attributable"])

    own = f"{OWN_RECORDS_I2}: row"
    assert judge(["I2: a", own], [own]) is True
    assert judge([own], []) is False
    assert judge(["I2: a", own], ["I2: b"]) is False
    assert judge(["I2: a", "I1: c"], ["I2: b"]) is True
    assert judge(["I2: a"], [], protected=(own,)) is False
