"""The transcript-only controls: the same task, models, verifiers and targets, with a transcript as the only state.

    python -m baton.faults.transcript_agent --transcript FILE --mode naive|competent --release NAME --home DIR

Two designs, both resuming from the transcript file and nothing else:

- `naive`, the literal transcript checkpoint: the message list and the step it
  reached. A resumed worker carries on from the last message; a tool call
  without its result is issued again (a fresh idempotency key per attempt, as
  an HTTP client library makes one); no budget or approval travels.
- `competent`, the best design without Baton: idempotency keys derived from
  run and step, budget totals and approvals carried in the transcript, a
  checksum over the transcript, retries with backoff on timeouts, and a
  resume counter sent as the fencing epoch.

Neither can carry what only a store outside the transcript can: a fencing
epoch issued when ownership moves, evidence bound to artifact hashes, the
UNKNOWN state of an operation, or the identity of the release that made the
candidate. Each step ends by writing the transcript (atomically), then
`baton.fault_points.reached("sealed:<BOUNDARY>")`, the same point Baton's SDK
names after a seal; the deploy client holds at `before_send` for both.

One step loop, two drivers. `TranscriptAgent` takes what it touches from outside
as arguments: where the transcript lives (`TranscriptFile` here, a file written
atomically; the simulation passes its own store of transcripts), how it reaches
the deploy and corpus services (`ServiceClients`: here the live HTTP clients on
the ports the services published; the simulation passes the same clients over
its simulated network) and when to stop between steps. Time comes from
`baton.clock` only (the backoff sleeps), so under the simulation's virtual clock
the same code runs on virtual time. This module's `main` is the thin CLI
wrapper the live fault matrix starts as a process; `baton.sim.control_world`
drives the same class in process.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any, Protocol

from baton import clock, fault_points
from baton.agents.deploy_agent import build_catalog
from baton.agents.scripted_models import BuildInfo, NoDeployableBuildError, model_for
from baton.agents.verifiers import check_deployment_spec, verify_report
from baton.errors import TargetRejectedError, TargetUnavailableError
from baton.faults.transcript_agents import steps_for
from baton.fencing import FencingToken
from baton.identity import canonical_json, sha256_ref
from baton.models import Observation
from baton.targets.corpus_service import CorpusClient, publication_payload
from baton.targets.deploy_service import DeployClient
from baton.targets.http_server import PORT_FILE
from baton.targets.service_process import target_data_dir

MODES = ("naive", "competent")
TERMINAL = ("verified", "failed", "escalated")
BACKOFF_S = (0.5, 1.0, 2.0)
FRESHNESS_S = 300.0


class TranscriptCorrupt(ValueError):
    """The competent control's checksum does not match its transcript."""


def checksum(body: dict[str, Any]) -> str:
    return sha256_ref(canonical_json({k: v for k, v in body.items() if k != "checksum"}))


def parse(text: str, mode: str, where: str) -> dict[str, Any]:
    """A transcript from its text (the competent design checks its checksum)."""
    body: dict[str, Any] = json.loads(text)
    if mode == "competent" and body.get("checksum") != checksum(body):
        raise TranscriptCorrupt(f"{where}: checksum mismatch")
    return body


def seal(body: dict[str, Any], mode: str) -> str:
    """The text a transcript is written as (the competent design adds its checksum to `body` first)."""
    if mode == "competent":
        body["checksum"] = checksum(body)
    return json.dumps(body, indent=1, sort_keys=True)


def load(path: Path, mode: str) -> dict[str, Any]:
    return parse(path.read_text(encoding="utf-8"), mode, str(path))


def save(path: Path, body: dict[str, Any], mode: str) -> None:
    staging = path.with_name(path.name + f".{os.getpid()}.tmp")
    staging.write_text(seal(body, mode), encoding="utf-8")
    os.replace(staging, path)


