"""A seeded scheduler: actors in threads, exactly one running at a time, on virtual time.

Every actor (a worker's main loop, its heartbeat, the coordinator, a delayed
network message) is a real thread running unchanged protocol code, but only
the one the scheduler resumed runs; it hands control back at its next yield
point (a store transaction, a message to a target, a sleep or a wait). The
scheduler then picks the next runnable actor with its seeded RNG and moves
virtual time on a little. So a seed fixes the whole interleaving, and the
trail of steps replays byte for byte.

An actor belongs to a *process* (a worker incarnation). Killing the process
(a crash fault) makes each of its actors raise `Crash` at its next yield
point; pausing it (a stall) keeps them all off the CPU while time passes;
skewing it shifts the wall-clock time its actors read.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import random
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from baton.clock import VirtualClock

START = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
STEP_MIN_S = 0.0005
STEP_MAX_S = 0.004
WAIT_POLL_S = 1.0


class Crash(BaseException):
    """The actor's process died at this point (raised at a yield point; nothing after it runs)."""


class SimulationStuck(RuntimeError):
    """The scheduler ran out of steps or virtual time before the world settled."""


@dataclass
class Process:
    """A simulated OS process: its actors live and die together."""

    name: str
    dead: bool = False
    paused_until: float = 0.0
    skew_s: float = 0.0


@dataclass(eq=False)
class Actor:
    name: str
    process: Process
    target: Callable[[], object]
    turn: threading.Lock = field(default_factory=lambda: _held_lock())
    """Held while the actor may not run; the scheduler releases it to resume the actor (a binary semaphore)."""
    wake_at: float = 0.0
    done: bool = False
    thread: threading.Thread | None = None
    error: BaseException | None = None


def _held_lock() -> threading.Lock:
    lock = threading.Lock()
    lock.acquire()
    return lock


