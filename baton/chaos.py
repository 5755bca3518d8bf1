"""Chaos: the six reasons a run moves, injected on a seeded schedule.

Each `ChaosReason` says which placements an event hits (its scope), whether
the worker process is killed outright (only a reclaimed GPU is: SIGKILL, no
goodbye), where the displaced runs should preferably go, and the reason string
the handoff records.

| reason                | can hit                     | scope                  | kill |
|-----------------------|-----------------------------|------------------------|------|
| gpu_reclaimed         | placements with a GPU       | that placement         | yes  |
| provider_unhealthy    | any (if >1 provider)        | all of its provider    | no   |
| region_capacity_lost  | any (if >1 region)          | all of its region      | no   |
| browser_pool_drained  | placements with `browser`   | that placement         | no   |
| better_model_released | runs not on the better rel. | one run                | no   |
| scheduler_rebalance   | any (if >1 placement)       | one run                | no   |

`ChaosSchedule.generate` is a pure function of its arguments: the same seed
gives the same events. It always schedules one event of every reason that
applies to the fleet (in the first half of the duration, so runs are still
there to move), then `extra_events` more at seeded times. At fire time,
`ChaosEvent.requests(active)` turns an event into `HandoffRequest`s for the
runs then on the affected placements: what the fleet coordinator consumes.
What an event changes in the placement and release catalog (a reclaimed GPU,
a refilled browser pool, a published release) is recorded through the
catalog's calls by `baton.chaos_catalog.record_chaos` when it fires.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum

from pydantic import Field

from baton.catalog.releases import BETTER_RELEASE, RELEASES
from baton.models import Placement
from baton.models.base import Record


class ChaosReason(StrEnum):
    """Why a run has to move; the value is the handoff reason string."""

    GPU_RECLAIMED = "gpu_reclaimed"
    PROVIDER_UNHEALTHY = "provider_unhealthy"
    REGION_CAPACITY_LOST = "region_capacity_lost"
    BROWSER_POOL_DRAINED = "browser_pool_drained"
    BETTER_MODEL_RELEASED = "better_model_released"
    SCHEDULER_REBALANCE = "scheduler_rebalance"

    @property
    def handoff_reason(self) -> str:
        return self.value

    @property
    def kills_worker(self) -> bool:
        """True when the worker dies without a chance to quiesce (SIGKILL)."""
        return self is ChaosReason.GPU_RECLAIMED

    @property
    def targets_one_run(self) -> bool:
        """True when the event moves one chosen run rather than a placement's runs."""
        return self in (ChaosReason.BETTER_MODEL_RELEASED, ChaosReason.SCHEDULER_REBALANCE)


def has_gpu(placement: Placement) -> bool:
    return placement.accelerator.startswith("gpu")


def can_hit(reason: ChaosReason, source: Placement, placements: Sequence[Placement], better_release_id: str | None) -> bool:
    """True when an event of `reason` can originate at `source` in this catalog."""
    if reason is ChaosReason.GPU_RECLAIMED:
        return has_gpu(source)
    if reason is ChaosReason.PROVIDER_UNHEALTHY:
        return any(other.provider != source.provider for other in placements)
    if reason is ChaosReason.REGION_CAPACITY_LOST:
        return any(other.region != source.region for other in placements)
    if reason is ChaosReason.BROWSER_POOL_DRAINED:
        return "browser" in source.tools
    if reason is ChaosReason.BETTER_MODEL_RELEASED:
        return better_release_id is not None and any(better_release_id in p.supported_release_ids for p in placements)
    return len(placements) > 1


def affected_placements(reason: ChaosReason, source: Placement, placements: Sequence[Placement]) -> tuple[str, ...]:
    """Names of the placements an event of `reason` at `source` takes out (empty for one-run reasons)."""
    if reason is ChaosReason.PROVIDER_UNHEALTHY:
        return tuple(sorted(p.name for p in placements if p.provider == source.provider))
    if reason is ChaosReason.REGION_CAPACITY_LOST:
        return tuple(sorted(p.name for p in placements if p.region == source.region))
    if reason.targets_one_run:
        return ()
    return (source.name,)


def preferred_targets(
    reason: ChaosReason, source: Placement, placements: Sequence[Placement], better_release_id: str | None
) -> tuple[str, ...]:
    """Placements to try first, best first. A hint: the compatibility gate still decides."""
    lost = set(affected_placements(reason, source, placements)) | {source.name}
    others = [p for p in sorted(placements, key=lambda p: p.name) if p.name not in lost]
    if reason is ChaosReason.BETTER_MODEL_RELEASED:
        supporting = [p for p in sorted(placements, key=lambda p: p.name) if better_release_id in p.supported_release_ids]
        # Staying put on a new release is the smallest move, so it comes first.
        return tuple(p.name for p in sorted(supporting, key=lambda p: (p.name != source.name, p.name)))
    if reason is ChaosReason.GPU_RECLAIMED:
        return tuple(p.name for p in sorted(others, key=lambda p: (not has_gpu(p), p.name)))
    if reason is ChaosReason.BROWSER_POOL_DRAINED:
        return tuple(p.name for p in sorted(others, key=lambda p: ("browser" not in p.tools, p.name)))
    return tuple(p.name for p in sorted(others, key=lambda p: (p.region != source.region, p.name)))


class ChaosRun(Record):
    """A run as the schedule sees it: where it starts and, if known, on which release."""

    run_id: str = Field(min_length=1)
    placement: str = Field(min_length=1)
    release_id: str | None = None


