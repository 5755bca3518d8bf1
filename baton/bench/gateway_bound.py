"""How fast the gateway could be: its own statements with no Python around them, plus the signatures it needs.

Issue 16 asks for gateway throughput of at least 0.40 of a bare compare-and-set
with a durable commit (the floor). This measures, one process, side by side on
one PostgreSQL server in one run, what no rewrite of Baton's Python could take
away from a mutation:

* the floor (`gateway_bench.floor_op`);
* the gateway itself (`MutationGateway.submit` with a token signed under the
  worker's grant, as `baton bench gateway` runs it);
* the gateway's statements alone: every statement the store sent for a second
  batch of mutations (SQL and parameters, as psycopg received them), replayed
  in order from one bare psycopg connection in autocommit mode (as the store
  sends them: each one statement, committed durably) into a second database
  set up the same way; the replay must leave every operation COMMITTED;
* Ed25519 signing and verifying of the token's signing input (the worker's
  signature and the gateway's check of it; C only).

For each: wall ms per operation, and CPU ms per operation in this process and
in its PostgreSQL backend. One process waits on each commit, so its ratio is
the wall-time ratio; with every core busy (4 and 8 processes on this 2-core
machine), throughput follows CPU per operation, so the ratio is near the
CPU ratio (`baton bench gateway` measured 0.24 against a CPU ratio of 0.23 at
4 processes, docs/benchmarks.md stop 38). The bound (statements + signatures)
leaves out the request model, the token's JSON and base64, the grant check and
the history, so it is below any gateway that keeps every check.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

from baton.bench.pg import fresh_database

TARGET_RATIO = 0.40
RUN_ID = "bound-run"
OWNER = "bounder"
Statement = tuple[str, tuple[Any, ...]]


@dataclass(frozen=True)
class Cost:
    """Per operation: wall ms, this process's CPU ms, its PostgreSQL backend's CPU ms (0 where none)."""

    wall_ms: float
    client_cpu_ms: float
    backend_cpu_ms: float

    @property
    def cpu_ms(self) -> float:
        return self.client_cpu_ms + self.backend_cpu_ms

    def __add__(self, other: Cost) -> Cost:
        return Cost(self.wall_ms + other.wall_ms, self.client_cpu_ms + other.client_cpu_ms,
                    self.backend_cpu_ms + other.backend_cpu_ms)


@dataclass(frozen=True)
class BoundRound:
    floor: Cost
    gateway: Cost
    statements: Cost
    signatures: Cost
    statements_per_op: float


@dataclass(frozen=True)
class GatewayBound:
    ops: int
    rounds: tuple[BoundRound, ...]

    def median(self, part: str) -> Cost:
        costs = [getattr(r, part) for r in self.rounds]
        return Cost(statistics.median(c.wall_ms for c in costs), statistics.median(c.client_cpu_ms for c in costs),
                    statistics.median(c.backend_cpu_ms for c in costs))

    @property
    def bound(self) -> Cost:
        return self.median("statements") + self.median("signatures")

    @property
    def statements_per_op(self) -> float:
        return statistics.median(r.statements_per_op for r in self.rounds)


@contextmanager
def _measured(backend_pid: int | None, ops: int, out: list[Cost]) -> Iterator[None]:
    from baton.bench.gateway_bench import CpuMeter

    meter = CpuMeter(backend_pid)
    meter.start()
    start = time.perf_counter()
    yield
    wall = time.perf_counter() - start
    meter.stop()
    out.append(Cost(wall / ops * 1000, meter.client_s / ops * 1000, (meter.server_s or 0.0) / ops * 1000))


@contextmanager
def _recording(into: list[Statement]) -> Iterator[None]:
    """Every statement the store runs, rendered for psycopg, with its parameters."""
    from baton.store.core import Tx

    original = Tx.rows

    def rows(self: Tx, sql: str, params: Sequence[Any] = ()) -> Any:
        into.append((self._dialect.render(sql), tuple(params)))  # noqa: SLF001 - what the connection receives
        return original(self, sql, params)

    with mock.patch.object(Tx, "rows", rows):
        yield


def replay(url: str, statements: Sequence[Statement], ops: int, out: list[Cost]) -> None:
    """Send `statements` in order on one bare autocommit connection; every operation must end COMMITTED."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET TIME ZONE 'UTC'; SET jit = off")
        pid = int(conn.info.backend_pid)
        with _measured(pid, ops, out):
            for sql, params in statements:
                conn.execute(sql, params, prepare=True).fetchall()
        committed = conn.execute("SELECT count(*) FROM operations WHERE run_id = %s AND state = 'COMMITTED'",
                                 (RUN_ID,)).fetchone()
    if committed is None or committed[0] != ops:
        raise RuntimeError(f"the replay left {committed} operations COMMITTED, not {ops}: it did not redo the work")


