"""What the HTTP target services share: mutation headers, error bodies, ambiguity, serving.

Mutation requests carry four headers:

- `X-Operation-Id`: the gateway's operation id (what `GET /operations/{id}` answers for),
- `Idempotency-Key`: one logical side effect, whatever the retries,
- `X-Fencing-Run` and `X-Fencing-Epoch`: the fencing token.

and may carry `X-Baton-Origin-Placement`: the placement the sending process was started on, as the process
that started it put it in its environment (`ORIGIN_ENV`, added by the shared client, never by agent code).
Every admitted mutation's origin goes to `origins.jsonl` (null when the header is absent), guarded or not.

Refusals are JSON `{"error": <reason>, "message": <text>, ...}`: 400 `bad_headers`,
409 `fenced` (with `highest_epoch`) or `sealed`, 422 `payload_mismatch`,
`operation_id_reused` or a service-specific reason. Every refusal is definite:
nothing was applied.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import socket
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from baton.parent_watch import die_with_parent
from baton.ablation import warn_if_ablated
from baton.errors import CapabilityError, FencedTokenError, IdempotencyConflictError, PayloadMismatchError
from baton.fencing import FencingToken
from baton.targets.capability_guard import TargetGuard, add_guard_arguments
from baton.durable_files import append_line, utc_now_text
from baton.targets.mutation_log import MutationLog, SealedOperationError

PRESENTED_FILE = "presented.jsonl"
"""The target's own record of the capability each admitted mutation presented (placement, level, expiry)."""

ORIGINS_FILE = "origins.jsonl"
"""The target's record of the placement each admitted mutation came from (its origin header; null without one)."""

OPERATION_HEADER = "X-Operation-Id"
IDEMPOTENCY_HEADER = "Idempotency-Key"
FENCING_RUN_HEADER = "X-Fencing-Run"
FENCING_EPOCH_HEADER = "X-Fencing-Epoch"
CAPABILITY_HEADER = "X-Baton-Capability"
ORIGIN_HEADER = "X-Baton-Origin-Placement"
ORIGIN_ENV = "BATON_ORIGIN_PLACEMENT"
"""Set by whatever starts a worker process (supervisor, control scheduler) to the placement it runs on."""
_ORIGIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
PORT_FILE = "port"


class BadHeadersError(ValueError):
    """A mutation request lacks a header or carries a malformed one."""


def refusal(status: int, error: str, message: str, **extra: Any) -> JSONResponse:
    """A definite refusal: nothing was applied."""
    return JSONResponse(status_code=status, content={"error": error, "message": message, **extra})


def mutation_headers(request: Request) -> tuple[str, str, FencingToken]:
    """Operation id, idempotency key and fencing token of a request; BadHeadersError if any is missing."""
    values = {}
    for name in (OPERATION_HEADER, IDEMPOTENCY_HEADER, FENCING_RUN_HEADER, FENCING_EPOCH_HEADER):
        value = request.headers.get(name, "").strip()
        if not value:
            raise BadHeadersError(f"missing header {name}")
        values[name] = value
    try:
        token = FencingToken(values[FENCING_RUN_HEADER], int(values[FENCING_EPOCH_HEADER]))
    except ValueError as exc:
        raise BadHeadersError(f"malformed fencing token: {exc}") from None
    return values[OPERATION_HEADER], values[IDEMPOTENCY_HEADER], token


def origin_placement(request: Request) -> str | None:
    """The placement named by the request's origin header; None without one; BadHeadersError if malformed."""
    value = request.headers.get(ORIGIN_HEADER)
    if value is None:
        return None
    if not _ORIGIN.fullmatch(value.strip()):
        raise BadHeadersError(f"malformed header {ORIGIN_HEADER}: {value[:40]!r}")
    return value.strip()


def record_origin(directory: Path, operation_id: str, token: FencingToken, origin: str | None) -> None:
    """Append an admitted mutation's origin placement to `origins.jsonl` (before the effect is applied)."""
    append_line(directory / ORIGINS_FILE, {"at": utc_now_text(), "operation_id": operation_id,
                                           "run_id": token.run_id, "epoch": token.epoch, "origin": origin})


class Ambiguity:
    """Seeded misbehaviour: with probability `rate`, a fresh commit answers only after `delay_s`.

    The commit is already durable when the delay starts, so a client that
    times out faces the ambiguous case: the effect happened, the answer was lost.
    """

    def __init__(self, rate: float, seed: int, delay_s: float) -> None:
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"ambiguous rate must be within [0, 1], not {rate}")
        self.rate, self.delay_s = rate, delay_s
        self._rng = random.Random(seed)
        self._lock = threading.Lock()

    def draw(self) -> bool:
        """True when this commit should stall (one draw per fresh commit)."""
        with self._lock:
            return self._rng.random() < self.rate