class HandoffRequest(Record):
    """A request to move one run, with the reason and what the mover should do first."""

    run_id: str = Field(min_length=1)
    reason: ChaosReason
    source_placement: str
    preferred_targets: tuple[str, ...]
    kill_worker: bool
    at: float = Field(ge=0, description="seconds since the schedule started")
    event_id: str
    target_release_id: str | None = None


class ChaosEvent(Record):
    """One scheduled disruption."""

    event_id: str
    at_s: float = Field(ge=0)
    reason: ChaosReason
    source_placement: str
    affected: tuple[str, ...]
    run_id: str | None = None
    preferred_targets: tuple[str, ...]
    kill_worker: bool
    target_release_id: str | None = None

    def _targets_from(self, placement: str) -> tuple[str, ...]:
        if self.reason is ChaosReason.BETTER_MODEL_RELEASED:
            return self.preferred_targets
        return tuple(name for name in self.preferred_targets if name != placement)

    def requests(self, active: Mapping[str, str]) -> tuple[HandoffRequest, ...]:
        """Handoff requests for the runs active now (`run_id -> placement name`).

        A placement-wide event moves every active run on an affected placement.
        A one-run event moves its chosen run if still active, else the first
        active run on the same source placement, else nothing.
        """
        if self.reason.targets_one_run:
            chosen = self.run_id if self.run_id in active else None
            if chosen is None:
                chosen = next((run for run in sorted(active) if active[run] == self.source_placement), None)
            moves = [] if chosen is None else [(chosen, active[chosen])]
        else:
            moves = [(run, active[run]) for run in sorted(active) if active[run] in self.affected]
        return tuple(
            HandoffRequest(
                run_id=run,
                reason=self.reason,
                source_placement=placement,
                preferred_targets=self._targets_from(placement),
                kill_worker=self.kill_worker,
                at=self.at_s,
                event_id=self.event_id,
                target_release_id=self.target_release_id,
            )
            for run, placement in moves
        )


def _normalize_runs(runs: Mapping[str, str] | Iterable[ChaosRun]) -> list[ChaosRun]:
    if isinstance(runs, Mapping):
        items = [ChaosRun(run_id=run, placement=placement) for run, placement in runs.items()]
    else:
        items = list(runs)
    return sorted(items, key=lambda run: run.run_id)


class ChaosSchedule(Record):
    """Timed chaos events, sorted by time; a pure function of the generator's inputs."""

    seed: int
    duration_s: float = Field(gt=0)
    events: tuple[ChaosEvent, ...]

    @property
    def reasons(self) -> frozenset[ChaosReason]:
        return frozenset(event.reason for event in self.events)

    def due(self, after_s: float, until_s: float) -> tuple[ChaosEvent, ...]:
        """Events with `after_s < at_s <= until_s` (poll with the previous and current time)."""
        return tuple(event for event in self.events if after_s < event.at_s <= until_s)

    @classmethod
    def generate(
        cls,
        seed: int,
        duration_s: float,
        placements: Sequence[Placement],
        runs: Mapping[str, str] | Iterable[ChaosRun],
        *,
        extra_events: int = 2,
        better_release_id: str | None = RELEASES[BETTER_RELEASE].release_id,
    ) -> ChaosSchedule:
        """One event per applicable reason in the first half, plus `extra_events` anywhere.

        `duration_s` may be seconds of wall clock or virtual steps; the schedule
        only orders and spaces events within it. `runs` gives each run's starting
        placement (`run_id -> placement`, or `ChaosRun`s that also name the
        release); runs on placements outside the catalog are ignored.
        """
        rng = random.Random(seed)
        catalog = sorted(placements, key=lambda p: p.name)
        by_name = {p.name: p for p in catalog}
        run_list = [run for run in _normalize_runs(runs) if run.placement in by_name]
        options = {reason: _sources(reason, catalog, run_list, better_release_id) for reason in ChaosReason}
        applicable = [reason for reason in ChaosReason if options[reason]]
        rng.shuffle(applicable)
        planned = [(reason, rng.uniform(0.05, 0.5) * duration_s) for reason in applicable]
        for _ in range(extra_events if applicable else 0):
            planned.append((rng.choice(sorted(applicable)), rng.uniform(0.05, 0.9) * duration_s))
        events = []
        for reason, at_s in planned:
            source_name, candidates = rng.choice(options[reason])
            source = by_name[source_name]
            run_id = rng.choice(candidates).run_id if reason.targets_one_run else None
            events.append(
                ChaosEvent(
                    event_id="",
                    at_s=round(at_s, 3),
                    reason=reason,
                    source_placement=source_name,
                    affected=affected_placements(reason, source, catalog),
                    run_id=run_id,
                    preferred_targets=preferred_targets(reason, source, catalog, better_release_id),
                    kill_worker=reason.kills_worker,
                    target_release_id=better_release_id if reason is ChaosReason.BETTER_MODEL_RELEASED else None,
                )
            )
        events.sort(key=lambda event: (event.at_s, event.reason.value, event.source_placement))
        numbered = tuple(
            event.model_copy(update={"event_id": f"chaos-{seed}-{index:03d}"}) for index, event in enumerate(events)
        )
        return cls(seed=seed, duration_s=duration_s, events=numbered)


def _sources(
    reason: ChaosReason, catalog: Sequence[Placement], runs: Sequence[ChaosRun], better_release_id: str | None
) -> list[tuple[str, list[ChaosRun]]]:
    """Source placements an event of `reason` can hit, each with the runs it would move."""
    sources = []
    for placement in catalog:
        hosted = [run for run in runs if run.placement == placement.name]
        if reason is ChaosReason.BETTER_MODEL_RELEASED:
            hosted = [run for run in hosted if run.release_id != better_release_id]
        if hosted and can_hit(reason, placement, catalog, better_release_id):
            sources.append((placement.name, hosted))
    return sources