def new_transcript(run_id: str, task: dict[str, Any], limits: dict[str, Any], mode: str) -> dict[str, Any]:
    """The transcript a run starts with."""
    body: dict[str, Any] = {"run_id": run_id, "task": task, "messages": [], "step": "GENERATING", "status": "active",
                            "limits": limits, "resumes": 0}
    if mode == "competent":
        body |= {"budget": {"model_calls": 0, "model_spend_usd": "0"}, "approvals": []}
    return body


def _url(home: Path, service: str) -> str:
    return f"http://127.0.0.1:{int((target_data_dir(service, home) / PORT_FILE).read_text().strip())}"


class TranscriptStorage(Protocol):
    """Where a control's transcript lives: the only state it resumes from."""

    root: Path
    """A directory of the control's own (the browser control's credential issuer keeps its keys there)."""

    def load(self, mode: str) -> dict[str, Any]: ...
    def raw(self) -> dict[str, Any]: ...
    def save(self, body: dict[str, Any], mode: str) -> None: ...


class TranscriptFile:
    """A transcript in a file, replaced atomically on every write (the live control's storage)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.root = self.path.parent

    def load(self, mode: str) -> dict[str, Any]:
        return load(self.path, mode)

    def raw(self) -> dict[str, Any]:
        return dict(json.loads(self.path.read_text(encoding="utf-8")))

    def save(self, body: dict[str, Any], mode: str) -> None:
        save(self.path, body, mode)


class ServiceClients(Protocol):
    """How the deploy and research steps reach their services (each client is closed by its caller)."""

    def deploy(self, timeout_s: float | None = None) -> DeployClient: ...
    def corpus(self, timeout_s: float | None = None) -> CorpusClient: ...


class LiveServices:
    """The live services, on the loopback ports they published under `home`."""

    def __init__(self, home: Path) -> None:
        self.home = home

    def deploy(self, timeout_s: float | None = None) -> DeployClient:
        url = _url(self.home, "deploy")
        return DeployClient(url) if timeout_s is None else DeployClient(url, timeout_s=timeout_s)

    def corpus(self, timeout_s: float | None = None) -> CorpusClient:
        url = _url(self.home, "corpus")
        return CorpusClient(url) if timeout_s is None else CorpusClient(url, timeout_s=timeout_s)


class TranscriptAgent:
    """One worker process of a transcript-only control.

    `transcript` is a path (the live CLI) or a `TranscriptStorage`; `services` defaults to the live services under
    `home`; `stop` is asked between steps (a scheduler draining the worker): when it answers True the worker leaves
    the transcript as it is and returns, as a process told to stop would.
    """

    def __init__(self, transcript: Path | TranscriptStorage, mode: str, release: str, home: Path, *,
                 services: ServiceClients | None = None, stop: Callable[[], bool] | None = None) -> None:
        self.storage: TranscriptStorage = TranscriptFile(transcript) if isinstance(transcript, Path) else transcript
        self.mode, self.release, self.home = mode, release, home
        self.services: ServiceClients = services if services is not None else LiveServices(home)
        self.stop = stop or (lambda: False)
        self.spent_here = {"model_calls": 0, "model_spend_usd": Decimal("0")}
        try:
            self.body = self.storage.load(mode)
        except TranscriptCorrupt:
            # The competent design notices the damage; all it can do is start again from the task.
            raw = self.storage.raw()
            self.body = new_transcript(raw.get("run_id", ""), raw.get("task", {}), raw.get("limits", {}), mode)
            self.body["restarted"] = "checksum mismatch: started over"
        self.body["resumes"] = int(self.body.get("resumes", 0)) + (1 if self.body["messages"] else 0)
        self.run_id = str(self.body["run_id"])
        self.steps = steps_for(str(self.body["task"].get("kind")), self.storage.root)

    # -- transcript ----------------------------------------------------------------------------

    def say(self, step: str, role: str, content: Any) -> None:
        self.body["messages"].append({"step": step, "role": role, "content": content})

    def last(self, role: str, key: str) -> Any:
        """The newest message of `role` holding `key`."""
        return next((m["content"] for m in reversed(self.body["messages"]) if m["role"] == role and key in m["content"]),
                    None)

    def advance(self, step: str) -> None:
        self.body["step"] = step
        self.storage.save(self.body, self.mode)
        fault_points.reached(f"sealed:{step}")

    def end(self, status: str, detail: str) -> None:
        self.body["status"], self.body["detail"] = status, detail
        used = self.budget_used()
        self.body["reported"] = {"status": status, "model_calls": used["model_calls"],
                                 "model_spend_usd": str(used["model_spend_usd"])}
        self.storage.save(self.body, self.mode)

    def budget_used(self) -> dict[str, Any]:
        if self.mode == "competent":
            carried = self.body["budget"]
            return {"model_calls": int(carried["model_calls"]), "model_spend_usd": Decimal(carried["model_spend_usd"])}
        return dict(self.spent_here)  # the literal transcript carries no budget: only what this worker spent

    def charge(self, calls: int, usd: Decimal) -> None:
        self.spent_here["model_calls"] += calls
        self.spent_here["model_spend_usd"] += usd
        if self.mode == "competent":
            carried = self.body["budget"]
            carried["model_calls"] = int(carried["model_calls"]) + calls
            carried["model_spend_usd"] = str(Decimal(carried["model_spend_usd"]) + usd)

    def within_budget(self) -> bool:
        limit = self.body.get("limits", {}).get("model_calls")
        return limit is None or self.budget_used()["model_calls"] < int(limit)

    # -- steps ---------------------------------------------------------------------------------

    def run(self) -> None:
        while self.body["status"] == "active":
            if self.stop():
                return None
            step = self.body["step"]
            if step == "GENERATING":
                if not self.within_budget():
                    return self.end("failed", "model-call budget exhausted")
                self.generate()
            elif step == "CANDIDATE_READY":
                self.verify()
            elif step == "VERIFIED":
                self.say(step, "approver", {"approved": True, "by": "operator"})
                if self.mode == "competent":
                    self.body["approvals"].append({"operation": "send", "by": "operator"})
                self.advance("AUTHORIZED")
            elif step == "AUTHORIZED":
                self.send()
            elif step == "COMMITTED":
                self.postcondition()
            else:
                return self.end("failed", f"cannot continue from {step}")

    def generate(self) -> None:
        if self.steps is not None:
            return self.steps.generate(self)
        task = self.body["task"]
        model = model_for(self.release, account=self.run_id)
        if task["kind"] == "deploy":
            builds = [b.model_dump(mode="json") for b in build_catalog(task["service"])]
            self.say("GENERATING", "tool", {"builds": builds})
            try:
                reply = model.plan_deployment(task["service"], [BuildInfo.model_validate(b) for b in builds])
            except NoDeployableBuildError as exc:
                return self.end("failed", str(exc))
        else:
            with self.services.corpus() as corpus:
                fetched = [corpus.fetch(doc) for doc in task["documents"]]
            pairs = [(f.observation(FRESHNESS_S), f.data) for f in fetched]
            self.say("GENERATING", "tool", {"documents": [
                {"observation": o.model_dump(mode="json"), "text": d.decode("utf-8")} for o, d in pairs]})
            reply = model.draft_report(pairs, topic=str(task.get("topic", "findings")))
        self.charge(1, reply.charge.model_spend_usd)
        self.say("GENERATING", "assistant", {"candidate": reply.output.decode("utf-8")})
        self.advance("CANDIDATE_READY")

    def verify(self) -> None:
        if self.steps is not None:
            return self.steps.verify(self)
        task, candidate = self.body["task"], str(self.last("assistant", "candidate")["candidate"]).encode("utf-8")
        evidence = self.last("tool", "builds" if task["kind"] == "deploy" else "documents")
        if task["kind"] == "deploy":
            verdict = check_deployment_spec(candidate, [BuildInfo.model_validate(b) for b in evidence["builds"]])
        else:
            refs = [Observation.model_validate(d["observation"]).record_ref() for d in evidence["documents"]]
            verdict = verify_report(candidate, refs)
        self.say("CANDIDATE_READY", "verifier", {"result": verdict.result.value, "detail": verdict.detail})
        if not verdict.passed:
            return self.end("failed", f"verification failed: {verdict.detail}")
        self.advance("VERIFIED")

    def _payload(self) -> dict[str, Any]:
        if self.steps is not None:
            return self.steps.payload(self)
        candidate = str(self.last("assistant", "candidate")["candidate"])
        if self.body["task"]["kind"] == "deploy":
            return dict(json.loads(candidate))
        return publication_payload(self.run_id, candidate)

    def send(self) -> None:
        kind = self.body["task"]["kind"]
        key = f"{self.run_id}:{kind}" if self.mode == "competent" else uuid.uuid4().hex
        epoch = int(self.body["resumes"]) if self.mode == "competent" else 0
        self.say("AUTHORIZED", "assistant", {"tool_call": kind, "idempotency_key": key})
        self.storage.save(self.body, self.mode)  # the call is in the transcript before it is made
        client = self._client(kind)
        attempts = len(BACKOFF_S) + 1 if self.mode == "competent" else 1
        refreshed = False
        try:
            for attempt in range(attempts):
                payload = self._payload()
                capability = None if self.steps is None else self.steps.capability(self, key, epoch, payload)
                try:
                    answer = client.apply(f"op-{uuid.uuid4().hex}", key, FencingToken(self.run_id, epoch, capability),
                                          payload)
                    break
                except TargetUnavailableError as exc:
                    if attempt + 1 == attempts:
                        self.say("AUTHORIZED", "tool", {"error": str(exc)})
                        return self.end("failed", f"{kind} did not answer: {exc}")
                    clock.sleep(BACKOFF_S[attempt])
                except TargetRejectedError as exc:
                    self.say("AUTHORIZED", "tool", {"error": str(exc), "reason": exc.reason})
                    # competent: the target's state moved on; refresh to it once and send again (see transcript_agents)
                    if (self.mode == "competent" and not refreshed and attempt + 1 < attempts
                            and self.steps is not None and self.steps.refresh(self, exc)):
                        refreshed = True
                        continue
                    return self.end("failed", f"{kind} refused: {exc}")
        finally:
            client.close()
        self.say("AUTHORIZED", "tool", {"result": answer})
        self.advance("COMMITTED")

    def _client(self, kind: str) -> Any:
        if self.steps is not None:
            return self.steps.client(self)
        if kind == "deploy":
            return self.services.deploy(timeout_s=1.0)
        return self.services.corpus(timeout_s=1.0)

    def postcondition(self) -> None:
        kind = self.body["task"]["kind"]
        try:
            if self.steps is not None:
                mine = self.steps.effects(self)
            elif kind == "deploy":
                with self.services.deploy() as deploy:
                    mine = [d for d in deploy.deployments() if d.get("run_id") == self.run_id]
            else:
                with self.services.corpus() as corpus:
                    mine = [p for p in corpus.publications() if p.get("run_id") == self.run_id]
        except Exception as exc:  # noqa: BLE001 - the target is gone: the control says what it believes
            return self.end("verified", f"committed; postcondition not checked ({exc})")
        self.say("COMMITTED", "tool", {"effects": len(mine)})
        self.end("verified" if mine else "failed", f"{len(mine)} effect(s) recorded for the run")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transcript", required=True, type=Path)
    parser.add_argument("--mode", required=True, choices=MODES)
    parser.add_argument("--release", required=True)
    parser.add_argument("--home", required=True, type=Path)
    args = parser.parse_args(argv)
    TranscriptAgent(args.transcript, args.mode, args.release, args.home).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
