"""The experiment's baselines in the simulated world: Baton's own machinery under another recovery policy.

`baton.experiment.strategies` defines nine strategies as a fast model; three of them are designs and run as
real code already (Baton: `baton.sim.world`; the transcript controls: `baton.sim.control_world`). The
baselines here are Baton's machinery used differently, so they run in Baton's world unchanged (the real
coordinator, worker, SDK, gateway, agents, the same seed's runs, fault schedule and oracles): only the
world's recovery policy (`World.recovery`: what the coordinator does when a lease lapses, chaos displaces a
run or the catalog changes under it) is the baseline's.

| strategy             | the model's definition (strategies.py)        | here                                          |
|----------------------|-----------------------------------------------|-----------------------------------------------|
| retry_same_placement | never moves; waits for its own placement      | never moves: chaos and catalog moves are not  |
|                      | (`same_wait_s`: a restart, or a lost placement| made; a run whose worker died is reserved     |
|                      | coming back); resumes from its transcript;    | again for its first placement only, once that |
|                      | re-sends the effect under the same key        | placement has a worker again (`outage_s`).    |
|                      |                                               | Differs: it resumes from Baton's checkpoint   |
|                      |                                               | and reconciles (Baton's protocol, not keyed)  |
| wait_same_pool       | Baton's handoff, checkpoint and protocol, but | every move goes through Baton's coordinator,  |
|                      | only onto the same resource pool, waiting for | restricted to the run's pool (placements of   |
|                      | it (`pool_wait_s`)                            | its first placement's provider and            |
|                      |                                               | accelerator: in this world, that placement    |
|                      |                                               | alone); held while the pool has no worker     |
| restart              | resumes from step 0 after every fault,        | moves as Baton does (any placement); each     |
|                      | anywhere (`any_wait_s`); no boundaries; re-   | adoption after the first rewinds the run:     |
|                      | sends the effect under the same key (the      | the new owner seals its first checkpoint's    |
|                      | target replays it); held evidence dropped;    | progress again as the newest checkpoint       |
|                      | no handoff events                             | (`rewind`), then resumes from it.            |
|                      |                                               | Differs: the fleet still seals at boundaries  |
|                      |                                               | (a move needs a sealed checkpoint) and moves  |
|                      |                                               | by Baton's handoff (fence, gate, reconcile);  |
|                      |                                               | the operation ledger and budget used are kept |
|                      |                                               | (a committed effect is replayed by its key,   |
|                      |                                               | as the model's keyed re-send; spend stays     |
|                      |                                               | spent); the observation log keeps the old     |
|                      |                                               | observations as history, the book starts empty|
| restart_last_step    | as restart, from the last deterministic step  | as restart, but the rewind goes back to the   |
|                      | (every `deterministic_every` steps)           | newest checkpoint of class R1 or R2 (else the |
|                      |                                               | first). In the deploy and research runs only  |
|                      |                                               | the first is R2: the same as restart there    |
| coarse_checkpoints   | Baton's protocol and handoff, but it resumes  | as restart, but the rewind goes back to the   |
|                      | from the last coarse checkpoint (every        | newest checkpoint at a phase's end (VERIFIED, |
|                      | `coarse_every` steps)                         | COMMITTED; else the first): the checkpoints a |
|                      |                                               | coarse design would have sealed. Differs: the |
|                      |                                               | fine seals are still written (their cost is   |
|                      |                                               | paid), only never resumed from                |
| human_assisted       | transcript resume; every fault waits          | Baton's machinery, but a human makes every    |
|                      | `human_delay_s` and costs `human_cost_usd`    | move, `human_delay_s` after being asked: a run|
|                      | (one intervention per fault); the human       | whose lease lapsed waits for one (one         |
|                      | checks an ambiguous effect                    | intervention per lease epoch); a planned move |
|                      |                                               | (chaos, catalog) is made when the human gets  |
|                      |                                               | to it (one intervention each, if the run is   |
|                      |                                               | still active). Differs: the checking of an    |
|                      |                                               | ambiguous effect is Baton's reconciler, inline|
|                      |                                               | (no human, no delay); the cost is reported as |
|                      |                                               | interventions (`SimOutcome.interventions`)    |

What a fault means for them: `restart` faces every fault exactly as Baton does and differs only in where it
resumes from. For the two that keep to their placement, a `handoff` fault whose reason kills the worker (a reclaimed GPU) takes its
placement out for `SimConfig.outage_s` for every strategy; Baton moves its runs elsewhere, these wait.
A `handoff` fault of another reason (a live, planned move: provider unhealthy, region capacity lost,
a better model, a rebalance) leaves the worker running: `retry_same_placement` ignores it (the run
carries on where it is), `wait_same_pool` moves the run within its pool (a fenced restart in place).
A `catalog_change` asks the fleet to move runs onto what changed: `retry_same_placement` makes no move,
`wait_same_pool` moves within its pool. Every other fault reaches them exactly as it reaches Baton.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from baton.checkpoints import restore
from baton.handoff.coordinator import HandoffRequest
from baton.lifecycle import TERMINAL
from baton.models import Boundary, ExecutionCheckpoint, ResumabilityClass
from baton.runtime.observation_book import ObservationBook
from baton.runtime.run_state import RunState
from baton.runtime.sealing import Sealer
from baton.runtime.services import RuntimeServices
from baton.sim.control_world import STRATEGIES as DESIGNS
from baton.sim.world import World

RETRY_SAME_PLACEMENT = "retry_same_placement"
WAIT_SAME_POOL = "wait_same_pool"
RESTART = "restart"
RESTART_LAST_STEP = "restart_last_step"
COARSE = "coarse_checkpoints"
HUMAN = "human_assisted"
BASELINES = (RETRY_SAME_PLACEMENT, WAIT_SAME_POOL, RESTART, RESTART_LAST_STEP, COARSE, HUMAN)
DETERMINISTIC = (ResumabilityClass.R1, ResumabilityClass.R2)
"""The resumability classes a restart from the last deterministic step can resume from: R2, deterministic state,
and R1, a restart from the previous durable boundary (no recorded observation or side effect to carry)."""
COARSE_BOUNDARIES = (Boundary.VERIFIED, Boundary.COMMITTED)
"""Where a coarse-checkpoint design seals: at the end of a phase (evidence gathered and the candidate verified; the
side effect committed), besides the run's first checkpoint."""
"""The experiment's baselines the simulation runs (ids as in `baton.experiment.strategies`)."""
SIM_STRATEGIES = (*DESIGNS, *BASELINES)
"""Every strategy `baton sim --strategy` runs: Baton, the transcript controls, the baselines."""


