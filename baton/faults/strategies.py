"""The two resume strategies a scenario runs: Baton's protocol, and the naive transcript copy.

Both answer the same calls: start a run, move it (`handoff`) and damage the
latest persisted state (`lose_latest_state`, `alter_latest_state`), so one
scenario script drives either.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

from baton.faults.baton_worker import BatonWorker
from baton.faults.naive import NaiveWorker, transcript_path
from baton.faults.tasks import Task
from baton.faults.workers import ScenarioWorker
from baton.faults.world import World
from baton.handoff import HandoffRequest, acknowledge_quiesce, pending_handoff_request, wait_for_handoff_result
from baton.identity import hex_of
from baton.models import EventType


class Strategy(Protocol):
    name: str

    def start(self, world: World, task: Task, placement: str) -> ScenarioWorker: ...

    def handoff(self, world: World, task: Task, source: ScenarioWorker | None, *, reason: str, source_alive: bool,
                answers: bool = False, arm: tuple[str, ...] = ()) -> ScenarioWorker | None:
        """Move the run; None when the move aborted (the source keeps it). `arm` arms the new worker's kill points."""
        ...

    def lose_latest_state(self, world: World) -> str: ...

    def alter_latest_state(self, world: World) -> str: ...


class _QuiesceResponder(threading.Thread):
    """A live Baton source answering the coordinator: it stops at its boundary and says which checkpoint."""

    def __init__(self, world: World, source: BatonWorker) -> None:
        super().__init__(daemon=True)
        self.world, self.source = world, source
        self.verdict: EventType | None = None

    def run(self) -> None:  # noqa: D102 - thread body
        store, source = self.world.store, self.source
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            signal = pending_handoff_request(store, source.run_id)
            if signal is not None:
                checkpoint = source.parent
                acknowledge_quiesce(store, signal, checkpoint_id=None if checkpoint is None else checkpoint.checkpoint_id,
                                    epoch=source.epoch, placement=source.parts.placement.name, note="at a boundary")
                self.verdict = wait_for_handoff_result(store, source.run_id, signal.request_seq, timeout_s=10)
                return
            time.sleep(0.01)


class BatonStrategy:
    """Quiesce, seal, gate, fence, restore, reconcile, revalidate: the real protocol."""

    name = "baton"

    def start(self, world: World, task: Task, placement: str) -> ScenarioWorker:
        return BatonWorker.start(world, task, placement)

    def handoff(self, world: World, task: Task, source: ScenarioWorker | None, *, reason: str, source_alive: bool,
                answers: bool = False, arm: tuple[str, ...] = ()) -> ScenarioWorker | None:
        responder = None
        if answers and isinstance(source, BatonWorker) and not source.ended:
            responder = _QuiesceResponder(world, source)
            responder.start()
        coordinator = world.coordinator(quiesce_timeout_s=10.0 if responder else 0.3)
        outcome = coordinator.handoff(HandoffRequest(world.run_id, reason, source_alive=source_alive))
        if responder is not None:
            responder.join(15)
        if not outcome.committed:
            return None
        if responder is not None and isinstance(source, BatonWorker):
            source.stop_after_transfer()
        return BatonWorker.adopt(world, task, outcome, arm=arm)

    def lose_latest_state(self, world: World) -> str:
        latest = world.store.latest_checkpoint(world.run_id)
        assert latest is not None
        parent = world.store.get_checkpoint(latest.parent_checkpoint_id) if latest.parent_checkpoint_id else None
        shared = set() if parent is None else {parent.budget_ledger_ref, parent.task_state_ref,
                                               parent.operation_ledger_ref, parent.authority_context_ref}
        ref = next(r for r in (latest.budget_ledger_ref, latest.task_state_ref, latest.operation_ledger_ref,
                               latest.authority_context_ref) if r not in shared)
        digest = hex_of(ref)
        (world.blobs.root / digest[:2] / digest[2:]).unlink()
        return f"deleted blob {ref[:19]} of {latest.checkpoint_id}"

    def alter_latest_state(self, world: World) -> str:
        latest = world.store.latest_checkpoint(world.run_id)
        assert latest is not None
        from baton.checkpoints import restore

        candidate = restore(world.blobs, latest).parts.current_candidate
        assert candidate is not None
        digest = hex_of(candidate.artifact_hash)
        path = world.blobs.root / digest[:2] / digest[2:]
        data = bytearray(path.read_bytes())
        position = world.rng.randrange(len(data))
        data[position] = (data[position] + 1) % 256 or 1
        path.write_bytes(bytes(data))
        return f"altered byte {position} of candidate {candidate.artifact_hash[:19]}"


def naive_target(world: World, source: str) -> str:
    """Where a plain scheduler sends a run: the first other placement of the same region, else any other."""
    here = world.placement(source)
    others = sorted(name for name in world.placements if name != source)
    same_region = [name for name in others if world.placements[name].region == here.region]
    return (same_region or others)[0]


class NaiveStrategy:
    """Copy the transcript to a new worker and carry on from the current step."""

    name = "naive"

    def start(self, world: World, task: Task, placement: str) -> ScenarioWorker:
        return NaiveWorker.start(world, task, placement)

    def handoff(self, world: World, task: Task, source: ScenarioWorker | None, *, reason: str, source_alive: bool,
                answers: bool = False, arm: tuple[str, ...] = ()) -> ScenarioWorker | None:
        if answers and isinstance(source, NaiveWorker):
            source.stop_after_transfer()
        return NaiveWorker.resume(world, task, naive_target(world, world.naive_at), arm=arm)

    def lose_latest_state(self, world: World) -> str:
        transcript_path(world).unlink()
        return "deleted the transcript file"

    def alter_latest_state(self, world: World) -> str:
        path = transcript_path(world)
        text = path.read_text(encoding="utf-8")
        altered = text.replace("1.4.2", "1.4.9", 1) if "1.4.2" in text else text.replace("retries", "retires", 1)
        path.write_text(altered, encoding="utf-8")
        return "altered an observation inside the transcript file"


STRATEGIES: dict[str, Strategy] = {"baton": BatonStrategy(), "naive": NaiveStrategy()}
