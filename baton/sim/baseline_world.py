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

What a fault means for them: a `handoff` fault whose reason kills the worker (a reclaimed GPU) takes its
placement out for `SimConfig.outage_s` for every strategy; Baton moves its runs elsewhere, these wait.
A `handoff` fault of another reason (a live, planned move: provider unhealthy, region capacity lost,
a better model, a rebalance) leaves the worker running: `retry_same_placement` ignores it (the run
carries on where it is), `wait_same_pool` moves the run within its pool (a fenced restart in place).
A `catalog_change` asks the fleet to move runs onto what changed: `retry_same_placement` makes no move,
`wait_same_pool` moves within its pool. Every other fault reaches them exactly as it reaches Baton.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from baton.handoff.coordinator import HandoffRequest
from baton.sim.control_world import STRATEGIES as DESIGNS
from baton.sim.world import World

RETRY_SAME_PLACEMENT = "retry_same_placement"
WAIT_SAME_POOL = "wait_same_pool"
BASELINES = (RETRY_SAME_PLACEMENT, WAIT_SAME_POOL)
"""The experiment's baselines the simulation runs (ids as in `baton.experiment.strategies`)."""
SIM_STRATEGIES = (*DESIGNS, *BASELINES)
"""Every strategy `baton sim --strategy` runs: Baton, the transcript controls, the baselines."""
NOT_YET = ("restart", "restart_last_step", "coarse_checkpoints", "human_assisted")
"""The experiment's baselines the simulation does not run yet (the model only)."""


class BaselineWorld(World):
    """One seed's world where Baton's machinery recovers runs under a baseline's policy."""

    def __init__(self, config: Any, root: Path) -> None:
        if config.strategy not in BASELINES:
            raise ValueError(f"not a simulated baseline: {config.strategy!r}; baselines: {', '.join(BASELINES)}")
        super().__init__(config, root)
        self.home: dict[str, str] = {}
        """run -> the placement it was launched on."""

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

    def recovery(self, request: HandoffRequest, why: str) -> HandoffRequest | None:
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