class BaselineWorld(World):
    """One seed's world where Baton's machinery recovers runs under a baseline's policy."""

    def __init__(self, config: Any, root: Path) -> None:
        if config.strategy not in BASELINES:
            raise ValueError(f"not a simulated baseline: {config.strategy!r}; baselines: {', '.join(BASELINES)}")
        if config.strategy == HUMAN:  # the simulation's cut-off, not a fault: leave room for every human's delay
            config = dataclasses.replace(config, max_time_s=config.max_time_s
                                         + config.human_delay_s * (len(config.plan.faults) + 1))
        super().__init__(config, root)
        self.home: dict[str, str] = {}
        """run -> the placement it was launched on."""
        self.interventions: dict[str, int] = {}
        """run -> human interventions it needed (`human_assisted`)."""
        self.asked: dict[tuple[str, int], float] = {}
        """(run, lease epoch) -> when a human was first asked to recover it at that epoch."""
        self.resolved: set[tuple[str, int]] = set()
        self.deferred: list[tuple[float, int, HandoffRequest]] = []
        """(due second, lease epoch when asked, move): planned moves a human makes once there."""

    def launch(self) -> None:
        super().launch()
        for run_id in self.run_ids:
            placement = self.store.get_run(run_id).placement
            assert placement is not None
            self.home[run_id] = placement

    def pool(self, run_id: str) -> tuple[str, ...]:
        """The run's resource pool: the placements of its first placement's provider and accelerator."""
        home = next(p for p in self.placements if p.name == self.home[run_id])
        return tuple(p.name for p in self.placements
                     if p.provider == home.provider and p.accelerator == home.accelerator)

    def adopted(self, services: RuntimeServices, lease: Any, owner: str) -> None:
        pick = REWIND_TO.get(self.config.strategy)
        rewound = None if pick is None else rewind(services, lease, owner, pick)
        if rewound is not None:
            self.sched.record(f"{self.config.strategy}: {lease.run_id} rewound to {rewound.boundary.value} "
                              f"(seq {rewound.seq}) at epoch {lease.epoch}")

    def _intervene(self, run_id: str) -> None:
        self.interventions[run_id] = self.interventions.get(run_id, 0) + 1
        self.sched.record(f"human_assisted: intervention {self.interventions[run_id]} on {run_id} "
                          f"(${self.config.human_cost_usd:g} each)")

    def _human(self, request: HandoffRequest, why: str) -> HandoffRequest | None:
        """A human makes every move, `human_delay_s` after being asked: a lapsed run waits for one (asked once per
        lease epoch); a planned move (chaos, catalog) is made when the human gets to it, unless the run moved or
        ended meanwhile."""
        now = self.sched.elapsed_s
        if why != "lapsed":
            self.deferred.append((now + self.config.human_delay_s, self._lease_epoch(request.run_id), request))
            self.sched.record(f"human_assisted: {request.run_id} {request.reason} waits for a human")
            return None
        key = (request.run_id, self._lease_epoch(request.run_id))
        asked = self.asked.setdefault(key, now)
        if now - asked < self.config.human_delay_s:
            return None
        if key not in self.resolved:
            self.resolved.add(key)
            self._intervene(request.run_id)
        return request

    def deferred_moves(self) -> list[HandoffRequest]:
        now = self.sched.elapsed_s
        due = [(epoch, request) for at, epoch, request in self.deferred if at <= now]
        self.deferred = [entry for entry in self.deferred if entry[0] > now]
        active = []
        for epoch, request in due:  # moved meanwhile (a human answered its lapsed lease) or ended: nothing to do
            if self.store.get_run(request.run_id).status == "active" and self._lease_epoch(request.run_id) == epoch:
                self._intervene(request.run_id)
                active.append(request)
        return active

    def recovery(self, request: HandoffRequest, why: str) -> HandoffRequest | None:
        if self.config.strategy == HUMAN:
            return self._human(request, why)
        if self.config.strategy in REWIND_TO:  # moves as Baton does, wherever the fleet has room
            return request
        if self.config.strategy == RETRY_SAME_PLACEMENT and why != "lapsed":
            self.sched.record(f"{self.config.strategy}: {request.run_id} stays ({why} {request.reason})")
            return None
        allowed = self.pool(request.run_id) if self.config.strategy == WAIT_SAME_POOL else (self.home[request.run_id],)
        if all(self.is_down(name) for name in allowed):
            self.sched.record(f"{self.config.strategy}: {request.run_id} waits for {', '.join(allowed)}")
            return None
        up = tuple(name for name in allowed if not self.is_down(name))
        return dataclasses.replace(
            request, preferred_targets=up, allow_same_placement=True,
            excluded_placements=tuple(p.name for p in self.placements if p.name not in up))


