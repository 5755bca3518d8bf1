"""Gateway throughput: fenced mutations per second with 1, 4 and 8 worker processes on PostgreSQL.

Two kinds of round, each with N concurrent worker processes for a fixed
window, on a fresh PostgreSQL database, side by side in one run:

* gateway: each process opens its own store, `AuthorityService` (one shared
  signing key) and `MutationGateway`, holds the lease of its own run, gets
  one grant for its operation from the authority service (EXTERNAL_MUTATE with
  an approval bound to the artifact), signs each mutation's key-bound
  capability under it (`baton.authority_grants`), and submits mutations with
  fresh idempotency keys as fast as it can. The target is in-process: it applies
  the fencing-token check (refusing an epoch below the highest it has seen
  for the run) and records each effect once per idempotency key in memory.
  So the figure is the gateway and the store (epoch check, capability check,
  idempotency claim, PREPARED and COMMITTED records), not a network service.
  One more process per round is a stale worker: it got its lease and its
  capability, then its run's epoch was advanced under it (a forced grant to
  a successor, as a handoff does) before the round started. It keeps
  submitting through its gateway with the old epoch, paced (20 a second, so it
  costs the measured workers little); every
  one must be refused. Accepted stale mutations are counted and must be zero,
  checked three ways: its submits that returned, the effects its target
  recorded, and the operations the store holds for its run.
* per-key (the baseline, the design before grants): the same, but every
  mutation's capability is one HTTP request to the authority service.
* floor: each process opens one psycopg connection and does, per operation, a
  bare compare-and-set `UPDATE bench_fence SET epoch = epoch WHERE run_id = %s
  AND epoch = %s` (which must match one row) plus an INSERT of one row, then a
  durable COMMIT (synchronous_commit on, fsync on).

Throughput is the operations completed by all processes over the window;
latency is per operation, pooled over the processes. Rounds alternate which
kind goes first at each repetition, so drift touches both alike.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import shutil
import statistics
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from baton.bench.measure import percentile
from baton.bench.pg import NoPostgres, fresh_database, postgres_server

Kind = Literal["gateway", "floor", "per-key"]
Capabilities = Literal["grant", "per-key"]
"""How a bench worker gets each mutation's capability: signed locally under one grant (the default), or
one HTTP request to the authority per idempotency key (the design before; the baseline kind of round)."""

DEFAULT_CONCURRENCY: tuple[int, ...] = (1, 4, 8)
DEFAULT_DURATION_S = 5.0
DEFAULT_REPEAT = 2
WARMUP_OPS = 20
STALE_PACE_S = 0.05
TARGET_RATIO = 0.40
TARGET_NAME = "bench-target"
OPERATION = "deploy"
_READY_TIMEOUT_S = 180.0
_RESULT_TIMEOUT_S = 120.0


def artifact_hash() -> str:
    from baton.identity import sha256_ref

    return sha256_ref(b"baton bench gateway: the artifact every mutation deploys")


# ---------------------------------------------------------------------------- the in-process target


class InProcessFencedTarget:
    """A mutation target in the worker's own memory: fencing-token check, one effect per idempotency key."""

    name = TARGET_NAME

    def __init__(self) -> None:
        self.highest: dict[str, int] = {}
        self.by_key: dict[tuple[str, str], str] = {}
        self.effects: list[tuple[str, str, str, int]] = []  # run, key, operation, epoch

    def apply(self, operation_id: str, idempotency_key: str, fencing_token: Any, payload: Mapping[str, Any]) -> dict[str, Any]:
        from baton.errors import TargetRejectedError

        run_id, epoch = fencing_token.run_id, fencing_token.epoch
        mark = self.highest.get(run_id, -1)
        if epoch < mark:
            raise TargetRejectedError(f"run {run_id!r}: epoch {epoch} is below {mark}", reason="fenced", fenced=True)
        self.highest[run_id] = max(mark, epoch)
        slot = (run_id, idempotency_key)
        if slot in self.by_key:
            return {"status": "replayed", "operation_id": self.by_key[slot]}
        self.by_key[slot] = operation_id
        self.effects.append((run_id, idempotency_key, operation_id, epoch))
        return {"status": "applied", "operation_id": operation_id}

    def lookup(self, operation_id: str) -> Any:
        from baton.models import OperationState

        applied = any(effect[2] == operation_id for effect in self.effects)
        return OperationState.COMMITTED if applied else OperationState.NOT_COMMITTED

    def advance_fence(self, token: Any) -> int:
        self.highest[token.run_id] = max(self.highest.get(token.run_id, -1), token.epoch)
        return self.highest[token.run_id]


