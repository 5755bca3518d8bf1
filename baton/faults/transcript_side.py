"""A transcript-only control under the fault matrix: the same verbs as `BatonRun`, over transcript agent processes.

Its targets run without a capability guard (the control has no authority
service to get a capability from); everything else about the world, the
fault and the point where it strikes is the same as for Baton.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
import uuid
from typing import Any

from baton.catalog.releases import RELEASES
from baton.models import BehavioralRelease
from baton.faults.rig import Rig, TargetOptions, sigcont, sigstop, wait_until
from baton.faults.rig_agents import AGENT_KINDS, agent_task, write_intent
from baton.faults.transcript_agents import ISSUER_DIR, ControlIssuer
from baton.faults.transcript_agent import TERMINAL, load, new_transcript, save
from baton.placements import DEFAULT_PLACEMENTS
from baton.targets.corpus_documents import INITIAL_DOCUMENTS
from baton.targets.http_server import ORIGIN_ENV

AGENT_MODULE = "baton.faults.transcript_agent"
_SUPPORTED = {p.name: p.supported_release_ids for p in DEFAULT_PLACEMENTS}


def release_on(placement: str) -> str:
    """The release a plain scheduler's worker of `placement` runs: the first it supports, in catalog order."""
    for name in ("model-v7", "model-v8"):
        if RELEASES[name].release_id in _SUPPORTED[placement]:
            return name
    raise ValueError(f"placement {placement} supports no catalog release")


