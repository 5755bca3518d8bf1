"""`FaultCase.companions`: a single ablation of a stacked layer switches its companions off with it, nothing else."""

from __future__ import annotations

from baton.faults.cases import CASES
from baton.faults.cases_epochs import EPOCH_LAYERS
from baton.faults.matrix import isolated_companions

CASE = CASES["stale-capability-after-move"]


def test_one_epoch_layer_ablated_switches_the_other_two_off() -> None:
    for layer in EPOCH_LAYERS:
        assert sorted(isolated_companions(CASE, (layer,))) == sorted(set(EPOCH_LAYERS) - {layer})


def test_explicit_sets_and_other_ablations_are_taken_as_given() -> None:
    assert isolated_companions(CASE, ("gateway-epoch", "store-claim-epoch")) == ()
    assert isolated_companions(CASE, ("freshness",)) == ()
    assert isolated_companions(CASES["killed-after-seal"], ("gateway-epoch",)) == ()
    assert isolated_companions(CASES["killed-awaiting-reply"], ("idempotency",)) == ("reconcile-before-retry",)