# ---------------------------------------------------------------------------- worker processes


def gateway_placement() -> Any:
    from baton.models import AuthorityLevel, EnvironmentIdentity, Placement

    return Placement(
        name="bench-gateway", region="local", provider="local", authority_ceiling=AuthorityLevel.EXTERNAL_MUTATE,
        environment=EnvironmentIdentity(placement="bench-gateway", region="local", provider="local",
                                        runtime_image="python:3.11"),
    )


@contextmanager
def bench_authority(db_url: str, scratch: Path) -> Iterator[Callable[[str, str], dict[str, str]]]:
    """The authority service as its own process over `db_url` (keys in a new directory under `scratch`).

    Yields `access(owner, run_id)`: what one bench worker needs from its
    supervisor (this parent): the service URL, a secret provisioned for
    `owner`, and an approval for the bench artifact signed with the approver's key.
    """
    import datetime as dt

    from baton.approval_signing import sign_approval
    from baton.authority_http import APPROVER_DIR, AuthorityServiceProcess
    from baton.authority_keys import KeyRing
    from baton.models import Approval, AuthorityLevel
    from baton.placements import dump_placements

    keys = Path(tempfile.mkdtemp(prefix="authority-", dir=scratch))
    dump_placements([gateway_placement()], keys.parent / f"{keys.name}-placements.json")
    with AuthorityServiceProcess(keys, db_url, catalog=keys.parent / f"{keys.name}-placements.json") as process:
        approver = KeyRing.load(keys / APPROVER_DIR).active

        def access(owner: str, run_id: str) -> dict[str, str]:
            approval = Approval(approval_id=f"approval-{run_id}", operation=OPERATION, artifact_hash=artifact_hash(),
                                level=AuthorityLevel.EXTERNAL_MUTATE, approved_by="bench",
                                expires_at=dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=2))
            return {"authority_url": process.url, "secret": process.provision(owner),
                    "approval": sign_approval(approval, approver).model_dump_json()}

        yield access


def open_gateway(url: str, run_id: str, owner: str, access: dict[str, str], capabilities: Capabilities = "grant",
                 ) -> tuple[Any, Any, InProcessFencedTarget, Any, Callable[[str], str]]:
    """A worker's store, gateway (verifying with public keys) and target, and how it gets a capability per key.

    The worker holds no signing key. With `capabilities="grant"` it asks the
    authority service over HTTP for one grant (`baton.authority_grants`) and
    signs each mutation's key-bound token under it; with "per-key" every
    mutation's capability is its own HTTP request, bound to its key.
    """
    from baton.authority import CapabilityVerifier
    from baton.authority_delegation import DelegatingAuthorityClient
    from baton.authority_http import CapabilityRequest, HttpAuthorityClient
    from baton.gateway import MutationGateway
    from baton.models import Approval, AuthorityContext, AuthorityLevel
    from baton.store.factory import open_store

    store = open_store(url, migrate=False)
    if capabilities not in ("grant", "per-key"):
        raise ValueError(f"capabilities must be 'grant' or 'per-key', not {capabilities!r}")
    http = HttpAuthorityClient(access["authority_url"], caller=owner, secret=access["secret"])
    authority = DelegatingAuthorityClient(http) if capabilities == "grant" else http
    target = InProcessFencedTarget()
    gateway = MutationGateway(store, CapabilityVerifier(authority.trusted_keys()), {TARGET_NAME: target})
    lease = store.get_lease(run_id)
    if lease.owner != owner:
        raise RuntimeError(f"run {run_id} is held by {lease.owner!r}, not {owner!r}")
    context = AuthorityContext(level=AuthorityLevel.EXTERNAL_MUTATE, policy_id="bench-policy",
                               approvals=(Approval.model_validate_json(access["approval"]),))
    ask = CapabilityRequest(run_id=run_id, epoch=lease.epoch, owner=owner, operation=OPERATION,
                            artifact_hash=artifact_hash(), level=AuthorityLevel.EXTERNAL_MUTATE,
                            placement=gateway_placement().name, context=context)

    def issue(key: str) -> str:
        return str(authority.request(ask.model_copy(update={"idempotency_key": key})).token)

    return store, gateway, target, lease, issue


