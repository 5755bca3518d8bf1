"""A tiny ledger service over HTTP: a real target for consequential side effects.

Each accepted request appends one row to the ledger: that row *is* the side
effect. The service applies idempotency keys, enforces fencing tokens (it
refuses an epoch lower than one it has seen for the run), answers
reconciliation queries by operation id, and can be told to misbehave for a
given idempotency key so tests can produce the ambiguous cases.

Run it with `python -m baton.targets.ledger_target --dir DIR`; it binds a free
loopback port and writes the port number to `DIR/port` once it listens.
`LedgerTargetProcess` does exactly that as a subprocess, and
`LedgerTargetClient` is the httpx adapter the gateway uses.

Records: one SQLite file, `DIR/ledger.sqlite3`, owned by the service.

* `effects(seq, operation_id, run_id, idempotency_key, epoch, payload_ref, payload, applied_at)` -
  one row per side effect; unique per (run_id, idempotency_key) and per operation_id.
* `requests(seq, at, operation_id, run_id, idempotency_key, epoch, result, detail)` - every
  apply request and what became of it: applied, replayed, fenced, payload_mismatch,
  sealed, rejected, aborted, or `capability:<reason>` when the service's own
  capability check refused it (started with `--trust`, see `baton.targets.capability_guard`).
* `sealed(operation_id, at, reason)` - operation ids this service has declared
  NOT_COMMITTED; a late request carrying one is refused, so the answer stays true.
* `pending(operation_id, run_id, idempotency_key, started_at)` - requests being
  held by a fault; lookups of them answer UNKNOWN.
* `faults(idempotency_key, mode, delay_s)` - one-shot misbehaviour:
  `commit_then_timeout` (commit, then answer only after `delay_s`),
  `hang_then_abort` (hold for `delay_s`, then drop the request uncommitted),
  `reject` (refuse without committing).
* `baton_fence(run_id, epoch)` - the highest fencing epoch seen per run (`baton.fencing.FenceGuard`).

HTTP: `POST /apply`, `GET /operations/{operation_id}`, `POST /fence`,
`POST /faults`, `GET /effects`, `GET /requests`, `GET /health`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import httpx
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, JsonValue

from baton.ablation import warn_if_ablated
from baton import clock
from baton.checker import TargetEffect
from baton.errors import CapabilityError, FencedTokenError, TargetRejectedError, TargetUnavailableError
from baton.fencing import FenceGuard, FencingToken
from baton.identity import ref_of
from baton.models.operation import OperationState
from baton.targets.capability_guard import TargetGuard, TargetPolicy, add_guard_arguments, guard_from_arguments

DB_NAME = "ledger.sqlite3"
DEFAULT_OPERATION = "ledger.append"
PORT_FILE = "port"
FaultMode = Literal["commit_then_timeout", "hang_then_abort", "reject"]

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS effects (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        operation_id TEXT NOT NULL UNIQUE,
        run_id TEXT NOT NULL,
        idempotency_key TEXT NOT NULL,
        epoch INTEGER NOT NULL,
        payload_ref TEXT NOT NULL,
        payload TEXT NOT NULL,
        applied_at TEXT NOT NULL,
        UNIQUE (run_id, idempotency_key))""",
    """CREATE TABLE IF NOT EXISTS requests (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        at TEXT NOT NULL,
        operation_id TEXT NOT NULL,
        run_id TEXT NOT NULL,
        idempotency_key TEXT NOT NULL,
        epoch INTEGER NOT NULL,
        result TEXT NOT NULL,
        detail TEXT NOT NULL DEFAULT '')""",
    "CREATE TABLE IF NOT EXISTS sealed (operation_id TEXT PRIMARY KEY, at TEXT NOT NULL, reason TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS pending (
        operation_id TEXT PRIMARY KEY, run_id TEXT NOT NULL, idempotency_key TEXT NOT NULL, started_at TEXT NOT NULL)""",
    "CREATE TABLE IF NOT EXISTS faults (idempotency_key TEXT PRIMARY KEY, mode TEXT NOT NULL, delay_s REAL NOT NULL)",
)


def _now() -> str:
    return clock.now().isoformat()


# --- records -----------------------------------------------------------------------------------


class LedgerRecords:
    """The service's SQLite file; every method is one transaction."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / DB_NAME
        Path(directory).mkdir(parents=True, exist_ok=True)
        with self.tx() as conn:
            for statement in _SCHEMA:
                conn.execute(statement)
        self.fence = FenceGuard(self.path)

    def connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout = 30000")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        return conn

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (BEGIN IMMEDIATE: writers queue up, nobody interleaves)."""
        conn = self.connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        finally:
            conn.close()

    def log(self, conn: sqlite3.Connection, request: ApplyRequest, result: str, detail: str = "") -> None:
        conn.execute(
            "INSERT INTO requests (at, operation_id, run_id, idempotency_key, epoch, result, detail) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (_now(), request.operation_id, request.fencing_token.run_id, request.idempotency_key,
             request.fencing_token.epoch, result, detail),
        )

    def take_fault(self, key: str) -> tuple[str, float] | None:
        with self.tx() as conn:
            row = conn.execute("SELECT mode, delay_s FROM faults WHERE idempotency_key = ?", (key,)).fetchone()
            if row is not None:
                conn.execute("DELETE FROM faults WHERE idempotency_key = ?", (key,))
        return None if row is None else (str(row[0]), float(row[1]))


# --- the service -------------------------------------------------------------------------------


class TokenBody(BaseModel):
    run_id: str = Field(min_length=1)
    epoch: int = Field(ge=0)


class ApplyRequest(BaseModel):
    operation_id: str = Field(min_length=1)
    idempotency_key: str = Field(min_length=1)
    fencing_token: TokenBody
    payload: dict[str, JsonValue]
    capability: str | None = Field(default=None, repr=False)


class FenceRequest(BaseModel):
    run_id: str = Field(min_length=1)
    epoch: int = Field(ge=0)


class FaultRequest(BaseModel):
    idempotency_key: str = Field(min_length=1)
    mode: FaultMode
    delay_s: float = Field(default=2.0, ge=0.0, le=30.0)


def _refuse(status: int, error: str, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse(status_code=status, content={"error": error, "message": message, **extra})


def create_app(directory: Path, guard: TargetGuard | None = None) -> FastAPI:
    """The ledger service over the records in `directory`; with `guard`, it checks capabilities itself."""
    records = LedgerRecords(directory)
    app = FastAPI(title="baton ledger target")

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/faults")
    def add_fault(body: FaultRequest) -> dict[str, str]:
        with records.tx() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO faults (idempotency_key, mode, delay_s) VALUES (?, ?, ?)",
                (body.idempotency_key, body.mode, body.delay_s),
            )
        return {"status": "armed"}

    @app.post("/fence")
    def fence(body: FenceRequest) -> dict[str, Any]:
        mark = records.fence.advance(FencingToken(body.run_id, body.epoch))
        return {"run_id": body.run_id, "epoch": mark}

    @app.post("/apply", response_model=None)
    def apply(body: ApplyRequest) -> dict[str, Any] | JSONResponse:
        token = FencingToken(body.fencing_token.run_id, body.fencing_token.epoch)
        if guard is not None:
            try:
                guard.admit(body.capability, run_id=token.run_id, epoch=token.epoch,
                            idempotency_key=body.idempotency_key, payload=body.payload)
            except CapabilityError as exc:
                with records.tx() as conn:
                    records.log(conn, body, f"capability:{exc.reason}", str(exc))
                return _refuse(403, f"capability:{exc.reason}", str(exc))
        fault = records.take_fault(body.idempotency_key)
        if fault is not None and fault[0] == "hang_then_abort":
            return _hang_then_abort(body, fault[1])
        payload_ref = ref_of(body.payload)
        with records.tx() as conn:
            if conn.execute("SELECT 1 FROM sealed WHERE operation_id = ?", (body.operation_id,)).fetchone():
                records.log(conn, body, "sealed")
                return _refuse(409, "sealed", f"operation {body.operation_id} was already declared NOT_COMMITTED")
            try:
                records.fence.admit(token, conn)
            except FencedTokenError as exc:
                records.log(conn, body, "fenced", f"highest epoch seen {exc.highest_seen}")
                return _refuse(409, "fenced", str(exc), highest_epoch=exc.highest_seen)
            row = conn.execute(
                "SELECT seq, operation_id, payload_ref FROM effects WHERE run_id = ? AND idempotency_key = ?",
                (token.run_id, body.idempotency_key),
            ).fetchone()
            if row is not None:
                if row[2] != payload_ref:
                    records.log(conn, body, "payload_mismatch")
                    return _refuse(
                        409, "payload_mismatch",
                        f"key {body.idempotency_key!r} was applied with payload {row[2]}, not {payload_ref}",
                    )
                records.log(conn, body, "replayed", f"applied as {row[1]}")
                return {"status": "replayed", "operation_id": row[1], "seq": int(row[0]), "receipt": f"ledger-{row[0]}"}
            if fault is not None and fault[0] == "reject":
                records.log(conn, body, "rejected", "fault: reject")
                return _refuse(422, "rejected", "the ledger refused this request (injected fault)")
            cursor = conn.execute(
                "INSERT INTO effects (operation_id, run_id, idempotency_key, epoch, payload_ref, payload, applied_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (body.operation_id, token.run_id, body.idempotency_key, token.epoch, payload_ref,
                 json.dumps(body.payload, sort_keys=True), _now()),
            )
            seq = int(cursor.lastrowid or 0)
            records.log(conn, body, "applied")
        if fault is not None and fault[0] == "commit_then_timeout":
            time.sleep(fault[1])
        return {"status": "applied", "operation_id": body.operation_id, "seq": seq, "receipt": f"ledger-{seq}"}

    def _hang_then_abort(body: ApplyRequest, delay_s: float) -> JSONResponse:
        with records.tx() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO pending (operation_id, run_id, idempotency_key, started_at) VALUES (?, ?, ?, ?)",
                (body.operation_id, body.fencing_token.run_id, body.idempotency_key, _now()),
            )
        time.sleep(delay_s)
        with records.tx() as conn:
            conn.execute("DELETE FROM pending WHERE operation_id = ?", (body.operation_id,))
            conn.execute(
                "INSERT OR IGNORE INTO sealed (operation_id, at, reason) VALUES (?, ?, 'aborted')",
                (body.operation_id, _now()),
            )
            records.log(conn, body, "aborted", "fault: hang_then_abort")
        return _refuse(503, "aborted", "the ledger dropped this request without applying it (injected fault)")

    @app.get("/operations/{operation_id}")
    def lookup(operation_id: str) -> dict[str, str]:
        with records.tx() as conn:
            if conn.execute("SELECT 1 FROM effects WHERE operation_id = ?", (operation_id,)).fetchone():
                state = OperationState.COMMITTED
            elif conn.execute("SELECT 1 FROM pending WHERE operation_id = ?", (operation_id,)).fetchone():
                state = OperationState.UNKNOWN
            else:
                # Never seen, or dropped: seal the id so a late copy of the request cannot commit it.
                conn.execute(
                    "INSERT OR IGNORE INTO sealed (operation_id, at, reason) VALUES (?, ?, 'looked up')",
                    (operation_id, _now()),
                )
                state = OperationState.NOT_COMMITTED
        return {"operation_id": operation_id, "state": state.value}

    @app.get("/effects")
    def effects() -> list[dict[str, Any]]:
        return [effect.model_dump() for effect in read_effects(directory)]

    @app.get("/requests")
    def requests() -> list[dict[str, Any]]:
        return read_requests(directory)

    return app


# --- reading the records directly --------------------------------------------------------------


def _read(directory: Path, sql: str) -> list[tuple[Any, ...]]:
    path = Path(directory) / DB_NAME
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30.0)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def read_effects(directory: Path) -> list[TargetEffect]:
    """The side effects in the ledger, in the order the service applied them."""
    rows = _read(directory, "SELECT seq, run_id, idempotency_key, operation_id, epoch FROM effects ORDER BY seq")
    return [
        TargetEffect(seq=int(seq), run_id=run_id, idempotency_key=key, operation_id=op_id, epoch=int(epoch))
        for seq, run_id, key, op_id, epoch in rows
    ]


def read_pending(directory: Path) -> list[str]:
    """Operation ids the service is holding right now (a `hang_then_abort` fault)."""
    return [str(row[0]) for row in _read(directory, "SELECT operation_id FROM pending ORDER BY started_at")]


def read_requests(directory: Path) -> list[dict[str, Any]]:
    """Every apply request the service received and its result, in arrival order."""
    rows = _read(
        directory, "SELECT seq, at, operation_id, run_id, idempotency_key, epoch, result, detail FROM requests ORDER BY seq"
    )
    names = ("seq", "at", "operation_id", "run_id", "idempotency_key", "epoch", "result", "detail")
    return [dict(zip(names, row, strict=True)) for row in rows]


# --- the client adapter ------------------------------------------------------------------------


class LedgerTargetClient:
    """The ledger service as a `MutationTarget` (and `FenceAware`), over httpx."""

    def __init__(self, base_url: str, *, name: str = "ledger", timeout_s: float = 2.0) -> None:
        self.name = name
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout_s)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> LedgerTargetClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def apply(
        self, operation_id: str, idempotency_key: str, fencing_token: FencingToken, payload: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Send one request; return the ledger's receipt, or raise.

        TargetRejectedError means the ledger certainly did not apply it;
        TargetUnavailableError (timeouts, transport errors, 5xx) means nobody knows.
        """
        body = {
            "operation_id": operation_id,
            "idempotency_key": idempotency_key,
            "fencing_token": fencing_token.as_dict(),
            "payload": dict(payload),
            "capability": fencing_token.capability,
        }
        try:
            response = self._http.post("/apply", json=body)
        except httpx.TimeoutException as exc:
            raise TargetUnavailableError(f"{self.name}: no answer in time for {operation_id}: {exc!r}") from exc
        except httpx.TransportError as exc:
            raise TargetUnavailableError(f"{self.name}: transport error for {operation_id}: {exc!r}") from exc
        if response.status_code == 200:
            return dict(response.json())
        if response.status_code in (403, 409, 422):
            data = response.json()
            reason = str(data.get("error", "rejected"))
            raise TargetRejectedError(
                f"{self.name} refused {operation_id}: {data.get('message', reason)}",
                reason=reason,
                fenced=reason == "fenced",
            )
        raise TargetUnavailableError(f"{self.name}: HTTP {response.status_code} for {operation_id}: {response.text[:200]}")

    def lookup(self, operation_id: str) -> OperationState:
        """The ledger's authoritative state of an operation (UNKNOWN if it cannot be asked)."""
        try:
            response = self._http.get(f"/operations/{operation_id}")
            response.raise_for_status()
            return OperationState(response.json()["state"])
        except (httpx.HTTPError, KeyError, ValueError):
            return OperationState.UNKNOWN

    def advance_fence(self, token: FencingToken) -> int:
        """Tell the ledger that `token.epoch` now rules the run; return its mark."""
        response = self._http.post("/fence", json=token.as_dict())
        response.raise_for_status()
        return int(response.json()["epoch"])

    def inject_fault(self, idempotency_key: str, mode: FaultMode, delay_s: float = 2.0) -> None:
        """Arm one-shot misbehaviour for the next request carrying `idempotency_key`."""
        response = self._http.post("/faults", json={"idempotency_key": idempotency_key, "mode": mode, "delay_s": delay_s})
        response.raise_for_status()

    def effects(self) -> list[TargetEffect]:
        """The ledger's side effects, as the service reports them."""
        response = self._http.get("/effects")
        response.raise_for_status()
        return [TargetEffect.model_validate(item) for item in response.json()]