def coarse_point(checkpoints: list[ExecutionCheckpoint]) -> int:
    """The newest checkpoint a coarse-checkpoint design would have: one at a phase's end (`COARSE_BOUNDARIES`), else
    the first."""
    return max((i for i, c in enumerate(checkpoints) if c.boundary in COARSE_BOUNDARIES), default=0)


def deterministic_point(checkpoints: list[ExecutionCheckpoint]) -> int:
    """The newest checkpoint of class R1 or R2 (`DETERMINISTIC`), else the first. In the simulated deploy and
    research runs only the first checkpoint is R2 (every later one holds recorded observations, R3 or above), so
    this is `restart` there; it differs for runs with deterministic steps after the first."""
    return max((i for i, c in enumerate(checkpoints) if c.resumability in DETERMINISTIC), default=0)


REWIND_TO: dict[str, Callable[[list[ExecutionCheckpoint]], int]] = {
    RESTART: lambda _: 0, RESTART_LAST_STEP: deterministic_point, COARSE: coarse_point}
"""strategy -> which of a run's checkpoints its recovery resumes from (an index into the run's checkpoints)."""


def rewind(services: RuntimeServices, lease: Any, owner: str,
           pick: Callable[[list[ExecutionCheckpoint]], int]) -> ExecutionCheckpoint | None:
    """Resume from an earlier checkpoint, with Baton's own sealing: the owner of `lease` seals, as the run's newest
    checkpoint, the progress of the checkpoint `pick` chooses (boundary, state, candidates, evidence, workspace,
    search; an empty observation book) over what is not progress but fact or limit (the release, placement,
    constraints, authority, the operation ledger and the budget used, all as the latest checkpoint has them: a
    restart re-pays its work, it does not un-spend it or forget a side effect). None when there is nothing to
    discard (`pick` chose the latest) or the run already ended."""
    store, run_id = services.store, lease.run_id
    checkpoints = store.list_checkpoints(run_id)
    if not checkpoints or checkpoints[-1].boundary in TERMINAL:
        return None
    index = pick(checkpoints)
    if index >= len(checkpoints) - 1:
        return None
    back = restore(services.blobs, checkpoints[index]).parts
    latest = restore(services.blobs, checkpoints[-1]).parts
    parts = dataclasses.replace(
        latest, state=back.state.model_copy(update={"step": latest.state.step}), candidates=back.candidates,
        evidence=back.evidence, workspace=back.workspace, search=back.search)
    state = RunState(parts, checkpoints[index].boundary, ObservationBook(), checkpoints[-1])
    sealer = Sealer(services, run_id, lease.epoch, owner, f"{owner}/{run_id}/rewind", threading.Event())
    return sealer.seal(state)