def mutation(run_id: str, epoch: int, token: str, key: str, n: int, owner: str) -> Any:
    from baton.gateway import MutationRequest

    return MutationRequest(
        run_id=run_id, epoch=epoch, operation=OPERATION, idempotency_key=key, target=TARGET_NAME,
        payload={"release": "bench", "n": n}, artifact_hash=artifact_hash(), capability=token, process=owner,
    )


def backend_cpu_s(pid: int | None) -> float | None:
    """CPU seconds (user + system) a PostgreSQL backend process has used, from /proc; None if unreadable."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


class CpuMeter:
    """CPU used by this process and by its PostgreSQL backend between `start` and `stop`."""

    def __init__(self, backend_pid: int | None) -> None:
        self.backend_pid = backend_pid
        self.client_s = 0.0
        self.server_s: float | None = None

    def start(self) -> None:
        self._client0, self._server0 = time.process_time(), backend_cpu_s(self.backend_pid)

    def stop(self) -> None:
        self.client_s = time.process_time() - self._client0
        server = backend_cpu_s(self.backend_pid)
        self.server_s = None if server is None or self._server0 is None else server - self._server0


def _wait_start(go: Any, start_at: Any) -> float:
    if not go.wait(_READY_TIMEOUT_S):
        raise RuntimeError("never told to start")
    start = float(start_at.value)
    delay = start - time.monotonic()
    if delay > 0:
        time.sleep(delay)
    return start


def gateway_worker(spec: dict[str, Any], ready: Any, go: Any, start_at: Any, results: Any) -> None:
    """One gateway process (spawned): set up, report ready, then submit until the window closes."""
    owner = spec["owner"]
    try:
        capabilities = spec.get("capabilities", "grant")
        store, gateway, target, lease, issue = open_gateway(spec["url"], spec["run_id"], owner, spec["access"],
                                                            capabilities)
        run_id, epoch = spec["run_id"], lease.epoch
        stale = bool(spec.get("stale"))
        # The stale worker keeps what it got before it was fenced: one capability, or a grant it signs under.
        held = issue(f"{owner}:0")
        if not stale:
            for n in range(spec.get("warmup", WARMUP_OPS)):
                key = f"{owner}:warm:{n}"
                gateway.submit(mutation(run_id, epoch, issue(key), key, n, owner))
        # SQLite has no server process: its work is in this one, counted as client CPU.
        pid = None if spec.get("backend") == "sqlite" else int(store.execute_raw("SELECT pg_backend_pid()")[0][0])
        ready.put(("ready", owner))
        start = _wait_start(go, start_at)
        deadline = start + spec["duration_s"]
        meter = CpuMeter(pid)
        meter.start()
        latencies: list[float] = []
        accepted = refused = 0
        n = 0
        clock = time.perf_counter
        from baton.errors import FencedTokenError, StaleEpochError

        while time.monotonic() < deadline:
            key = f"{owner}:{n}"
            began = clock()
            if stale:
                token = issue(key) if capabilities == "grant" else held  # a fully valid token but for its epoch
                try:
                    gateway.submit(mutation(run_id, epoch, token, key, n, owner))
                    accepted += 1
                except (StaleEpochError, FencedTokenError):
                    refused += 1
                n += 1
                time.sleep(STALE_PACE_S)
                continue
            request = mutation(run_id, epoch, issue(key), key, n, owner)  # asking the authority is part of the cost
            result = gateway.submit(request)
            latencies.append((clock() - began) * 1000)
            if result.replayed or result.operation_id != target.effects[-1][2]:
                raise RuntimeError(f"key {request.idempotency_key} was not freshly applied: {result}")
            n += 1
        ended = time.monotonic()
        meter.stop()
        stale_effects = sum(1 for effect in target.effects if effect[3] < store.current_epoch(run_id))
        results.put(("done", owner, {
            "owner": owner, "run_id": run_id, "stale": stale, "count": len(latencies), "latencies_ms": latencies,
            "start": start, "end": ended, "accepted_stale": accepted, "refused_stale": refused,
            "effects": len(target.effects), "stale_effects": stale_effects,
            "client_cpu_s": meter.client_s, "server_cpu_s": meter.server_s,
        }))
        store.close()
    except BaseException:
        results.put(("error", owner, traceback.format_exc()))


FLOOR_TABLES = (
    "CREATE TABLE bench_fence (run_id TEXT PRIMARY KEY, epoch BIGINT NOT NULL)",
    "CREATE TABLE bench_ops (run_id TEXT NOT NULL, op_key TEXT NOT NULL, n BIGINT NOT NULL, "
    "PRIMARY KEY (run_id, op_key))",
)
FLOOR_CAS = "UPDATE bench_fence SET epoch = epoch WHERE run_id = %s AND epoch = %s"
FLOOR_INSERT = "INSERT INTO bench_ops (run_id, op_key, n) VALUES (%s, %s, %s)"


def floor_op(conn: Any, run_id: str, epoch: int, key: str, n: int) -> None:
    """One floor operation: compare-and-set on the epoch row, one INSERT, a durable commit."""
    with conn.cursor() as cur:
        cur.execute(FLOOR_CAS, (run_id, epoch))
        if cur.rowcount != 1:
            raise RuntimeError(f"compare-and-set on {run_id} at epoch {epoch} matched {cur.rowcount} rows")
        cur.execute(FLOOR_INSERT, (run_id, key, n))
    conn.commit()


@contextmanager
def warm_floor(url: str, warmup: int = 20) -> Iterator[Any]:
    """A connection ready for `floor_op` on run "floor" at epoch 1: floor tables made, `warmup` operations done."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for statement in FLOOR_TABLES:
            conn.execute(statement)
        conn.execute("INSERT INTO bench_fence (run_id, epoch) VALUES ('floor', 1)")
    with psycopg.connect(url, autocommit=False) as conn:
        for n in range(warmup):
            floor_op(conn, "floor", 1, f"warm:{n}", n)
        yield conn


