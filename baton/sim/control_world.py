"""The transcript-only controls in the simulated world: the same seed's workload, fault schedule and oracles as Baton.

The control logic is `baton.faults.transcript_agent.TranscriptAgent`, the very class
the live fault matrix starts as a process (`python -m baton.faults.transcript_agent`);
here it runs in process on the scheduler's virtual clock, with its transcript kept by
the world (`SimTranscript`) and its deploy and corpus clients on the simulated network
(`SimServices`). Nothing of Baton's store, leases, gateway or coordinator takes part:
the control's scheduler is the plain one a transcript design has, a job queue with a
visibility timeout (a job not heard from for `lease_ttl_s` is given to another
worker, whether its worker died or only went quiet) and worker supervisors that
restart a dead worker.

The same runs are launched (ids, kinds, tasks and placements drawn from the seed as
`World.launch` draws them), the same targets' apps keep their own records, and the
same oracles (`baton.sim.oracles`) judge the outcome from those records, the network's
log, the corpus's document history and what the control itself stored (its transcript,
every version of it: the counterpart of Baton's blobs).

How each fault kind of `baton.sim.faults` reaches a control:

| kind            | Baton: trigger                     | control: trigger and effect                                      |
|-----------------|------------------------------------|------------------------------------------------------------------|
| crash           | n-th store write by a worker       | n-th durable write by a worker (transcript write, job claim or   |
|                 |                                    | job heartbeat): the process dies before it or right after it     |
| stall           | n-th store write by a worker       | n-th durable write: the process is frozen; past the visibility   |
|                 |                                    | timeout its job goes to another worker (the old one resumes)     |
| skew            | n-th worker process started        | the same (the process reads a shifted clock)                     |
| handoff         | n-th store write by a worker       | n-th durable write: the scheduler moves every active job to      |
|                 |                                    | the other placement; a reason that kills the worker kills it, any|
|                 |                                    | other drains it first (stop between steps, at most 3 s); a better|
|                 |                                    | model released switches the job to model-v8                      |
| doc_change      | n-th store write by a worker       | n-th durable write: the corpus document changes                  |
| drop_request, drop_response, duplicate, delay | n-th message to a target | the same, on the control's messages   |
| catalog_change  | n-th store write by a worker       | none: a control has no catalog to change (never fires)           |
| any write fault named on a seal (`on: sealed:<kind>:<BOUNDARY>`) | n-th checkpoint of that boundary | n-th     |
|                 | sealed by a run of that kind       | transcript write that moves such a run to that step: the same    |
|                 |                                    | point of the run (the live `sealed:<BOUNDARY>` fault point)      |
| any write fault naming a store call (`on`) | n-th write of that call | none: a control makes no such call (never fires)  |

So the lease and epoch faults of the store (a write fault `on` a claim or a lease
call) and the catalog cases of sec. 27 have no counterpart in a transcript design.
A worker's durable writes are counted as Baton's store writes are (Baton's count
includes its lease claims and renewals; a control's, its job claims and heartbeats
on the queue, every `poll_s`); a control still writes less often, so somewhat
fewer of a schedule's write faults fire for it: the outcome lists what fired.

A stalled worker is not told it lost its job: when it wakes it carries on from the
transcript it holds in memory, writes it back (last writer wins) and sends what it
was about to send. With `SimConfig.await_stalled` the world waits for it to do so
(for Baton's worlds too); by default a world ends once every run ended.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from baton.chaos import ChaosReason
from baton.faults.transcript_agent import TERMINAL, TranscriptAgent, new_transcript, parse, seal
from baton.identity import sha256_ref
from baton.models import AuthorityLevel, Placement, RunKind
from baton.sim.faults import Fault
from baton.sim.scheduler import Crash, Process
from baton.sim.world import World
from baton.targets.corpus_service import CorpusClient
from baton.targets.deploy_service import DeployClient

CONTROLS = ("naive", "competent")
STRATEGIES = ("baton", *CONTROLS)
CONTROL_KINDS = (RunKind.DEPLOY, RunKind.RESEARCH)
"""The run kinds a control runs in the simulation (its coding and browser steps need the live tools)."""
TRANSCRIPT_CALL = "save_transcript"
TAKE_CALL = "take_job"
HEARTBEAT_CALL = "heartbeat_job"
"""The calls a control worker's durable writes count as: its transcript, and its claim and heartbeat on the job
queue (a write fault `on` one of Baton's store calls never fires for a control)."""
QUIESCE_S = 3.0
RELEASE = "model-v7"
BETTER_RELEASE = "model-v8"


class SimServices:
    """The deploy and corpus clients of one control worker process, on the simulated network."""

    def __init__(self, world: ControlWorld, process: Process) -> None:
        self.world, self.process = world, process

    def deploy(self, timeout_s: float | None = None) -> DeployClient:
        return DeployClient("http://deploy.sim", timeout_s=timeout_s or self.world.config.target_timeout_s,
                            transport=self.world.network.transport("deploy", self.process))

    def corpus(self, timeout_s: float | None = None) -> CorpusClient:
        return CorpusClient("http://corpus.sim", timeout_s=timeout_s or self.world.config.target_timeout_s,
                            transport=self.world.network.transport("corpus", self.process))


class SimTranscript:
    """One run's transcript as the world keeps it: every version written, the newest current."""

    def __init__(self, world: ControlWorld, run_id: str) -> None:
        self.world, self.run_id = world, run_id
        self.root = world.root / "transcripts" / run_id

    def raw(self) -> dict[str, Any]:
        return dict(json.loads(self.world.transcripts[self.run_id][-1]))

    def load(self, mode: str) -> dict[str, Any]:
        self.world.sched.yield_(f"r transcript {self.run_id}")
        return parse(self.world.transcripts[self.run_id][-1], mode, self.run_id)

    def save(self, body: dict[str, Any], mode: str) -> None:
        self.world.write_transcript(self.run_id, seal(body, mode))


class ControlWorld(World):
    """One seed's world run by a transcript-only control (`naive` or `competent`) instead of Baton."""

    GUARDED = False

    def __init__(self, config: Any, root: Path) -> None:
        if config.strategy not in CONTROLS:
            raise ValueError(f"not a control strategy: {config.strategy!r}; controls: {', '.join(CONTROLS)}")
        unsupported = [k.value for k in config.kinds if k not in CONTROL_KINDS]
        if unsupported:
            raise ValueError(f"the controls run {', '.join(k.value for k in CONTROL_KINDS)} runs in the simulation, "
                             f"not {', '.join(unsupported)}")
        super().__init__(config, root)
        self.mode: str = config.strategy
        self.transcripts: dict[str, list[str]] = {}
        self.assigned: dict[str, str] = {}
        self.release: dict[str, str] = {}
        self.holder: dict[str, Process | None] = {}
        self.seen: dict[str, float] = {}
        self.draining: dict[str, Process] = {}
        self.skipped: list[Fault] = []
        """Scheduled faults that have no counterpart in a transcript design (they never fire here)."""

    # -- the control's only durable state -----------------------------------------------------------------

    def write_transcript(self, run_id: str, text: str) -> None:
        """A worker writes a transcript: the write faults of the schedule strike here (see the module's table)."""
        crash_after = self._worker_write(TRANSCRIPT_CALL, run_id)
        before = self.transcripts[run_id][-1]
        self.transcripts[run_id].append(text)
        self._writes_seen += 1
        if self._seal_faults:
            crash_after |= self._seal_written(run_id, before, text)
        self._crash_after(crash_after, "a transcript write")

    def _seal_written(self, run_id: str, before: str, text: str) -> bool:
        """A worker's transcript write that moves the run to a new step seals that step: fire the faults named on it."""
        step = str(json.loads(text).get("step"))
        actor = self.sched.actor()
        if step == str(json.loads(before).get("step")) or actor is None or not actor.process.name.startswith("w:"):
            return False
        crash_after = False
        for fault in self.seal_faults(run_id, step):
            crash_after |= self._fire(fault, actor.process)
        return crash_after

    def _worker_write(self, call: str, run_id: str) -> bool:
        """One durable write by a worker (its transcript, or its claim or heartbeat on the job queue): count it, fire
        the schedule's write faults of that count, yield. True when the process is to die right after the write."""
        actor = self.sched.actor()
        crash_after = False
        if actor is not None and actor.process.name.startswith("w:"):
            self.writes += 1
            self.writes_of[call] = self.writes_of.get(call, 0) + 1
            for fault in self.plan.write_faults(self.writes, call, self.writes_of[call]):
                crash_after |= self._fire(fault, actor.process)
        self.sched.yield_(f"w {call} {run_id}")
        return crash_after

    def _crash_after(self, crash: bool, what: str) -> None:
        actor = self.sched.actor()
        if crash and actor is not None:
            self.sched.kill(actor.process, f"crash after {what}")
            raise Crash(actor.process.name)

    def _fire(self, fault: Fault, process: Process) -> bool:
        """Fire a write fault; True when the process is to die right after the write."""
        if fault.kind in ("catalog_change", "replan"):
            self.skipped.append(fault)
            self.sched.record(f"fault {fault.describe()} has no counterpart in a transcript design")
            return False
        self.fired.append(fault)
        self.sched.record(f"fault {fault.describe()} on {process.name}")
        if fault.kind == "crash" and fault.arg == "before":
            self.sched.kill(process, "crash before a transcript write")
            raise Crash(process.name)
        if fault.kind == "crash":
            return True
        self.apply_common_fault(fault, process)
        return False

    def ended(self, run_id: str) -> bool:
        return str(json.loads(self.transcripts[run_id][-1]).get("status")) in TERMINAL

    def settled(self) -> bool:
        if not self._settled and self._settled_checked != self._writes_seen:
            self._settled_checked = self._writes_seen
            self._settled = bool(self.run_ids) and all(self.ended(r) for r in self.run_ids)
        return self._settled

    # -- launching: the runs `World.launch` would launch -----------------------------------------------------

    def launch(self) -> None:
        # no gate, no policy to set; no Baton bundle to import (`legacy_import`)
        self.skipped.extend(f for f in self.plan.faults if f.kind in ("owner_rule", "legacy_import"))
        for run_id, kind, placement, task_input in self.workload():
            task = {"kind": kind.value, **task_input}
            self.transcripts[run_id] = [seal(new_transcript(run_id, task, {"model_calls": None}, self.mode), self.mode)]
            self.assigned[run_id] = placement.name
            self.release[run_id] = RELEASE
            self.holder[run_id] = None
            self.run_ids.append(run_id)
            self.kind_of[run_id] = kind.value
            self.launch_authority[run_id] = (AuthorityLevel.EXTERNAL_MUTATE if kind is RunKind.DEPLOY
                                             else AuthorityLevel.SANDBOX_MUTATE)

    # -- actors ------------------------------------------------------------------------------------------------

    def work(self, placement: Placement, process: Process, worker_id: str) -> None:
        """A control worker process: take the jobs queued for its placement, run each from its transcript."""
        services = SimServices(self, process)
        while not self.settled():
            for run_id in self.run_ids:
                if self.assigned[run_id] != placement.name or self.holder[run_id] is not None or self.ended(run_id):
                    continue
                crash_after = self._worker_write(TAKE_CALL, run_id)
                if self.holder[run_id] is not None or self.ended(run_id):  # taken meanwhile (the queue's own check)
                    continue
                self.holder[run_id], self.seen[run_id] = process, self.sched.elapsed_s
                self._crash_after(crash_after, "taking a job")
                self.sched.spawn(f"heartbeat {worker_id} {run_id}", process,
                                 lambda r=run_id: self._heartbeat(r, process))
                self.sched.record(f"{worker_id} takes {run_id} ({self.release[run_id]})")
                agent = TranscriptAgent(SimTranscript(self, run_id), self.mode, self.release[run_id], self.root,
                                        services=services, stop=lambda r=run_id: self.draining.get(r) is process)
                try:
                    agent.run()
                except Exception as exc:  # noqa: BLE001 - the live control process would die of it: so does this one
                    self.sched.record(f"{worker_id} {run_id} died: {type(exc).__name__}")
                    self.sched.kill(process, f"unhandled {type(exc).__name__}")
                    raise Crash(process.name) from exc
                self.sched.record(f"{worker_id} {run_id}: {agent.body['status']} ({agent.body.get('detail', '')})")
                if self.holder[run_id] is process:
                    self.holder[run_id] = None
            self.sched.sleep(self.config.poll_s)

    def _heartbeat(self, run_id: str, process: Process) -> None:
        while self.holder[run_id] is process and not self.ended(run_id):
            crash_after = self._worker_write(HEARTBEAT_CALL, run_id)
            if self.holder[run_id] is process:
                self.seen[run_id] = self.sched.elapsed_s
            self._crash_after(crash_after, "a heartbeat")
            self.sched.sleep(self.config.poll_s)

    def coordinate(self) -> None:
        """The control's scheduler: visibility timeouts, the moves chaos asks for, the corpus changes."""
        corpus = SimServices(self, self.sched.process("coordinator")).corpus()
        while not self.settled():
            for fault in self._take(self.handoff_queue):
                self._move(ChaosReason(fault.arg))
            self.change_documents(corpus)
            for run_id in self.run_ids:
                holder = self.holder[run_id]
                if holder is None or self.ended(run_id):
                    continue
                if self.sched.elapsed_s - self.seen.get(run_id, 0.0) > self.config.lease_ttl_s:
                    self.sched.record(f"visibility timeout {run_id}: {holder.name} silent")
                    self._requeue(run_id)
            self.sched.sleep(self.config.poll_s)

    def _other(self, name: str) -> str:
        names = [p.name for p in self.placements]
        return names[(names.index(name) + 1) % len(names)]

    def _requeue(self, run_id: str) -> None:
        self.holder[run_id] = None
        self.assigned[run_id] = self._other(self.assigned[run_id])

    def _move(self, reason: ChaosReason) -> None:
        for run_id in self.run_ids:
            if self.ended(run_id):
                continue
            source = self.assigned[run_id]
            if reason is ChaosReason.BETTER_MODEL_RELEASED:
                self.release[run_id] = BETTER_RELEASE
            holder = self.holder[run_id]
            if reason.kills_worker:
                for process in self.sched.processes.values():
                    if process.name.startswith(f"w:{source}#"):
                        self.sched.kill(process, f"chaos {reason.value}")
                self.take_out(source)
            elif holder is not None and not holder.dead:
                self.draining[run_id] = holder
                waited = 0.0
                while self.holder[run_id] is holder and not holder.dead and waited < QUIESCE_S:
                    self.sched.sleep(0.5)
                    waited += 0.5
                self.draining.pop(run_id, None)
            self.sched.record(f"move {run_id} {reason.value}: {source} -> {self._other(source)}")
            self._requeue(run_id)

    # -- what the oracles read ---------------------------------------------------------------------------------

    def statuses(self) -> dict[str, str]:
        return {run_id: str(json.loads(self.transcripts[run_id][-1]).get("status")) for run_id in sorted(self.run_ids)}

    def steps_reached(self) -> dict[str, str]:
        return {run_id: str(json.loads(self.transcripts[run_id][-1]).get("step")) for run_id in sorted(self.run_ids)}

    def documents(self) -> tuple[bytes, ...]:
        """What the control stored, as the oracles read Baton's blobs: each candidate's bytes, each observation, and
        each verifier verdict bound to the candidate the transcript held when it was given (every version written)."""
        found: dict[bytes, None] = {}
        for versions in self.transcripts.values():
            for text in versions:
                found.setdefault(text.encode("utf-8"), None)  # the whole transcript (a credential in it shows)
                for doc in _stored(json.loads(text)):
                    found.setdefault(doc, None)
        return tuple(found)

    def records(self, settled: bool) -> Any:
        records = super().records(settled)
        records.reported = self.statuses()
        records.documents = self.documents()
        records.reported_budget = {}
        for run_id in self.run_ids:
            reported = json.loads(self.transcripts[run_id][-1]).get("reported")
            if isinstance(reported, dict):
                records.reported_budget[run_id] = float(reported.get("model_calls") or 0)
        return records


def _stored(body: dict[str, Any]) -> Iterator[bytes]:
    candidate: bytes | None = None
    for message in body.get("messages", []):
        content = message.get("content")
        if not isinstance(content, dict):
            continue
        if message.get("role") == "assistant" and "candidate" in content:
            candidate = str(content["candidate"]).encode("utf-8")
            yield candidate
        for document in content.get("documents", []) if isinstance(content.get("documents"), list) else []:
            if isinstance(document, dict) and isinstance(document.get("observation"), dict):
                yield json.dumps(document["observation"], sort_keys=True).encode("utf-8")
        if message.get("role") == "verifier" and candidate is not None:
            yield json.dumps({"candidate_hash": sha256_ref(candidate), "verifier_version": "transcript",
                              "result": content.get("result")}, sort_keys=True).encode("utf-8")