class Scheduler(VirtualClock):
    """The virtual clock, the actors, and the step trail of one simulated run."""

    def __init__(self, seed: int, *, max_steps: int = 200_000, start: dt.datetime = START) -> None:
        super().__init__(start)
        self.seed = seed
        self.rng = random.Random(f"sched:{seed}")
        self.max_steps = max_steps
        self.steps = 0
        self.actors: list[Actor] = []
        self.processes: dict[str, Process] = {}
        self._by_thread: dict[int, Actor] = {}
        self._control = _held_lock()  # released by the running actor when it hands control back
        self._current: Actor | None = None
        self._trail = hashlib.sha256()
        self.trail_lines: list[str] | None = None
        self.errors: list[tuple[str, BaseException]] = []
        self._serving: set[int] = set()
        """Threads running a target's app for a request (on the sender's thread): they read the unskewed clock."""

    # -- processes and actors --------------------------------------------------------------------

    def process(self, name: str) -> Process:
        found = self.processes.get(name)
        if found is None:
            found = self.processes[name] = Process(name)
        return found

    def spawn(self, name: str, process: Process, target: Callable[[], object], *, delay_s: float = 0.0) -> Actor:
        """Register an actor; it first runs when the scheduler picks it (after `delay_s`)."""
        actor = Actor(name=name, process=process, target=target, wake_at=self.elapsed_s + delay_s)
        actor.thread = threading.Thread(target=self._body, args=(actor,), name=f"sim:{name}", daemon=True)
        self.actors.append(actor)
        self._by_thread[id(actor.thread)] = actor
        self.record(f"spawn {name} in {process.name}")
        actor.thread.start()
        return actor

    def _body(self, actor: Actor) -> None:
        actor.turn.acquire()
        try:
            if actor.process.dead:
                raise Crash(actor.process.name)
            actor.target()
        except Crash:
            pass
        except BaseException as exc:  # noqa: BLE001 - reported by the run, never swallowed silently
            actor.error = exc
            self.errors.append((actor.name, exc))
        finally:
            actor.done = True
            self._control.release()

    def kill(self, process: Process, why: str) -> None:
        """The process dies: every actor of it raises Crash at its next yield point."""
        if not process.dead:
            process.dead = True
            self.record(f"kill {process.name}: {why}")

    # -- the clock, as actors see it ---------------------------------------------------------------

    def actor(self) -> Actor | None:
        return self._by_thread.get(id(threading.current_thread()))

    def offset_s(self) -> float:
        if id(threading.current_thread()) in self._serving:
            return 0.0
        actor = self.actor()
        return actor.process.skew_s if actor is not None else 0.0

    @contextlib.contextmanager
    def serving(self) -> Iterator[None]:
        """A target serving a request on the sending actor's thread: it is another machine, and its clock does not
        carry the sender's skew (as the store's clock does not, `db_now`)."""
        ident = id(threading.current_thread())
        self._serving.add(ident)
        try:
            yield
        finally:
            self._serving.discard(ident)

    def yield_(self, label: str) -> None:
        """An actor's yield point: record it, give control back, resume when picked again."""
        actor = self.actor()
        if actor is None:  # setup or checking code on the driving thread: no interleaving
            return
        if actor.process.dead:
            raise Crash(actor.process.name)
        self.record(f"{actor.name} {label}")
        self._control.release()  # exactly one hand-back per resume: here, or at the end of `_body`
        actor.turn.acquire()
        if actor.process.dead:
            raise Crash(actor.process.name)

    def sleep(self, seconds: float) -> None:
        actor = self.actor()
        if actor is None:
            self.advance(max(0.0, seconds))
            return
        actor.wake_at = self.elapsed_s + max(0.0, seconds)
        self.yield_(f"sleep {seconds:.3f}")

    def wait(self, event: threading.Event, timeout_s: float) -> bool:
        deadline = self.elapsed_s + max(0.0, timeout_s)
        while not event.is_set():
            if self.elapsed_s >= deadline:
                return False
            self.sleep(min(WAIT_POLL_S, deadline - self.elapsed_s))
        return True

    def start_thread(self, target: Callable[[], object], name: str) -> None:
        parent = self.actor()
        process = parent.process if parent is not None else self.process("main")
        self.spawn(name, process, target)

    # -- driving ---------------------------------------------------------------------------------

    def record(self, line: str) -> None:
        text = f"{self.elapsed_s:.6f} {line}"
        self._trail.update(text.encode() + b"\n")
        if self.trail_lines is not None:
            self.trail_lines.append(text)

    @property
    def trail_hash(self) -> str:
        return "sha256:" + self._trail.hexdigest()

    def runnable(self) -> list[Actor]:
        now = self.elapsed_s
        return [a for a in self.actors if not a.done and a.wake_at <= now and a.process.paused_until <= now]

    def run(self, until: Callable[[], bool], *, max_time_s: float) -> bool:
        """Step actors until `until()` holds (True) or time/steps run out, or nobody is left (False)."""
        while True:
            if until():
                return True
            if self.steps >= self.max_steps or self.elapsed_s >= max_time_s:
                return False
            ready = self.runnable()
            if not ready:
                waiting = [max(a.wake_at, a.process.paused_until) for a in self.actors if not a.done]
                if not waiting:
                    return until()
                self.advance(max(0.0, min(waiting) - self.elapsed_s))
                continue
            actor = ready[self.rng.randrange(len(ready))]
            self.advance(self.rng.uniform(STEP_MIN_S, STEP_MAX_S))
            self.steps += 1
            self._resume(actor)

    def _resume(self, actor: Actor) -> None:
        self._current = actor
        actor.turn.release()
        self._control.acquire()
        self._current = None

    def shutdown(self) -> None:
        """Kill every process and let each actor unwind (they raise Crash at their next yield)."""
        for process in self.processes.values():
            process.dead = True
        for actor in self.actors:
            guard = 0
            while not actor.done and guard < 10_000:
                guard += 1
                actor.wake_at = 0.0
                self._resume(actor)
        for actor in self.actors:
            if actor.thread is not None:
                actor.thread.join(timeout=5)