def lease_bench_run(url: str, run_id: str, owner: str) -> int:
    """Create a deploy run in the store at `url` and lease it to `owner`; the lease's epoch."""
    from baton.catalog.releases import RELEASES
    from baton.models import RunKind
    from baton.ownership import Coordinator
    from baton.store.factory import open_store

    store = open_store(url)
    try:
        store.create_run(run_id, RunKind.DEPLOY, RELEASES["model-v7"].release_id, "bench-gateway")
        lease = Coordinator(store, name="bench-scheduler").grant(run_id, owner, ttl_s=3600)
        if lease is None:
            raise RuntimeError(f"could not lease {run_id} to {owner}")
        return lease.epoch
    finally:
        store.close()


def floor_worker(spec: dict[str, Any], ready: Any, go: Any, start_at: Any, results: Any) -> None:
    """One floor process (spawned): a psycopg connection doing bare CAS + INSERT + COMMIT."""
    import psycopg

    owner = spec["owner"]
    try:
        conn = psycopg.connect(spec["url"], autocommit=False)
        run_id, epoch = spec["run_id"], 1
        for n in range(spec.get("warmup", WARMUP_OPS)):
            floor_op(conn, run_id, epoch, f"warm:{n}", n)
        meter = CpuMeter(conn.info.backend_pid)
        ready.put(("ready", owner))
        start = _wait_start(go, start_at)
        deadline = start + spec["duration_s"]
        meter.start()
        latencies: list[float] = []
        clock = time.perf_counter
        n = 0
        while time.monotonic() < deadline:
            began = clock()
            floor_op(conn, run_id, epoch, str(n), n)
            latencies.append((clock() - began) * 1000)
            n += 1
        ended = time.monotonic()
        meter.stop()
        conn.close()
        results.put(("done", owner, {
            "owner": owner, "run_id": run_id, "stale": False, "count": len(latencies), "latencies_ms": latencies,
            "start": start, "end": ended, "accepted_stale": 0, "refused_stale": 0, "effects": len(latencies),
            "stale_effects": 0, "client_cpu_s": meter.client_s, "server_cpu_s": meter.server_s,
        }))
    except BaseException:
        results.put(("error", owner, traceback.format_exc()))