def _signatures(token: str, ops: int, out: list[Cost]) -> None:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from baton.authority_grants import parse_jws

    message = parse_jws(token).signing_input
    key = Ed25519PrivateKey.generate()
    public = key.public_key()
    with _measured(None, ops, out):
        for _ in range(ops):
            public.verify(key.sign(message), message)


def _floor(url: str, ops: int, out: list[Cost]) -> None:
    from baton.bench.gateway_bench import floor_op, warm_floor

    with warm_floor(url) as conn, _measured(int(conn.info.backend_pid), ops, out):
        for n in range(ops):
            floor_op(conn, "floor", 1, str(n), n)


def _round(server_url: str, ops: int, scratch: Path) -> BoundRound:
    from baton.bench.gateway_bench import bench_authority, lease_bench_run, mutation, open_gateway

    floor: list[Cost] = []
    gateway: list[Cost] = []
    statements: list[Cost] = []
    signatures: list[Cost] = []
    recorded: list[Statement] = []
    with fresh_database(server_url, prefix="gwbound") as db, bench_authority(db.url, scratch) as access:
        epoch = lease_bench_run(db.url, RUN_ID, OWNER)
        store, gw, _, _, issue = open_gateway(db.url, RUN_ID, OWNER, access(OWNER, RUN_ID))
        try:
            def submit(key: str, n: int) -> None:
                gw.submit(mutation(RUN_ID, epoch, issue(key), key, n, OWNER))

            for n in range(20):
                submit(f"warm:{n}", n)
            pid = int(store.execute_raw("SELECT pg_backend_pid()")[0][0])
            with _measured(pid, ops, gateway):
                for n in range(ops):
                    submit(f"op:{n}", n)
            tokens = [issue(f"recorded:{n}") for n in range(ops)]
            with _recording(recorded):
                for n, token in enumerate(tokens):
                    gw.submit(mutation(RUN_ID, epoch, token, f"recorded:{n}", n, OWNER))
        finally:
            store.close()
        _floor(db.url, ops, floor)
        _signatures(tokens[0], ops, signatures)
    with fresh_database(server_url, prefix="gwreplay") as target:
        if lease_bench_run(target.url, RUN_ID, OWNER) != epoch:
            raise RuntimeError("the replay database's lease is not at the recorded epoch")
        replay(target.url, recorded, ops, statements)
    return BoundRound(floor[0], gateway[0], statements[0], signatures[0], len(recorded) / ops)


def measure_gateway_bound(server_url: str, ops: int, scratch: Path, *, repeat: int = 3) -> GatewayBound:
    """`repeat` rounds, each on fresh databases of the server at `server_url`."""
    return GatewayBound(ops, tuple(_round(server_url, ops, scratch) for _ in range(repeat)))


def part_rows(bound: GatewayBound) -> tuple[list[str], list[list[str]]]:
    """Each leg's cost per operation (median over rounds)."""
    parts = [
        ("floor: compare-and-set, INSERT, durable COMMIT", bound.median("floor")),
        (f"the gateway's statements alone, replayed ({bound.statements_per_op:g} per mutation)",
         bound.median("statements")),
        ("Ed25519: the worker signs the token, the gateway verifies it (C only)", bound.median("signatures")),
        ("bound: statements + signatures", bound.bound),
        ("the gateway: MutationGateway.submit, token signed under the grant", bound.median("gateway")),
    ]
    header = ["leg", "wall ms / op", "client CPU ms / op", "backend CPU ms / op", "CPU ms / op"]
    return header, [[name, f"{c.wall_ms:.3f}", f"{c.client_cpu_ms:.3f}", f"{c.backend_cpu_ms:.3f}", f"{c.cpu_ms:.3f}"]
                    for name, c in parts]


def ratio_rows(bound: GatewayBound) -> tuple[list[str], list[list[str]]]:
    """Floor / leg, by wall time (one process) and by CPU (every core busy), against the 0.40 target."""
    floor = bound.median("floor")
    header = ["leg", "one process: floor / leg (wall)", "cores busy: floor / leg (CPU)", f"≥ {TARGET_RATIO:.2f}"]
    rows = []
    for name, cost in (("bound: statements + signatures", bound.bound), ("the gateway", bound.median("gateway"))):
        wall, cpu = floor.wall_ms / cost.wall_ms, floor.cpu_ms / cost.cpu_ms
        met = "both" if min(wall, cpu) >= TARGET_RATIO else "one process only" if wall >= TARGET_RATIO else (
            "cores busy only" if cpu >= TARGET_RATIO else "NO")
        rows.append([name, f"{wall:.2f}", f"{cpu:.2f}", met])
    return header, rows
