"""What Baton's worker and the naive control's worker share: stepping, kill points, waking up.

A scenario drives a worker one semantic step at a time. It can arm a kill
point: when the worker reaches it, `on_kill` runs. In-process that raises
`WorkerKilled` and the worker object is simply never used again (its lease,
if any, stays held, exactly like a dead process); in a worker subprocess the
hook reports readiness and blocks until the scenario SIGKILLs it.
"""

from __future__ import annotations

from collections.abc import Callable

from baton.models import Boundary

KILL_POINTS = ("before_seal", "after_seal", "after_send", "after_adopt")
PAUSE_POINTS = ("before_send",)
"""before_seal: work done and paid for, nothing sealed; after_seal: sealed, lease still held;
after_send: a mutation was sent and its answer seen (or lost); after_adopt: a new owner restored the run.
A pause point freezes the worker instead: before_send holds a fully authorized request unsent."""

MAX_STEPS = 40


class WorkerKilled(Exception):
    """The scenario killed this worker at a named point."""


def _raise(point: str) -> None:
    raise WorkerKilled(point)


class ScenarioWorker:
    """Stepping and kill points; subclasses implement `step` and keep `boundary`, `ended`, `run_id`, `name`."""

    run_id: str
    name: str
    boundary: Boundary
    ended: bool

    def __init__(self) -> None:
        self.kill_points: set[str] = set()
        self.pause_points: set[str] = set()
        self.on_kill: Callable[[str], None] = _raise
        self.paused = False

    def arm(self, point: str) -> None:
        """Die the next time `point` is reached."""
        if point not in KILL_POINTS:
            raise ValueError(f"unknown kill point {point!r}; known: {KILL_POINTS}")
        self.kill_points.add(point)

    def arm_pause(self, point: str) -> None:
        """Freeze the next time `point` is reached, until `wake`."""
        if point not in PAUSE_POINTS:
            raise ValueError(f"unknown pause point {point!r}; known: {PAUSE_POINTS}")
        self.pause_points.add(point)

    def _hold(self, point: str) -> bool:
        """True (and paused) when the scenario froze the worker at `point`."""
        if point in self.pause_points:
            self.pause_points.discard(point)
            self.paused = True
        return self.paused

    def _die(self, point: str) -> None:
        if point in self.kill_points:
            self.kill_points.discard(point)
            self.ended = True
            self.on_kill(point)

    def step(self) -> None:
        raise NotImplementedError

    def run_to(self, boundary: Boundary) -> None:
        """Step until the run has sealed `boundary` (or ended, or the worker was stopped)."""
        for _ in range(MAX_STEPS):
            if self.ended or self.paused or self.boundary is boundary:
                return
            self.step()
        raise RuntimeError(f"{self.name}: {self.run_id} did not reach {boundary.value} in {MAX_STEPS} steps")

    def finish(self) -> None:
        """Step until the run ends here (or the worker is stopped)."""
        for _ in range(MAX_STEPS):
            if self.ended or self.paused:
                return
            self.step()
        raise RuntimeError(f"{self.name}: {self.run_id} did not end in {MAX_STEPS} steps")

    def pause(self) -> None:
        """Freeze (a GC pause, a SIGSTOP): the worker takes no step until `wake`."""
        self.paused = True

    def wake(self) -> None:
        """Unfreeze and take one step, as a worker that does not know it was replaced would."""
        self.paused = False
        if not self.ended:
            self.step()