# ---------------------------------------------------------------------------- rounds


@dataclass(frozen=True)
class RoundResult:
    kind: Kind
    concurrency: int
    repetition: int
    duration_s: float
    ops: int
    throughput: float  # operations per second over the window
    latencies_ms: tuple[float, ...]
    stale_attempts: int = 0
    stale_accepted: int = 0  # stale submits that returned instead of raising
    stale_effects: int = 0  # effects the stale worker's target recorded
    stale_in_store: int = 0  # operations the store holds for the stale run
    stale_rejected_events: int = 0
    checks: tuple[str, ...] = ()  # what was verified after the round
    client_cpu_ms_per_op: float = float("nan")  # worker processes' own CPU, per operation
    server_cpu_ms_per_op: float = float("nan")  # their PostgreSQL backends' CPU, per operation (nan: unreadable)

    @property
    def p50_ms(self) -> float:
        return percentile(self.latencies_ms, 50)

    @property
    def p99_ms(self) -> float:
        return percentile(self.latencies_ms, 99)


class RoundFailed(RuntimeError):
    pass


def _spawn(
    worker: Callable[..., None], specs: Sequence[dict[str, Any]], before_go: Callable[[], None] | None = None
) -> list[dict[str, Any]]:
    """Start one spawned process per spec, wait until all are ready, start them together, collect results."""
    ctx = multiprocessing.get_context("spawn")
    ready, results = ctx.Queue(), ctx.Queue()
    go = ctx.Event()
    start_at = ctx.Value("d", 0.0)
    procs = [ctx.Process(target=worker, args=(spec, ready, go, start_at, results), daemon=True) for spec in specs]
    for proc in procs:
        proc.start()
    try:
        waiting = {spec["owner"] for spec in specs}
        deadline = time.monotonic() + _READY_TIMEOUT_S
        while waiting:
            _check_errors(results)
            try:
                _, owner = ready.get(timeout=0.5)
                waiting.discard(owner)
            except queue.Empty:
                if time.monotonic() > deadline or any(not p.is_alive() for p in procs):
                    _check_errors(results)
                    raise RoundFailed(f"worker processes not ready: {sorted(waiting)}")
        if before_go is not None:
            before_go()
        start_at.value = time.monotonic() + 0.2
        go.set()
        collected: list[dict[str, Any]] = []
        end = time.monotonic() + max(spec["duration_s"] for spec in specs) + _RESULT_TIMEOUT_S
        while len(collected) < len(specs):
            try:
                status, owner, payload = results.get(timeout=max(0.1, end - time.monotonic()))
            except queue.Empty as exc:
                raise RoundFailed("worker processes did not report in time") from exc
            if status == "error":
                raise RoundFailed(f"worker {owner} failed:\n{payload}")
            collected.append(payload)
        return collected
    finally:
        for proc in procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5)


def _check_errors(results: Any) -> None:
    try:
        status, owner, payload = results.get_nowait()
    except queue.Empty:
        return
    if status == "error":
        raise RoundFailed(f"worker {owner} failed:\n{payload}")
    raise RoundFailed(f"worker {owner} reported before the round started")


def _summarize(kind: Kind, concurrency: int, repetition: int, duration_s: float,
               reports: Sequence[dict[str, Any]], **extra: Any) -> RoundResult:
    workers = [r for r in reports if not r["stale"]]
    start = min(r["start"] for r in workers)
    window = max(r["end"] for r in workers) - start
    ops = sum(r["count"] for r in workers)
    latencies = tuple(round(ms, 4) for r in workers for ms in r["latencies_ms"])
    client = sum(r["client_cpu_s"] for r in workers) / ops * 1000 if ops else float("nan")
    servers = [r["server_cpu_s"] for r in workers]
    server = sum(servers) / ops * 1000 if ops and all(v is not None for v in servers) else float("nan")
    return RoundResult(kind, concurrency, repetition, duration_s, ops, ops / window, latencies,
                       client_cpu_ms_per_op=client, server_cpu_ms_per_op=server, **extra)


