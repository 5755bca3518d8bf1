"""Where a gateway mutation spends its time, and how many round trips it makes.

One process, one run, on a fresh PostgreSQL database: `ops` mutations
through `MutationGateway.submit` with timers around each step (store calls,
capability check, target), counting the store's transactions and statements
per mutation, then once more under cProfile for the functions underneath;
then the same number of floor operations. Round trips are counted as
sent: every statement, plus every BEGIN, COMMIT and ROLLBACK psycopg sends
on its own (it opens a transaction with an explicit BEGIN unless the
connection is in autocommit mode, as the store's one-statement transactions
are); every write transaction ends in a durable commit (a WAL flush). Not
part of the measured benchmark: the timers add their own overhead.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

from baton.bench.pg import fresh_database


@dataclass(frozen=True)
class ProfileStep:
    name: str
    ms_per_op: float
    calls_per_op: float
    transactions_per_op: float
    statements_per_op: float


@dataclass(frozen=True)
class GatewayProfile:
    ops: int
    ms_per_op: float
    steps: tuple[ProfileStep, ...]
    transactions_per_op: float
    write_transactions_per_op: float
    statements_per_op: float
    floor_ms_per_op: float
    top_functions: str = ""  # cProfile of the gateway process, sorted by own time
    floor_statements_per_op: float = 2.0
    floor_transactions_per_op: float = 1.0
    commands_per_op: float | None = None  # BEGIN / COMMIT / ROLLBACK sent on their own; None: not counted

    @property
    def round_trips_per_op(self) -> float:
        """Statements plus the BEGIN and COMMIT commands sent (if not counted: one of each per transaction)."""
        commands = 2 * self.transactions_per_op if self.commands_per_op is None else self.commands_per_op
        return self.statements_per_op + commands

    @property
    def floor_round_trips_per_op(self) -> float:
        return self.floor_statements_per_op + 2 * self.floor_transactions_per_op


class _Counters:
    def __init__(self) -> None:
        self.seconds: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()
        self.tx: Counter[str] = Counter()
        self.stmts: Counter[str] = Counter()
        self.current: str | None = None
        self.transactions = 0
        self.write_transactions = 0
        self.statements = 0
        self.commands = 0  # BEGIN, COMMIT, ROLLBACK sent by psycopg as commands of their own

    def timed(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            outer, self.current = self.current, name
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - start
                self.calls[name] += 1
                self.current = outer

        return wrapper


@contextmanager
def _instrumented(counters: _Counters, gateway: Any) -> Iterator[None]:
    from psycopg._connection_base import BaseConnection

    from baton.store.core import StoreCore, Tx

    original_tx = StoreCore._tx
    original_rows = Tx.rows
    original_command = BaseConnection._exec_command

    @contextmanager
    def tx(self: Any, write: bool = True) -> Iterator[Any]:
        counters.transactions += 1
        counters.write_transactions += int(write)
        if counters.current:
            counters.tx[counters.current] += 1
        with original_tx(self, write) as handle:
            yield handle

    def rows(self: Any, sql: str, params: Any = ()) -> Any:
        counters.statements += 1
        if counters.current:
            counters.stmts[counters.current] += 1
        return original_rows(self, sql, params)

    def command(self: Any, *args: Any, **kwargs: Any) -> Any:
        counters.commands += 1
        return original_command(self, *args, **kwargs)

    store = gateway.store
    steps = {
        "capability, all but expiry (signature cached per token)": (gateway, "_timeless_claims"),
        "epoch + expiry + key claim + PREPARED (store.claim_operation)": (store, "claim_operation"),
        "target.apply (in-process)": (gateway.targets[next(iter(gateway.targets))], "apply"),
        "COMMITTED (store.finish_operation)": (store, "finish_operation"),
        # Only on the step-by-step path (a refused capability, a retry): absent from the table when unused.
        "epoch read (store.current_epoch)": (store, "current_epoch"),
        "database clock (store.db_now)": (store, "db_now"),
    }
    with ExitStack() as stack:
        stack.enter_context(mock.patch.object(StoreCore, "_tx", tx))
        stack.enter_context(mock.patch.object(Tx, "rows", rows))
        stack.enter_context(mock.patch.object(BaseConnection, "_exec_command", command))
        for name, (owner, attr) in steps.items():
            stack.enter_context(mock.patch.object(owner, attr, counters.timed(name, getattr(owner, attr))))
        yield


def profile_gateway(server_url: str, ops: int, scratch: Path, top: int = 15) -> GatewayProfile:
    """Instrumented single-process gateway run (timers, then cProfile) and floor run of `ops` operations each."""
    from baton.bench.gateway_bench import bench_authority, floor_op, lease_bench_run, mutation, open_gateway, warm_floor

    with fresh_database(server_url, prefix="gwprofile") as db, bench_authority(db.url, scratch) as access:
        lease_bench_run(db.url, "profile-run", "profiler")
        store, gateway, _, lease, issue = open_gateway(db.url, "profile-run", "profiler", access("profiler", "profile-run"))
        try:
            for n in range(20):
                gateway.submit(mutation("profile-run", lease.epoch, issue(f"warm:{n}"), f"warm:{n}", n, "profiler"))
            counters = _Counters()
            ask = counters.timed("capability for the key, signed by the worker under its grant (authority_grants)", issue)
            with _instrumented(counters, gateway):
                start = time.perf_counter()
                for n in range(ops):
                    gateway.submit(mutation("profile-run", lease.epoch, ask(f"op:{n}"), f"op:{n}", n, "profiler"))
                total = time.perf_counter() - start
            profiler = cProfile.Profile()
            profiler.enable()
            for n in range(ops):
                gateway.submit(mutation("profile-run", lease.epoch, issue(f"profiled:{n}"), f"profiled:{n}", n,
                                        "profiler"))
            profiler.disable()
        finally:
            store.close()
        with warm_floor(db.url) as conn:
            start = time.perf_counter()
            for n in range(ops):
                floor_op(conn, "floor", 1, str(n), n)
            floor_total = time.perf_counter() - start
    steps = [
        ProfileStep(name, counters.seconds[name] / ops * 1000, counters.calls[name] / ops,
                    counters.tx[name] / ops, counters.stmts[name] / ops)
        for name in sorted(counters.seconds, key=lambda n: -counters.seconds[n])
    ]
    accounted = sum(counters.seconds.values())
    steps.append(ProfileStep("everything else (request model, payload hash, operation entry, history, result)",
                             (total - accounted) / ops * 1000, 0.0, 0.0, 0.0))
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).strip_dirs().sort_stats("tottime").print_stats(top)
    return GatewayProfile(
        top_functions=text.getvalue(),
        ops=ops,
        ms_per_op=total / ops * 1000,
        steps=tuple(steps),
        transactions_per_op=counters.transactions / ops,
        write_transactions_per_op=counters.write_transactions / ops,
        statements_per_op=counters.statements / ops,
        floor_ms_per_op=floor_total / ops * 1000,
        commands_per_op=counters.commands / ops,
    )
