"""The simulated network between Baton and its targets: the live target apps, in process.

Each target is the live service's own ASGI app (`baton.targets.deploy_service`,
`baton.targets.corpus_service`) over its own record files; the clients are
the live clients (`DeployClient`, `CorpusClient`) with an httpx transport
that, instead of a socket, hands the request to the app on this thread. That
transport is where message faults happen: a request lost before delivery, an
answer lost after the target committed (the ambiguous outcome), a request
delivered twice, or one delivered late (after the client gave up; late
messages overtake each other, so this also reorders them).

Every message is logged as the network saw it (`Message`): the simulation's
oracles read this log and the targets' files, never Baton's own verdicts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from baton.sim.faults import Fault, FaultPlan
from baton.sim.scheduler import Process, Scheduler
from baton.targets.http_server import CAPABILITY_HEADER, FENCING_EPOCH_HEADER, FENCING_RUN_HEADER, IDEMPOTENCY_HEADER, OPERATION_HEADER


@dataclass
class Message:
    """One request as the network carried it, and what became of it."""

    seq: int
    sender: str
    target: str
    method: str
    path: str
    run_id: str = ""
    epoch: int | None = None
    operation_id: str = ""
    key: str = ""
    capability: str = ""
    fence_epoch: int | None = None
    fault: str = ""
    deliveries: list[tuple[float, int, int, int]] = field(default_factory=list)
    """(virtual time, HTTP status, the run's epoch in the store's lease row then, delivery order)."""
    answered: bool = False
    sent_at: float = 0.0


class Network:
    """Targets by name, the message log, and the message faults of a plan."""

    def __init__(self, sched: Scheduler, plan: FaultPlan, lease_epoch: Callable[[str], int]) -> None:
        self.sched = sched
        self.plan = plan
        self.lease_epoch = lease_epoch
        self.apps: dict[str, Any] = {}
        self.messages: list[Message] = []
        self._loop = asyncio.new_event_loop()
        self.fired: list[Fault] = []
        self._order = 0

    def close(self) -> None:
        self._loop.close()

    def add_target(self, name: str, app: Any) -> None:
        self.apps[name] = app

    def transport(self, target: str, sender: Process) -> SimTransport:
        return SimTransport(self, target, sender)

    # -- carrying one request ------------------------------------------------------------------------

    def send(self, target: str, sender: Process, request: httpx.Request) -> httpx.Response:
        body = request.read()
        message = self._message(target, sender, request, body)
        self.sched.yield_(f"send {message.seq} {request.method} {target}{message.path} key={message.key} "
                          f"epoch={message.epoch}")
        timeout = float((request.extensions.get("timeout") or {}).get("read") or 1.0)
        fault = self.plan.message_fault(message.seq)
        if fault is not None:
            message.fault = fault.kind
            self.fired.append(fault)
            self.sched.record(f"fault {fault.describe()}")
        if fault is not None and fault.kind == "drop_request":
            self.sched.sleep(timeout)
            raise httpx.ConnectTimeout("simulated: the request was lost", request=request)
        if fault is not None and fault.kind == "delay":
            late = self.sched.process(f"net:{message.seq}")
            self.sched.spawn(f"late-{message.seq}", late, lambda: self._deliver(message, request, body),
                             delay_s=float(fault.arg))
            self.sched.sleep(timeout)
            raise httpx.ReadTimeout("simulated: no answer in time (the request is still in flight)", request=request)
        response = self._deliver(message, request, body)
        if fault is not None and fault.kind == "duplicate":
            self.sched.yield_(f"redeliver {message.seq}")
            response = self._deliver(message, request, body)
        if fault is not None and fault.kind == "drop_response":
            self.sched.sleep(timeout)
            raise httpx.ReadTimeout("simulated: the answer was lost", request=request)
        self.sched.yield_(f"answer {message.seq} {response.status_code}")
        message.answered = True
        return response

    def _message(self, target: str, sender: Process, request: httpx.Request, body: bytes) -> Message:
        headers = request.headers
        epoch_text = headers.get(FENCING_EPOCH_HEADER, "")
        message = Message(
            seq=len(self.messages) + 1, sender=sender.name, target=target, method=request.method,
            path=request.url.path, run_id=headers.get(FENCING_RUN_HEADER, ""),
            epoch=int(epoch_text) if epoch_text.isdigit() else None, operation_id=headers.get(OPERATION_HEADER, ""),
            key=headers.get(IDEMPOTENCY_HEADER, ""), capability=headers.get(CAPABILITY_HEADER, ""),
            sent_at=self.sched.elapsed_s,
        )
        if request.url.path == "/fence" and body:
            import json

            fence = json.loads(body)
            message.run_id, message.fence_epoch = str(fence.get("run_id", "")), int(fence.get("epoch", 0))
        self.messages.append(message)
        return message

    def _deliver(self, message: Message, request: httpx.Request, body: bytes) -> httpx.Response:
        """Hand the request to the target's app on this thread, as its server would."""
        with self.sched.serving():
            status, headers, content = self._loop.run_until_complete(_call(self.apps[message.target], request, body))
        epoch = self.lease_epoch(message.run_id) if message.run_id else -1
        self._order += 1
        message.deliveries.append((self.sched.elapsed_s, status, epoch, self._order))
        self.sched.record(f"deliver {message.seq} -> {status}")
        return httpx.Response(status_code=status, headers=headers, content=content, request=request)


class SimTransport(httpx.BaseTransport):
    """httpx transport of one sender (a worker process or the coordinator) towards one target."""

    def __init__(self, network: Network, target: str, sender: Process) -> None:
        self.network, self.target, self.sender = network, target, sender

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        return self.network.send(self.target, self.sender, request)


async def _call(app: Any, request: httpx.Request, body: bytes) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": request.method,
        "scheme": "http", "path": request.url.path, "raw_path": request.url.path.encode(),
        "query_string": request.url.query, "root_path": "",
        "headers": [(k.lower(), v) for k, v in request.headers.raw], "client": ("sim", 1), "server": ("sim", 80),
    }
    received = False
    status = 500
    headers: list[tuple[bytes, bytes]] = []
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal received
        if received:
            return {"type": "http.disconnect"}
        received = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(event: dict[str, Any]) -> None:
        nonlocal status, headers
        if event["type"] == "http.response.start":
            status = int(event["status"])
            headers = list(event.get("headers", []))
        elif event["type"] == "http.response.body":
            chunks.append(event.get("body", b""))

    await app(scope, receive, send)
    return status, headers, b"".join(chunks)