def floor_round(server_url: str, concurrency: int, duration_s: float, repetition: int = 0,
                warmup: int = WARMUP_OPS) -> RoundResult:
    import psycopg

    with fresh_database(server_url, prefix="gwfloor") as db:
        with psycopg.connect(db.url, autocommit=True) as conn:
            for statement in FLOOR_TABLES:
                conn.execute(statement)
            for index in range(concurrency):
                conn.execute("INSERT INTO bench_fence (run_id, epoch) VALUES (%s, 1)", (f"floor-{index}",))
        specs = [{"url": db.url, "run_id": f"floor-{i}", "owner": f"floor-{i}", "duration_s": duration_s,
                  "warmup": warmup} for i in range(concurrency)]
        reports = _spawn(floor_worker, specs)
        with psycopg.connect(db.url, autocommit=True) as conn:
            row = conn.execute("SELECT count(*) FROM bench_ops").fetchone()
        recorded = int(row[0]) if row else -1
        done = sum(r["count"] for r in reports) + warmup * concurrency
        if recorded != done:
            raise RoundFailed(f"floor: {recorded} rows stored, {done} operations reported")
        return _summarize("floor", concurrency, repetition, duration_s, reports,
                          checks=(f"{recorded} rows stored = operations reported",))


@dataclass(frozen=True)
class SqliteDatabase:
    """A fresh SQLite store file (what `gateway_round` uses for the SQLite backend)."""

    url: str


@contextmanager
def sqlite_database(scratch: Path) -> Iterator[SqliteDatabase]:
    directory = Path(tempfile.mkdtemp(prefix="gwbench-sqlite-", dir=scratch))
    try:
        yield SqliteDatabase(f"sqlite:///{directory / 'baton.db'}")
    finally:
        shutil.rmtree(directory, True)


def gateway_round(server_url: str, concurrency: int, duration_s: float, scratch: Path, repetition: int = 0,
                  warmup: int = WARMUP_OPS, backend: Literal["postgresql", "sqlite"] = "postgresql",
                  capabilities: Capabilities = "grant") -> RoundResult:
    """One gateway round on a fresh database: PostgreSQL on `server_url`, or a SQLite file (`server_url` unused).

    Its kind is "gateway" with `capabilities="grant"`, "per-key" with one authority request per mutation.
    """
    from baton.catalog.releases import RELEASES
    from baton.models import EventType, RunKind
    from baton.ownership import Coordinator
    from baton.store.factory import open_store

    release = RELEASES["model-v7"].release_id
    database = sqlite_database(scratch) if backend == "sqlite" else fresh_database(server_url, prefix="gwbench")
    with database as db, ExitStack() as stack:
        store = open_store(db.url)
        stack.callback(store.close)
        coordinator = Coordinator(store, name="bench-scheduler")
        access = stack.enter_context(bench_authority(db.url, scratch))
        specs = []
        for index in range(concurrency):
            run_id, owner = f"gw-run-{index}", f"worker-{index}"
            store.create_run(run_id, RunKind.DEPLOY, release, "bench-gateway")
            assert coordinator.grant(run_id, owner, ttl_s=3600) is not None
            specs.append({"url": db.url, "run_id": run_id, "owner": owner, "access": access(owner, run_id),
                          "duration_s": duration_s, "warmup": warmup, "backend": backend,
                          "capabilities": capabilities})
        stale_run = "gw-stale-run"
        store.create_run(stale_run, RunKind.DEPLOY, release, "bench-gateway")
        stale_lease = coordinator.grant(stale_run, "stale-worker", ttl_s=3600)
        assert stale_lease is not None
        specs.append({"url": db.url, "run_id": stale_run, "owner": "stale-worker",
                      "access": access("stale-worker", stale_run),
                      "duration_s": duration_s, "stale": True, "backend": backend, "capabilities": capabilities})

        def advance_stale_epoch() -> None:
            """The stale worker holds its lease and capability: move its run to a successor under it."""
            moved = coordinator.grant(stale_run, "successor", ttl_s=3600, observed_epoch=stale_lease.epoch, force=True,
                                      reason="bench: fence the stale worker")
            assert moved is not None and moved.epoch == stale_lease.epoch + 1

        reports = _spawn(gateway_worker, specs, before_go=advance_stale_epoch)
        checks = []
        for report in reports:
            if report["stale"]:
                continue
            row = store.execute_raw(
                "SELECT count(*) FROM operations WHERE run_id = ? AND state = 'COMMITTED'", (report["run_id"],))
            committed = int(row[0][0])
            expected = report["count"] + warmup
            if committed != expected or report["effects"] != expected:
                raise RoundFailed(f"{report['owner']}: {committed} committed in the store, {report['effects']} target "
                                  f"effects, {expected} mutations reported")
        checks.append("per worker: committed operations in the store = target effects = mutations reported")
        stale = next(r for r in reports if r["stale"])
        in_store = int(store.execute_raw("SELECT count(*) FROM operations WHERE run_id = ?", (stale_run,))[0][0])
        rejected_events = len(store.list_events(run_id=stale_run, event_types=[EventType.STALE_WORKER_REJECTED]))
        attempts = stale["accepted_stale"] + stale["refused_stale"]
        checks.append(f"stale worker: {attempts} attempts, {stale['refused_stale']} refused, "
                      f"{rejected_events} STALE_WORKER_REJECTED events, {in_store} operations in the store, "
                      f"{stale['effects']} target effects")
        return _summarize(
            "gateway" if capabilities == "grant" else "per-key", concurrency, repetition, duration_s, reports,
            stale_attempts=attempts, stale_accepted=stale["accepted_stale"], stale_effects=stale["effects"],
            stale_in_store=in_store, stale_rejected_events=rejected_events, checks=tuple(checks),
        )