# --- running it --------------------------------------------------------------------------------


class LedgerTargetProcess:
    """The ledger service as a real subprocess on a free loopback port."""

    def __init__(self, directory: Path, *, trust: Path | None = None, policy: TargetPolicy | None = None) -> None:
        self.directory = Path(directory)
        self.trust = trust
        self.policy = policy
        self._proc: subprocess.Popen[bytes] | None = None
        self.url = ""

    def start(self, timeout_s: float = 30.0) -> LedgerTargetProcess:
        """Start the service and wait until it answers /health."""
        self.directory.mkdir(parents=True, exist_ok=True)
        port_file = self.directory / PORT_FILE
        port_file.unlink(missing_ok=True)
        log = open(self.directory / "service.log", "ab")  # noqa: SIM115 - handed to the child
        command = [sys.executable, "-m", "baton.targets.ledger_target", "--dir", str(self.directory)]
        if self.trust is not None:
            command += (self.policy or TargetPolicy(operation=DEFAULT_OPERATION)).arguments(self.trust)
        self._proc = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"ledger target exited with {self._proc.returncode}; see {self.directory / 'service.log'}")
            if port_file.exists():
                self.url = f"http://127.0.0.1:{int(port_file.read_text())}"
                try:
                    if httpx.get(self.url + "/health", timeout=1.0).status_code == 200:
                        return self
                except httpx.HTTPError:
                    pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"ledger target did not start within {timeout_s}s")

    def client(self, *, name: str = "ledger", timeout_s: float = 2.0) -> LedgerTargetClient:
        """A new client for this service."""
        return LedgerTargetClient(self.url, name=name, timeout_s=timeout_s)

    def effects(self) -> list[TargetEffect]:
        """The side effects, read straight from the service's own file."""
        return read_effects(self.directory)

    def requests(self) -> list[dict[str, Any]]:
        """The request log, read straight from the service's own file."""
        return read_requests(self.directory)

    def pending(self) -> list[str]:
        """Operation ids being held by a fault, read straight from the service's own file."""
        return read_pending(self.directory)

    def stop(self) -> None:
        """Stop the service (SIGTERM, then SIGKILL if it lingers)."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)

    def __enter__(self) -> LedgerTargetProcess:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    """Serve the ledger from `--dir` on a free loopback port, written to `DIR/port`."""
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", required=True, type=Path, help="directory holding the ledger's records")
    add_guard_arguments(parser)
    args = parser.parse_args(argv)
    warn_if_ablated("ledger target")
    directory: Path = args.dir
    app = create_app(directory, guard_from_arguments(args, DEFAULT_OPERATION))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    staging = directory / (PORT_FILE + ".tmp")
    staging.write_text(str(port))
    os.replace(staging, directory / PORT_FILE)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", timeout_graceful_shutdown=1)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
