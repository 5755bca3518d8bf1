"""The fifteen failure-injection cases of sec. 27, each a seeded script over either strategy.

Every script is written once, in terms of the strategy's verbs (start, step,
hand off, damage the latest state), so Baton and the naive control face the
very same fault at the very same point. The seed varies the data (build
versions, commit ids, which byte is damaged, run ids), never the fault.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from baton.faults.external import FORM
from baton.faults.facts import RunStarted
from baton.faults.scenario import Scenario
from baton.faults.workers import ScenarioWorker
from baton.faults.world import V7, V8, WorldConfig
from baton.models import AuthorityLevel, Boundary, PortabilityConstraints


@dataclass(frozen=True)
class FaultCase:
    """One injected fault: where it strikes, and what the run does around it."""

    case_id: str
    title: str
    task: str
    script: Callable[[Scenario], None]
    options: dict[str, object] | None = None

    def config(self, seed: int) -> WorldConfig:
        return WorldConfig(seed=seed, case_id=self.case_id, task=self.task).with_(**(self.options or {}))


def _finish(worker: ScenarioWorker | None) -> None:
    if worker is not None:
        worker.finish()


def source_dies_before_seal(sc: Scenario) -> None:
    # The model call is made and billed, then the process is killed before the candidate is sealed.
    sc.start_killed(until=Boundary.GENERATING, kill="before_seal")
    _finish(sc.handoff(None, "worker_lost", alive=False))


def source_dies_after_seal(sc: Scenario) -> None:
    # AUTHORIZED is sealed, then the process is killed still holding an unexpired lease.
    sc.start_killed(until=Boundary.VERIFIED, kill="after_seal")
    _finish(sc.handoff(None, "heartbeat_missed", alive=True))


def target_dies_after_epoch(sc: Scenario) -> None:
    source = sc.start()
    source.run_to(Boundary.VERIFIED)
    sc.handoff_to_doomed(source, "scheduler_rebalance", kill="after_adopt", alive=True, answers=True)
    _finish(sc.handoff(None, "new_owner_lost", alive=True))


def old_worker_resumes(sc: Scenario) -> None:
    source = sc.start()
    source.run_to(Boundary.AUTHORIZED)
    source.arm_pause("before_send")
    source.step()  # an authorized request in hand, then a long pause
    moved = sc.handoff(source, "lease_expired", alive=False)
    assert moved is not None
    moved.run_to(Boundary.COMMITTED)
    source.wake()  # it sends what it was holding
    sc.notes.append(f"{source.name} woke up and " + ("was fenced" if getattr(source, "fenced", False) else "acted"))
    moved.finish()


def checkpoint_blob_missing(sc: Scenario) -> None:
    source = sc.start()
    source.run_to(Boundary.COMMITTED)
    sc.notes.append(sc.strategy.lose_latest_state(sc.world))
    _finish(sc.handoff(source, "scheduler_rebalance", alive=True, answers=True) or source)


def checkpoint_hash_mismatch(sc: Scenario) -> None:
    source = sc.start()
    source.run_to(Boundary.VERIFIED)
    sc.notes.append(sc.strategy.alter_latest_state(sc.world))
    _finish(sc.handoff(source, "scheduler_rebalance", alive=True, answers=True) or source)


def schema_incompatible(sc: Scenario) -> None:
    source = sc.start()
    source.run_to(Boundary.VERIFIED)
    _finish(sc.handoff(source, "provider_unhealthy", alive=True, answers=True) or source)


def verifier_unavailable(sc: Scenario) -> None:
    source = sc.start()
    source.run_to(Boundary.CANDIDATE_READY)
    _finish(sc.handoff(source, "gpu_reclaimed_soon", alive=True, answers=True) or source)


def repository_changed(sc: Scenario) -> None:
    source = sc.start()
    source.run_to(Boundary.AUTHORIZED)
    source.pause()
    sc.notes.append(f"repository moved to {sc.world.external.repo.advance()[:12]} during the pause")
    _finish(sc.handoff(source, "preempted", alive=False))


def browser_session_expired(sc: Scenario) -> None:
    source = sc.start()
    source.run_to(Boundary.AUTHORIZED)
    source.pause()
    sc.wait(0.6)  # the page observation lapses ...
    sc.notes.append(f"{sc.world.external.webapp.expire_sessions()} browser session(s) expired")  # ... and the sessions
    _finish(sc.handoff(source, "browser_pool_drained", alive=False))


def provider_alias_changed(sc: Scenario) -> None:
    source = sc.start()
    source.run_to(Boundary.VERIFIED)
    source.pause()
    sc.world.provider.repoint("local", V7.model, V8.model)
    sc.notes.append(f"provider 'local' now answers {V7.model} with {V8.model}")
    _finish(sc.handoff(source, "worker_lost", alive=False))


def side_effect_timed_out(sc: Scenario) -> None:
    source = sc.start()
    source.run_to(Boundary.AUTHORIZED)
    sc.world.targets[sc.task.target].arm(sc.task.intent, "lose_reply")
    source.arm("after_send")
    sc.run_until_killed(source, Boundary.AUTHORIZED)
    _finish(sc.handoff(None, "worker_lost", alive=False))


def approval_expired(sc: Scenario) -> None:
    source = sc.start()
    source.run_to(Boundary.AUTHORIZED)
    sc.world.approver.ttl_s = 3600.0  # approvals issued from now on are ordinary again
    source.pause()
    sc.wait(0.6)  # the migration outlasts the approval
    _finish(sc.handoff(source, "maintenance_drain", alive=False))


def budget_expires(sc: Scenario) -> None:
    source = sc.start()
    source.run_to(Boundary.AUTHORIZED)
    source.pause()
    deadline = sc.world.facts.of(RunStarted)[0].limits.deadline
    sc.wait(max(0.0, (deadline - sc.world.now()).total_seconds()) + 0.1)
    _finish(sc.handoff(source, "maintenance_drain", alive=False))


def region_policy_changed(sc: Scenario) -> None:
    source = sc.start()
    source.run_to(Boundary.AUTHORIZED)
    sc.world.lower_region_ceiling("eu-west", AuthorityLevel.VERIFY)
    sc.notes.append("eu-west placements may now verify but not mutate")
    _finish(sc.handoff(source, "region_policy_changed", alive=True, answers=True) or source)


CASE_LIST: tuple[FaultCase, ...] = (
    FaultCase("source-dies-before-seal", "source dies before checkpoint seal", "deploy", source_dies_before_seal),
    FaultCase("source-dies-after-seal", "source dies after seal, before lease release", "deploy",
              source_dies_after_seal),
    FaultCase("target-dies-after-epoch", "target dies after acquiring the epoch", "report", target_dies_after_epoch),
    FaultCase("old-worker-resumes", "old worker resumes after fencing", "deploy", old_worker_resumes),
    FaultCase("checkpoint-blob-missing", "checkpoint blob is missing", "deploy", checkpoint_blob_missing),
    FaultCase("checkpoint-hash-mismatch", "checkpoint hash mismatches", "deploy", checkpoint_hash_mismatch),
    FaultCase("state-schema-incompatible", "state schema is incompatible", "report", schema_incompatible,
              {"catalog": ("eu-a", "legacy-eu")}),
    FaultCase("verifier-unavailable", "verifier bundle unavailable", "report", verifier_unavailable,
              {"catalog": ("eu-a", "lite-eu")}),
    FaultCase("repository-changed", "repository changed during pause", "patch", repository_changed),
    FaultCase("browser-session-expired", "browser session expired", "form", browser_session_expired,
              {"freshness_s": {FORM: 0.5}}),
    FaultCase("provider-alias-changed", "provider changed model alias", "report", provider_alias_changed),
    FaultCase("side-effect-timed-out", "external side effect timed out", "deploy", side_effect_timed_out),
    FaultCase("approval-expired", "approval expired during migration", "deploy", approval_expired,
              {"approval_ttl_s": 0.5}),
    FaultCase("budget-expires", "budget expires during handoff", "deploy", budget_expires, {"deadline_s": 1.5}),
    FaultCase("region-policy-changed", "region policy changes mid-run", "deploy", region_policy_changed,
              {"catalog": ("eu-a", "eu-b", "us-a"),
               "constraints": PortabilityConstraints(portable_to_regions=("eu-west",))}),
)

CASES: dict[str, FaultCase] = {case.case_id: case for case in CASE_LIST}