async def apply_mutation(
    log: MutationLog, request: Request, payload: Mapping[str, Any], ambiguity: Ambiguity,
    guard: TargetGuard | None = None,
) -> JSONResponse:
    """Run one mutation request through `log` and answer it (201 applied, 200 replayed).

    An admitted capability's placement, level and expiry are written to `presented.jsonl` (what the target saw);
    every admitted request's origin header, capability or not, to `origins.jsonl`.

    With `guard`, the capability in the request must fit it first; a refusal is
    written to the service's own request log as `capability:<reason>`.
    """
    try:
        operation_id, key, token = mutation_headers(request)
        origin = origin_placement(request)
    except BadHeadersError as exc:
        return refusal(400, "bad_headers", str(exc))
    stale = log.refuse_if_fenced(operation_id, key, token)
    if stale is not None:
        return refusal(409, "fenced", str(stale), run_id=token.run_id, epoch=token.epoch, highest_epoch=stale.highest_seen)
    if guard is not None:
        try:
            claims = guard.admit(request.headers.get(CAPABILITY_HEADER), run_id=token.run_id, epoch=token.epoch,
                                 idempotency_key=key, payload=payload)
            append_line(log.directory / PRESENTED_FILE, {
                "at": utc_now_text(), "operation_id": operation_id, "run_id": token.run_id, "epoch": token.epoch,
                "placement": claims.placement, "level": claims.level.value,
                "capability_id": claims.capability_id, "expires_at": claims.expires_at.isoformat()})
        except CapabilityError as exc:
            log.refuse(operation_id, key, token, f"capability:{exc.reason}", str(exc))
            return refusal(403, f"capability:{exc.reason}", str(exc))
    record_origin(log.directory, operation_id, token, origin)
    try:
        applied = log.apply(operation_id, key, token, payload)
    except FencedTokenError as exc:
        return refusal(409, "fenced", str(exc), run_id=token.run_id, epoch=token.epoch, highest_epoch=exc.highest_seen)
    except SealedOperationError as exc:
        return refusal(409, "sealed", str(exc))
    except PayloadMismatchError as exc:
        return refusal(422, "payload_mismatch", str(exc), recorded_operation_id=exc.operation_id)
    except IdempotencyConflictError as exc:
        return refusal(422, "operation_id_reused", str(exc))
    if not applied.replayed and ambiguity.draw():
        await asyncio.sleep(ambiguity.delay_s)
    status = "replayed" if applied.replayed else "applied"
    return JSONResponse(status_code=200 if applied.replayed else 201, content={"status": status, "record": applied.record})


class FenceBody(BaseModel):
    run_id: str = Field(min_length=1)
    epoch: int = Field(ge=0)


def install_common_routes(app: FastAPI, log: MutationLog, service: str) -> None:
    """GET /health, GET /operations/{operation_id} and POST /fence."""

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "service": service, "effects": len(log.effects())}

    @app.get("/operations/{operation_id}")
    async def lookup(operation_id: str) -> dict[str, str]:
        return {"operation_id": operation_id, "state": log.lookup(operation_id).value}

    @app.post("/fence")
    async def fence(body: FenceBody) -> dict[str, Any]:
        return {"run_id": body.run_id, "epoch": log.advance_fence(FencingToken(body.run_id, body.epoch))}


def service_arguments(description: str) -> argparse.ArgumentParser:
    """The command-line options every target service takes."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--data", required=True, type=Path, help="directory holding the service's records")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (loopback by default)")
    parser.add_argument("--port", type=int, default=0, help="port to bind; 0 picks a free one")
    parser.add_argument("--port-file", type=Path, default=None, help=f"where to write the bound port (default DATA/{PORT_FILE})")
    parser.add_argument("--seed", type=int, default=0, help="seed of every random choice the service makes")
    parser.add_argument("--ambiguous-rate", type=float, default=0.0, help="probability a commit answers too late")
    parser.add_argument("--ambiguous-delay-s", type=float, default=5.0, help="how late such an answer comes")
    add_guard_arguments(parser)
    return parser


def serve(app: FastAPI, host: str, port: int, port_file: Path) -> None:
    """Bind, publish the bound port in `port_file` (atomically), then serve until SIGTERM."""
    die_with_parent()
    warn_if_ablated(f"target service {app.title!r}")
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    staging = port_file.with_name(port_file.name + ".tmp")
    staging.write_text(str(sock.getsockname()[1]))
    os.replace(staging, port_file)
    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=1)
    uvicorn.Server(config).run(sockets=[sock])
