"""Fleet planning and chaos translation: pure functions, no processes."""

from __future__ import annotations

import datetime as dt

from baton.catalog.records import ReleasePublication
from baton.catalog.releases import RELEASES
from baton.chaos import ChaosEvent, ChaosReason
from baton.models import AuthorityLevel, RunKind
from baton.placements import DEFAULT_PLACEMENTS, placement_named
from baton.runtime.fleet_chaos import moves_for
from baton.runtime.fleet_plan import APPROVAL_TTL_S, fleet_policy, plan_runs, worker_placements

CATALOG = {p.name: p for p in DEFAULT_PLACEMENTS}
V7, V8 = RELEASES["model-v7"].release_id, RELEASES["model-v8"].release_id


def hosting(workers: int = 3) -> list:
    return [CATALOG[name] for name in dict.fromkeys(worker_placements(DEFAULT_PLACEMENTS, workers))]


def test_three_workers_cover_gpu_browser_and_a_better_release_only_placement() -> None:
    names = worker_placements(DEFAULT_PLACEMENTS, 3)
    assert names == ["local-gpu-eu", "cloud-us", "browser-pool-eu"]
    assert worker_placements(DEFAULT_PLACEMENTS, 5)[4] == "local-gpu-eu"


def test_deploy_runs_start_only_where_external_mutation_is_allowed() -> None:
    specs = plan_runs(12, hosting(), prefix="f")
    assert [s.kind for s in specs[:2]] == [RunKind.RESEARCH, RunKind.DEPLOY]
    for spec in specs:
        assert spec.release.release_id in spec.placement.supported_release_ids
        if spec.kind is RunKind.DEPLOY:
            assert spec.placement.authority_ceiling.allows(AuthorityLevel.EXTERNAL_MUTATE)
    assert {s.placement.name for s in specs} == {"local-gpu-eu", "cloud-us", "browser-pool-eu"}


def test_the_fleet_policy_approves_v7_to_v8_and_forbids_downgrades() -> None:
    now = dt.datetime.now(dt.timezone.utc)
    policy = fleet_policy(ReleasePublication(now, catalog_seeded=True, published_at=now))
    (migration,) = policy.allowed_behavioral_migrations
    assert (migration.from_release_id, migration.to_release.release_id) == (V7, V8)
    assert policy.approvals[0].covers(V7, V8, now) and not policy.approvals[0].covers(V8, V7, now)
    assert not policy.allow_authority_downgrade


def test_the_release_boards_approval_runs_from_the_better_releases_publication_not_from_the_policys_build() -> None:
    published = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.timezone.utc)
    later = published + dt.timedelta(days=2)
    (approval,) = fleet_policy(ReleasePublication(later, catalog_seeded=True, published_at=published)).approvals
    assert approval.expires_at == published + dt.timedelta(seconds=APPROVAL_TTL_S)
    assert not approval.covers(V7, V8, later)
    withdrawn = ReleasePublication(published, catalog_seeded=True, published_at=None)
    assert fleet_policy(withdrawn).approvals == ()


def test_an_unseeded_catalog_has_no_publication_to_anchor_to_so_the_approval_runs_from_the_build() -> None:
    now = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.timezone.utc)
    (approval,) = fleet_policy(ReleasePublication(now, catalog_seeded=False, published_at=None)).approvals
    assert approval.expires_at == now + dt.timedelta(seconds=APPROVAL_TTL_S)


def test_a_reclaimed_gpu_moves_runs_without_quiescing() -> None:
    event = ChaosEvent(event_id="e1", at_s=1.0, reason=ChaosReason.GPU_RECLAIMED, source_placement="local-gpu-eu",
                       affected=("local-gpu-eu",), preferred_targets=("cloud-us",), kill_worker=True)
    moves = moves_for(event, {"r1": "local-gpu-eu", "r2": "cloud-us"}, placements=hosting(),
                      lease_owner=lambda run: "worker:w1.0", release_of=lambda run: V7)
    (move,) = moves
    assert move.run_id == "r1" and move.request is not None
    assert move.request.source_alive is False and "local-gpu-eu" in move.request.excluded_placements


