"""What a case script is handed: its world, the strategy under test, and a few verbs.

`start_killed` runs the source worker in a real child process (same world
directory, same seed) and SIGKILLs it at a kill point, so "the worker died"
means a process that vanished mid-flight, holding its lease.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

from baton.faults.strategies import Strategy
from baton.faults.tasks import Task
from baton.faults.workers import ScenarioWorker, WorkerKilled
from baton.faults.world import World
from baton.models import Boundary

CHILD_TIMEOUT_S = 60.0


@dataclass
class Scenario:
    """One case run against one strategy."""

    world: World
    strategy: Strategy
    task: Task
    case_id: str
    notes: list[str] = field(default_factory=list)

    def start(self) -> ScenarioWorker:
        return self.strategy.start(self.world, self.task, self.world.config.source)

    def run_until_killed(self, worker: ScenarioWorker, boundary: Boundary) -> None:
        """Drive `worker` until an armed kill point fires (in process)."""
        try:
            worker.run_to(boundary)
            worker.step()
        except WorkerKilled as killed:
            self.notes.append(f"{worker.name} killed at {killed.args[0]}")
            return
        raise RuntimeError(f"{worker.name} reached no armed kill point")

    def start_killed(self, *, until: Boundary, kill: str) -> None:
        """Run the source in a child process until `kill` (after reaching `until`), then SIGKILL it."""
        command = [sys.executable, "-m", "baton.faults.killable", "--root", str(self.world.root),
                   "--case", self.case_id, "--seed", str(self.world.config.seed), "--strategy", self.strategy.name,
                   "--until", until.value, "--kill", kill]
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 env={**os.environ, "PYTHONUNBUFFERED": "1"})
        assert child.stdout is not None
        ready, _, _ = select.select([child.stdout], [], [], CHILD_TIMEOUT_S)
        line = child.stdout.readline() if ready else ""
        if not line.startswith("READY"):
            child.kill()
            _, err = child.communicate(timeout=10)
            raise RuntimeError(f"worker process did not reach {kill}: {line!r} {err[-2000:]}")
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
        self.notes.append(f"worker process {child.pid} SIGKILLed at {json.loads(line[5:])['point']} "
                          f"(exit {child.returncode})")

    def handoff(self, source: ScenarioWorker | None, reason: str, *, alive: bool,
                answers: bool = False) -> ScenarioWorker | None:
        moved = self.strategy.handoff(self.world, self.task, source, reason=reason, source_alive=alive,
                                      answers=answers)
        self.notes.append(f"handoff ({reason}): " + ("aborted, the source keeps the run" if moved is None
                                                      else f"moved to {moved.name}"))
        return moved

    def handoff_to_doomed(self, source: ScenarioWorker | None, reason: str, *, kill: str, alive: bool,
                          answers: bool = False) -> None:
        """A move whose new owner dies at `kill` right after taking the run."""
        try:
            self.strategy.handoff(self.world, self.task, source, reason=reason, source_alive=alive, answers=answers,
                                  arm=(kill,))
        except WorkerKilled as killed:
            self.notes.append(f"handoff ({reason}): the new owner died at {killed.args[0]}")
            return
        raise RuntimeError("the new owner reached no armed kill point")

    def wait(self, seconds: float) -> None:
        time.sleep(seconds)