# ---------------------------------------------------------------------------- the benchmark


@dataclass(frozen=True)
class LevelResult:
    """Both kinds at one concurrency, over every repetition."""

    concurrency: int
    gateway: tuple[RoundResult, ...]
    floor: tuple[RoundResult, ...]
    per_key: tuple[RoundResult, ...] = ()
    """The baseline: gateway rounds that ask the authority for each mutation's capability."""

    def rounds(self, kind: Kind) -> tuple[RoundResult, ...]:
        return {"gateway": self.gateway, "floor": self.floor, "per-key": self.per_key}[kind]

    @staticmethod
    def _throughput(rounds: Sequence[RoundResult]) -> float:
        return statistics.median(r.throughput for r in rounds) if rounds else float("nan")

    @staticmethod
    def _pooled(rounds: Sequence[RoundResult], q: float) -> float:
        return percentile([ms for r in rounds for ms in r.latencies_ms], q)

    @property
    def gateway_throughput(self) -> float:
        return self._throughput(self.gateway)

    @property
    def floor_throughput(self) -> float:
        return self._throughput(self.floor)

    @property
    def ratio(self) -> float:
        return self.gateway_throughput / self.floor_throughput

    @property
    def per_key_throughput(self) -> float:
        return self._throughput(self.per_key)

    @property
    def per_key_ratio(self) -> float:
        return self.per_key_throughput / self.floor_throughput

    def latency(self, kind: Kind, q: float) -> float:
        return self._pooled(self.rounds(kind), q)

    def ops(self, kind: Kind) -> int:
        return sum(r.ops for r in self.rounds(kind))

    def cpu_ms_per_op(self, kind: Kind) -> tuple[float, float]:
        """(client, server) CPU milliseconds per operation, over every round of `kind`."""
        rounds = self.rounds(kind)
        ops = sum(r.ops for r in rounds)
        if not ops:
            return float("nan"), float("nan")
        return (sum(r.client_cpu_ms_per_op * r.ops for r in rounds) / ops,
                sum(r.server_cpu_ms_per_op * r.ops for r in rounds) / ops)

    @property
    def stale_attempts(self) -> int:
        return sum(r.stale_attempts for r in (*self.gateway, *self.per_key))

    @property
    def stale_accepted(self) -> int:
        return sum(r.stale_accepted + r.stale_effects + r.stale_in_store for r in (*self.gateway, *self.per_key))

    @property
    def target_met(self) -> bool:
        return self.ratio >= TARGET_RATIO


