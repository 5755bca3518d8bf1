"""A run goes only where its tools are: a browser run never moves to a placement without a browser pool.

The gate refuses such a target (`tool_contract_unavailable`), so target
selection skips it, and with no browser placement left the move is refused
with that reason for every candidate. A drained pool is refilled, so its
browser runs may go back to it, and only there.
"""

from __future__ import annotations

from baton.checkpoints import restore
from baton.chaos import ChaosEvent, ChaosReason
from baton.compat import GateReason, HandoffPolicy
from baton.handoff.selection import rank_targets
from baton.models import RunKind
from baton.placements import DEFAULT_PLACEMENTS, hosts_kind, tools_needed
from baton.runtime.fleet_chaos import moves_for
from baton.store.blobs import BlobStore

from builders.checkpoints import seal
from builders.records import TOOL_CONTRACT, T0, parts, placement

POOL = placement("pool-1", tools=(TOOL_CONTRACT, "browser"))
PLAIN = placement("plain-1", tools=(TOOL_CONTRACT,))
OTHER_POOL = placement("pool-2", tools=(TOOL_CONTRACT, "browser"), image="worker:2")


def test_a_browser_run_is_ranked_only_onto_placements_with_a_browser(blobs: BlobStore) -> None:
    restored = restore(blobs, seal(blobs, parts(run_kind=RunKind.BROWSER, where=POOL)))
    ranked = rank_targets(restored, [PLAIN, OTHER_POOL], HandoffPolicy(), now=T0, preferred=("plain-1",))
    allowed = [target.name for target, decision in ranked if decision.allowed]
    assert allowed == ["pool-2"]  # preferred or not, the plain placement is refused
    refused = dict((target.name, decision) for target, decision in ranked)["plain-1"]
    assert refused.blocking_reasons == (GateReason.TOOL_CONTRACT_UNAVAILABLE,)


def test_with_no_browser_placement_left_every_candidate_is_refused_with_the_tool_reason(blobs: BlobStore) -> None:
    restored = restore(blobs, seal(blobs, parts(run_kind=RunKind.BROWSER, where=POOL)))
    ranked = rank_targets(restored, [PLAIN], HandoffPolicy(), now=T0)
    assert [d.allowed for _, d in ranked] == [False]
    assert GateReason.TOOL_CONTRACT_UNAVAILABLE in ranked[0][1].reasons


def test_a_research_run_may_still_go_to_a_placement_without_a_browser(blobs: BlobStore) -> None:
    restored = restore(blobs, seal(blobs, parts(run_kind=RunKind.RESEARCH, where=POOL)))
    ranked = rank_targets(restored, [PLAIN], HandoffPolicy(), now=T0)
    assert ranked[0][1].allowed


def test_only_the_default_browser_pool_hosts_browser_runs() -> None:
    assert tools_needed(RunKind.BROWSER) == ("browser",) and tools_needed(RunKind.DEPLOY) == ()
    assert [p.name for p in DEFAULT_PLACEMENTS if hosts_kind(p, RunKind.BROWSER)] == ["browser-pool-eu"]


def test_a_drained_pool_may_take_its_runs_back_after_every_other_target() -> None:
    by_name = {p.name: p for p in DEFAULT_PLACEMENTS}
    event = ChaosEvent(event_id="chaos-1-000", at_s=1.0, reason=ChaosReason.BROWSER_POOL_DRAINED,
                       source_placement="browser-pool-eu", affected=("browser-pool-eu",),
                       preferred_targets=("cloud-eu", "cloud-us", "local-gpu-eu"), kill_worker=False)
    moves = moves_for(event, {"b-1": "browser-pool-eu", "r-1": "cloud-eu"}, placements=list(by_name.values()),
                      lease_owner=lambda run: "worker:w3.0", release_of=lambda run: None)
    assert [m.run_id for m in moves] == ["b-1"]  # only the drained pool's runs move
    request = moves[0].request
    assert request is not None and request.allow_same_placement and request.excluded_placements == ()
    assert "browser-pool-eu" not in request.preferred_targets  # elsewhere first; back to the pool only if nothing else fits