class TranscriptRun:
    """One run of a case under a transcript-only control (`naive` or `competent`)."""

    def __init__(self, rig: Rig, *, mode: str, kind: str, case_id: str, limits: dict[str, Any],
                 task: dict[str, Any] | None = None, constraints: dict[str, Any] | None = None) -> None:
        self.rig, self.mode, self.kind = rig, mode, kind
        self.strategy = mode
        self.run_id = f"{case_id}-{uuid.uuid4().hex[:6]}"
        self.transcript = rig.root / "transcript.json"
        self.limits = limits
        self.task_extra = dict(task or {})
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self._all: list[subprocess.Popen[bytes]] = []
        self.frozen: set[int] = set()
        rig.cleanup.callback(self._stop_all)

    def start(self, options: TargetOptions) -> None:
        if "webapp" in options.agents:  # the application trusts the control scheduler's own credential issuer
            options = dataclasses.replace(options, agent_trust=str(ControlIssuer(self.rig.root / ISSUER_DIR).trust_file))
        self.rig.start_targets(options)

    def launch(self) -> None:
        if self.kind in AGENT_KINDS:
            task = {"kind": self.kind} | agent_task(self.kind, self.task_extra)
            write_intent(self.rig.root, self.kind, agent_task(self.kind, self.task_extra))
        elif self.kind == "deploy":
            task: dict[str, Any] = {"kind": "deploy", "service": "checkout"}
            self.rig.write_registry("checkout")
        else:
            task = {"kind": "research", "topic": "fencing", "documents": sorted(INITIAL_DOCUMENTS)[:3]} | self.task_extra
        save(self.transcript, new_transcript(self.run_id, task, {"model_calls": self.limits.get("model_calls")},
                                             self.mode), self.mode)

    def worker(self, placement: str, *, point: str | None = None) -> None:
        """Start a control process for the run on `placement` (it resumes from the transcript); its environment names
        the placement (`ORIGIN_ENV`), as Baton's supervisor does for a worker, for the targets' origin record."""
        command = [sys.executable, "-m", AGENT_MODULE, "--transcript", str(self.transcript), "--mode", self.mode,
                   "--release", release_on(placement), "--home", str(self.rig.home)]
        logs = self.rig.root / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        with self.rig.process_env(point), open(logs / f"control-{placement}-{len(self._all)}.log", "ab") as log:
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       env={**os.environ, ORIGIN_ENV: placement})  # the scheduler's word, as Baton's
        self.processes[placement] = process
        self._all.append(process)

    def pid(self, placement: str) -> int:
        return self.processes[placement].pid

    def freeze(self, placement: str) -> int:
        """SIGSTOP the control process of `placement` (a GC pause, a stalled VM)."""
        pid = self.pid(placement)
        sigstop(pid)
        self.frozen.add(pid)
        return pid

    def thaw(self, pid: int) -> None:
        self.frozen.discard(pid)
        sigcont(pid)

    def wait_lease_lapsed(self) -> None:
        """A transcript scheduler holds no lease: it declares the worker lost after the same heartbeat timeout."""
        time.sleep(2.0)

    def hand_off(self, to: str, reason: str = "lease_expired", *, start_worker: bool = True,
                 source_alive: bool = False) -> str:
        if start_worker:
            self.worker(to)
        return f"transcript copied to a new worker on {to} ({reason})"

    def change_releases(self, withdraw: list[str], publish: dict[str, tuple[BehavioralRelease, list[str]]]) -> str:
        """The provider's release change reaches the control only as the provider's record: a transcript
        scheduler keeps its static placement list (a transcript carries no release identity to check)."""
        self.rig.record_release_change(withdrawn=[RELEASES[name].release_id for name in withdraw],
                                       published={name: manifest.release_id for name, (manifest, _) in publish.items()})
        return f"provider withdrew {withdraw}, published {sorted(publish)}; the control's scheduler is unaware"

    def change_placement(self, placement: str, **facts: str) -> str:
        """The operator's change reaches the control only as the operator's record: a transcript carries no
        portability constraint to hold a placement against."""
        self.rig.record_placement_change(placement, **facts)
        return f"operator changed placement {placement} to {facts}; the control's scheduler is unaware"

    def tamper_manifest(self) -> str:
        """Flip one hex digit of the candidate inside the transcript (its checkpoint manifest), on disk."""
        text = self.transcript.read_text(encoding="utf-8")
        body = json.loads(text)
        candidate = next(m for m in reversed(body["messages"]) if "candidate" in m["content"])["content"]["candidate"]
        marker = "sha256:" if "sha256:" in candidate else "states that "
        at = candidate.index(marker) + len(marker) + 5
        flipped = candidate[:at] + ("0" if candidate[at] != "0" else "1") + candidate[at + 1:]
        self.transcript.write_text(text.replace(json.dumps(candidate)[1:-1], json.dumps(flipped)[1:-1], 1),
                                   encoding="utf-8")
        return "flipped one character of the candidate in the transcript file"

    def replan_unverified(self, content: bytes, summary: str) -> str:
        """Append the re-planned candidate to the transcript as the assistant's last word (saved as the control saves,
        checksum and all); its step stays VERIFIED."""
        body = json.loads(self.transcript.read_text(encoding="utf-8"))
        step = body["step"]
        body["messages"].append({"step": step, "role": "assistant", "content": {"candidate": content.decode("utf-8")}})
        save(self.transcript, body, self.mode)
        return f"a second writer appended a re-planned candidate ({summary}) to the transcript at {step}"

    def refused_at_adoption(self) -> str | None:
        """Never: a transcript-only worker has no catalog to judge its placement by."""
        return None

    def wait_end(self, timeout_s: float = 240.0) -> str:
        wait_until(lambda: all(p.poll() is not None for p in self._all if p.pid not in self.frozen), timeout_s=timeout_s,
                   what="every control process to exit")
        status = str(json.loads(self.transcript.read_text(encoding="utf-8")).get("status"))
        return status if status in TERMINAL else "active"

    def report(self) -> None:
        body = json.loads(self.transcript.read_text(encoding="utf-8"))
        reported = dict(body.get("reported") or {"status": body.get("status"), "model_calls": 0, "model_spend_usd": "0"})
        reported |= {"run_id": self.run_id, "limits": body.get("limits", {})}
        self.rig.write_reported(reported)

    def settle(self) -> None:
        time.sleep(0.3)

    def _stop_all(self) -> None:
        for process in self._all:
            if process.poll() is None:
                sigcont(process.pid)
                process.kill()
                process.wait(timeout=10)


__all__ = ["TranscriptRun", "load", "release_on"]