def test_a_live_handoff_quiesces_a_worker_owned_run_and_leaves_a_reserved_one() -> None:
    event = ChaosEvent(event_id="e2", at_s=1.0, reason=ChaosReason.REGION_CAPACITY_LOST, source_placement="cloud-us",
                       affected=("cloud-us",), preferred_targets=("local-gpu-eu",), kill_worker=False)
    owners = {"r1": "worker:w2.0", "r2": "placement:cloud-us"}
    moves = {m.run_id: m for m in moves_for(event, {"r1": "cloud-us", "r2": "cloud-us"}, placements=hosting(),
                                            lease_owner=owners.get, release_of=lambda run: V8)}
    assert moves["r1"].request is not None and moves["r1"].request.source_alive
    assert moves["r2"].request is None and "not adopted" in (moves["r2"].skipped or "")


def test_a_better_model_moves_only_runs_on_the_older_release_to_where_it_must_migrate() -> None:
    event = ChaosEvent(event_id="e3", at_s=1.0, reason=ChaosReason.BETTER_MODEL_RELEASED,
                       source_placement="local-gpu-eu", affected=(), run_id="r1",
                       preferred_targets=("local-gpu-eu", "cloud-us"), kill_worker=False, target_release_id=V8)
    releases = {"r1": V7}
    (move,) = moves_for(event, {"r1": "local-gpu-eu"}, placements=hosting(), lease_owner=lambda run: "worker:w1.0",
                        release_of=releases.get)
    assert move.request is not None
    assert set(move.request.excluded_placements) == {"local-gpu-eu", "browser-pool-eu"}
    releases["r1"] = V8
    (skipped,) = moves_for(event, {"r1": "local-gpu-eu"}, placements=hosting(), lease_owner=lambda run: "worker:w1.0",
                           release_of=releases.get)
    assert skipped.request is None and "already" in (skipped.skipped or "")
    assert placement_named(DEFAULT_PLACEMENTS, "cloud-us").supported_release_ids == (V8,)


def test_every_default_placement_hosts_the_catalog_releases_bundle_and_contract() -> None:
    # The gate matches these by name; without them no handoff between default placements is allowed.
    for placement in DEFAULT_PLACEMENTS:
        for release in RELEASES.values():
            assert release.verifier_bundle in placement.verifiers, placement.name
            assert release.tool_contract in placement.tools, placement.name


def test_with_browser_runs_every_third_run_fills_the_form_on_a_browser_pool() -> None:
    specs = plan_runs(9, hosting(), prefix="f", browser=True)
    browser = [s for s in specs if s.kind is RunKind.BROWSER]
    assert [specs.index(s) for s in browser] == [2, 5, 8]
    assert {s.placement.name for s in browser} == {"browser-pool-eu"}
    assert all(s.authority is AuthorityLevel.SANDBOX_MUTATE and s.task_input["account"] for s in browser)
    assert not [s for s in plan_runs(9, hosting(), prefix="f") if s.kind is RunKind.BROWSER]  # off by default


def test_a_drained_browser_pool_moves_its_adopted_browser_runs_elsewhere_with_a_quiesce() -> None:
    event = ChaosEvent(event_id="e4", at_s=1.0, reason=ChaosReason.BROWSER_POOL_DRAINED,
                       source_placement="browser-pool-eu", affected=("browser-pool-eu",),
                       preferred_targets=("local-gpu-eu", "cloud-us"), kill_worker=False)
    owners = {"b1": "worker:w3.0", "r1": "worker:w1.0"}
    moves = {m.run_id: m for m in moves_for(event, {"b1": "browser-pool-eu", "r1": "local-gpu-eu"},
                                            placements=hosting(), lease_owner=owners.get, release_of=lambda run: V7)}
    assert set(moves) == {"b1"}  # only the pool's runs move
    request = moves["b1"].request
    assert request is not None and request.reason == "browser_pool_drained" and request.source_alive
    # The pool is refilled at once: a run only a browser pool can host may go back to it, after the preferred ones.
    assert request.excluded_placements == () and request.allow_same_placement
    assert "browser-pool-eu" not in request.preferred_targets