@dataclass(frozen=True)
class GatewayRun:
    concurrency: tuple[int, ...]
    duration_s: float
    repeat: int
    levels: tuple[LevelResult, ...]
    postgres: str
    status: str = "ok"  # "ok", "skipped", "failed"
    reason: str = ""
    profile: Any = None  # a GatewayProfile, when profiled
    server_settings: dict[str, str] = field(default_factory=dict)


def _settings(server_url: str) -> dict[str, str]:
    import psycopg

    names = ("server_version", "fsync", "synchronous_commit", "wal_sync_method", "commit_delay", "shared_buffers",
             "max_connections")
    with psycopg.connect(server_url, autocommit=True) as conn:
        return {name: str(conn.execute(f"SHOW {name}").fetchone()[0]) for name in names}  # type: ignore[index]


def run_gateway_bench(
    concurrency: Sequence[int] = DEFAULT_CONCURRENCY,
    *,
    duration_s: float = DEFAULT_DURATION_S,
    repeat: int = DEFAULT_REPEAT,
    warmup: int = WARMUP_OPS,
    profile_ops: int = 300,
    workdir: Path | None = None,
    progress: Callable[[str], None] | None = None,
    baseline: bool = True,
) -> GatewayRun:
    """Floor and gateway rounds at every concurrency level, `repeat` times each, then (optionally) a profile.

    With `baseline`, each level also has "per-key" rounds (one authority request per mutation, the design
    before grants), interleaved with the others, so before and after are measured in the same run.
    """

    levels = tuple(sorted(set(concurrency)))
    if not levels or levels[0] < 1:
        raise ValueError(f"concurrency levels must be positive, not {concurrency}")
    if repeat < 1:
        raise ValueError(f"repeat must be at least 1, not {repeat}")
    if workdir is not None:
        workdir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="baton-bench-gateway-", dir=workdir))
    with ExitStack() as stack:
        stack.callback(shutil.rmtree, scratch, True)
        try:
            server = stack.enter_context(postgres_server())
        except NoPostgres as exc:
            return GatewayRun(levels, duration_s, repeat, (), str(exc), "skipped", f"skipped: no PostgreSQL ({exc})")
        settings = _settings(server.url)
        rounds: dict[tuple[Kind, int], list[RoundResult]] = {}
        try:
            for repetition in range(repeat):
                for level in levels:
                    kinds: tuple[Kind, ...] = ("floor", "gateway", "per-key") if baseline else ("floor", "gateway")
                    order = kinds if repetition % 2 == 0 else tuple(reversed(kinds))
                    for kind in order:
                        if progress:
                            progress(f"{kind} x{level} (run {repetition + 1}/{repeat})")
                        if kind == "floor":
                            result = floor_round(server.url, level, duration_s, repetition, warmup)
                        else:
                            result = gateway_round(server.url, level, duration_s, scratch, repetition, warmup,
                                                   capabilities="grant" if kind == "gateway" else "per-key")
                        rounds.setdefault((kind, level), []).append(result)
            profile = None
            if profile_ops > 0:
                if progress:
                    progress("profiling one gateway process")
                from baton.bench.gateway_profile import profile_gateway

                profile = profile_gateway(server.url, profile_ops, scratch)
        except RoundFailed as exc:
            return GatewayRun(levels, duration_s, repeat, (), server.origin, "failed", f"failed: {exc}",
                              server_settings=settings)
        results = tuple(
            LevelResult(level, tuple(rounds[("gateway", level)]), tuple(rounds[("floor", level)]),
                        tuple(rounds.get(("per-key", level), ()))) for level in levels
        )
        return GatewayRun(levels, duration_s, repeat, results, server.origin, profile=profile, server_settings=settings)


def run_sqlite_gateway_rounds(
    concurrency: Sequence[int], *, duration_s: float, repeat: int, workdir: Path | None = None,
    warmup: int = WARMUP_OPS,
) -> list[RoundResult]:
    """Gateway rounds on SQLite (no floor: the floor is a bare psycopg loop), `repeat` at each level."""
    if workdir is not None:
        workdir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="baton-bench-gateway-sqlite-", dir=workdir))
    try:
        return [gateway_round("", level, duration_s, scratch, repetition, warmup, backend="sqlite")
                for level in sorted(set(concurrency)) for repetition in range(repeat)]
    finally:
        shutil.rmtree(scratch, True)
