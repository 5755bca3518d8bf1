"""The negative control: resume by copying the transcript, the way a toy chatbot would.

Its checkpoint is `{"messages": [...], "current_step": n}` in a JSON file,
rewritten after every step. A resumed worker reads it and carries on from
`current_step`, with none of Baton's protections:

* no fencing: it never takes a lease, and sends every request with epoch 0;
* no idempotency: each attempt carries a fresh key;
* no reconciliation: a lost answer is simply forgotten;
* no evidence binding: "the verifier said PASS" is a message, and the artifact
  it acts on is whatever its model re-emits from the transcript (artifacts are
  worker-local scratch, not content-addressed state);
* a fresh budget on every worker;
* authority, approvals and session cookies copied from the messages.

It runs against the same world, targets and checks as Baton's worker, so any
violation it shows is one the checks can see.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

from baton.errors import TargetRejectedError, TargetUnavailableError
from baton.faults.external import Session, utcnow
from baton.faults.facts import MutationAttempted, Outcome, Status, ObservationUsed, Resumed, RunEnded, RunStarted
from baton.faults.tasks import Inputs, Task
from baton.faults.workers import ScenarioWorker
from baton.faults.world import SessionTarget, World
from baton.fencing import FencingToken
from baton.gateway import MutationTarget
from baton.history import Recorder
from baton.identity import sha256_ref
from baton.models import (
    AuthorityLevel,
    Boundary,
    BudgetLedger,
    BudgetUsage,
    Observation,
    VerdictResult,
    VerifierEvidence,
)

STEPS = ("observe", "generate", "verify", "approve", "commit", "postcondition")
_BOUNDARY_AFTER = (Boundary.GENERATING, Boundary.CANDIDATE_READY, Boundary.VERIFIED, Boundary.AUTHORIZED,
                   Boundary.COMMITTED, Boundary.POSTCONDITION_VERIFIED)


def transcript_path(world: World) -> Path:
    return world.root / "naive" / "transcript.json"


def _iso(value: dt.datetime) -> str:
    return value.isoformat()


class NaiveWorker(ScenarioWorker):
    """One worker of the transcript-only strategy."""

    strategy = "naive"

    def __init__(self, world: World, task: Task, *, name: str, placement: str, transcript: dict[str, Any],
                 limits_from: dt.datetime) -> None:
        super().__init__()
        self.world, self.task, self.name, self.placement = world, task, name, placement
        self.run_id = world.run_id
        self.transcript = transcript
        self.budget = BudgetLedger(limits=world.limits(limits_from))
        self.scratch: bytes | None = None
        self._held: bytes | None = None
        self.ended = False

    # -- state ----------------------------------------------------------------------------------

    @property
    def step_index(self) -> int:
        return int(self.transcript.get("current_step", 0))

    @property
    def boundary(self) -> Boundary:  # type: ignore[override]
        return Boundary.GENERATING if self.step_index == 0 else _BOUNDARY_AFTER[self.step_index - 1]

    def _messages(self, name: str) -> list[dict[str, Any]]:
        return [m for m in self.transcript["messages"] if m.get("name") == name]

    def _save(self) -> None:
        path = transcript_path(self.world)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.transcript, indent=1, sort_keys=True), encoding="utf-8")

    def _advance(self, *messages: dict[str, Any]) -> None:
        self.transcript["messages"].extend(messages)
        self.transcript["current_step"] = self.step_index + 1
        self._save()
        self._die("after_seal")

    def _charge(self, usage: BudgetUsage, what: str) -> None:
        self.budget = self.budget.charge(usage)
        self.world.meter.bill(self.run_id, self.name, usage, what)

    # -- starting and resuming ------------------------------------------------------------------

    @classmethod
    def start(cls, world: World, task: Task, placement: str) -> NaiveWorker:
        now = world.now()
        transcript = {"messages": [{"role": "system", "name": "task", "content": f"{task.name} run",
                                    "authority": world.config.authority.value}], "current_step": 0}
        worker = cls(world, task, name=world.worker_name(placement), placement=placement, transcript=transcript,
                     limits_from=now)
        world.naive_at = placement
        world.facts.add(RunStarted(run_id=world.run_id, at=now, strategy=cls.strategy,
                                   authority_level=world.config.authority.value, limits=worker.budget.limits))
        worker.step()
        return worker

    @classmethod
    def resume(cls, world: World, task: Task, placement: str, *, arm: tuple[str, ...] = ()) -> NaiveWorker:
        """Load the transcript (or start over when it is gone) on a fresh worker with a fresh budget."""
        path = transcript_path(world)
        try:
            transcript = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            transcript = {"messages": [{"role": "system", "name": "task", "content": f"{task.name} run",
                                        "authority": world.config.authority.value}], "current_step": 0}
        now = world.now()
        worker = cls(world, task, name=world.worker_name(placement), placement=placement, transcript=transcript,
                     limits_from=now)
        copied = worker._authority()
        world.facts.add(Resumed(run_id=world.run_id, at=now, worker=worker.name, placement=placement,
                                budget_used=worker.budget.used, limits=worker.budget.limits,
                                authority_level=copied.value, checkpoint_level=copied.value,
                                ceiling=world.placement(placement).authority_ceiling.value))
        world.naive_at = placement
        for point in arm:
            worker.arm(point)
        worker._die("after_adopt")
        if worker.step_index == 0:
            worker.step()
        return worker

    def _authority(self) -> AuthorityLevel:
        system = self._messages("task")
        return AuthorityLevel(system[0]["authority"]) if system else self.world.config.authority

    # -- stepping -------------------------------------------------------------------------------

    def step(self) -> None:
        if self.ended or self.paused:
            return
        if self._held is not None:
            self._send()
            return
        if self.step_index >= len(STEPS):
            self.ended = True
            return
        getattr(self, "_" + STEPS[self.step_index])()

    def _observe(self) -> None:
        world, now = self.world, self.world.now()
        messages = []
        for uri, query in self.task.questions:
            content = world.external.read(uri)
            self._charge(BudgetUsage(tool_calls=1), f"observe {uri}")
            messages.append({"role": "tool", "name": "observe", "source": uri, "query": query,
                             "observed_at": _iso(now), "content": content.decode("utf-8")})
        if self.task.browser is not None:
            session = world.external.webapp.login()
            messages.append({"role": "tool", "name": "session", "cookie": session.token, "csrf": session.csrf,
                             "expires_at": _iso(session.expires_at)})
        self._advance(*messages)

    def _inputs(self, step: str) -> Inputs:
        """The observations as the transcript recorded them (never fetched again)."""
        world, now = self.world, self.world.now()
        newest: dict[str, dict[str, Any]] = {}
        for message in self._messages("observe"):
            newest[message["source"]] = message
        inputs = []
        for message in newest.values():
            content = message["content"].encode("utf-8")
            observation = Observation(source=message["source"], query=message.get("query") or {},
                                      observed_at=dt.datetime.fromisoformat(message["observed_at"]),
                                      content_ref=sha256_ref(content),
                                      freshness_budget_s=world.external.freshness(message["source"]))
            world.facts.add(ObservationUsed(
                run_id=self.run_id, at=now, worker=self.name, step=step, source=observation.source,
                recorded_content=observation.content_ref, live_content=world.external.live_ref(observation.source),
                observed_at=observation.observed_at, freshness_s=observation.freshness_budget_s,
                mode="USE_RECORDED_OBSERVATION"))
            inputs.append((observation, content))
        return inputs

    def _artifact(self, step: str) -> bytes:
        """The candidate: worker-local scratch, re-emitted by whatever model the provider serves when missing."""
        inputs = self._inputs(step)
        if self.scratch is None:
            model = self.world.provider.serve(self.world.placement(self.placement).provider, self.world.release)
            reply = self.task.generate(model, inputs)
            self._charge(reply.charge, f"{model.name} (re-)emitted the {self.task.candidate_kind}")
            self.scratch = reply.output
        return self.scratch

    def _generate(self) -> None:
        artifact = self._artifact("generate")
        self._die("before_seal")
        self._advance({"role": "assistant", "name": "candidate",
                       "content": f"drafted a {self.task.candidate_kind} of {len(artifact)} bytes"})

    def _verify(self) -> None:
        artifact = self._artifact("verify")
        inputs = self._inputs("verify")
        verdict = self.world.verifier.run(self.run_id, self.name, artifact, lambda: self.task.verify(artifact, inputs))
        self._charge(BudgetUsage(verification_spend_usd=Decimal("0.01")), "verify")
        self._advance({"role": "tool", "name": "verifier", "content": f"{verdict.result.value}: {verdict.detail}"})

    def _approve(self) -> None:
        artifact = self._artifact("approve")
        said_pass = any(m["content"].startswith("PASS") for m in self._messages("verifier"))
        claimed = VerifierEvidence(candidate_hash=sha256_ref(artifact), verifier_version="as remembered",
                                   result=VerdictResult.PASS if said_pass else VerdictResult.FAIL,
                                   verified_at=self.world.now())
        approval = self.world.approver.approve(self.task.operation, claimed.candidate_hash, self.task.level,
                                               [claimed], self.world.now())
        if approval is None:
            self._end("failed", "no approval")
            return
        self._advance({"role": "tool", "name": "approval", "operation": approval.operation,
                       "artifact": approval.artifact_hash, "expires_at": _iso(approval.expires_at)})

    def _commit(self) -> None:
        artifact = self._artifact("commit")
        self._held = artifact
        if self._hold("before_send"):
            return
        self._send()

    def _send(self) -> None:
        artifact, self._held = self._held, None
        assert artifact is not None
        world = self.world
        target: MutationTarget = world.targets[self.task.target]
        if self.task.browser is not None:
            copied = self._messages("session")[-1]
            target = SessionTarget(world.targets[self.task.target], world,
                                   Session(copied["cookie"], copied["csrf"], utcnow()))
        approvals = self._messages("approval")
        approval = approvals[-1] if approvals else None
        key, operation_id = f"{self.run_id}:{self.task.intent}:{uuid.uuid4().hex[:8]}", f"naive-{uuid.uuid4().hex}"
        candidate_hash = sha256_ref(artifact)
        history = Recorder(world.history, self.name)
        history.invoke("mutate", self.run_id, epoch=0, key=key, operation_id=operation_id,
                       value={"intent": self.task.intent})
        outcome: Outcome = "committed"
        try:
            target.apply(operation_id, key, FencingToken(self.run_id, 0),
                         self.task.payload(self.run_id, artifact, candidate_hash))
            history.ok("mutate", self.run_id, epoch=0, key=key, operation_id=operation_id,
                       value={"state": "COMMITTED", "replayed": False})
        except TargetUnavailableError:
            outcome = "unknown"
            history.info("mutate", self.run_id, epoch=0, key=key, operation_id=operation_id, value={"state": "UNKNOWN"})
        except TargetRejectedError as exc:
            outcome = "rejected"
            history.fail("mutate", self.run_id, epoch=0, key=key, operation_id=operation_id,
                         value={"error": exc.reason})
        placement = world.placement(self.placement)
        world.facts.add(MutationAttempted(
            run_id=self.run_id, at=world.now(), worker=self.name, placement=self.placement, intent=self.task.intent,
            idempotency_key=key, operation_id=operation_id, candidate_hash=candidate_hash,
            level=self._authority().value, ceiling=placement.authority_ceiling.value,
            approval_artifact=None if approval is None else approval["artifact"],
            approval_expires_at=None if approval is None else dt.datetime.fromisoformat(approval["expires_at"]),
            outcome=outcome))
        self._die("after_send")
        if outcome == "rejected":
            self._end("failed", "the target refused the request")
            return
        self._advance({"role": "tool", "name": "commit", "content": f"sent {key} ({outcome})"})

    def _postcondition(self) -> None:
        records = self.world.targets[self.task.target].records()
        done = any(r.get("run") == self.run_id for r in records)
        self._advance({"role": "tool", "name": "postcondition", "content": "ok" if done else "missing"})
        self._end("verified" if done else "failed", "the target shows the effect" if done else "no effect found")

    def _end(self, status: Status, reason: str) -> None:
        self.ended = True
        self.world.facts.add(RunEnded(run_id=self.run_id, at=self.world.now(), worker=self.name,
                                      status=status, reason=reason))

    def stop_after_transfer(self) -> None:
        """The scheduler told it the run moved; being cooperative, it stops."""
        self.ended = True
