"""Where a Baton checkpoint step spends its time.

Runs the Baton leg once with timers around the functions a step goes
through (restored afterwards), so the split is in wall-clock milliseconds
per step, then once more under cProfile for the functions underneath. Used to
explain a missed target in docs/benchmarks.md; not part of the measured
benchmark, because the timers and the profiler add their own overhead.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast
from unittest import mock

from baton.bench import ckpt_baton, ckpt_sdk
from baton.bench.leg import LegInput
from baton.bench.pg import fresh_database, postgres_server
from baton.bench.trajectory import Trajectory


@dataclass(frozen=True)
class Phase:
    name: str
    ms_per_step: float
    calls_per_step: float
    share: float
    transactions_per_step: float = 0.0  # store transactions opened inside this phase
    statements_per_step: float = 0.0  # SQL statements executed inside this phase


@dataclass(frozen=True)
class StepProfile:
    backend: str
    blobs: str
    steps: int
    ms_per_step: float
    phases: tuple[Phase, ...]
    top_functions: str  # pstats text, sorted by internal time


class _Timers:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: Counter[str] = Counter()
        self.transactions: Counter[str] = Counter()
        self.statements: Counter[str] = Counter()
        self.current = "everything else"
        self.in_step = False  # counts only inside timed steps (not the leg's setup or its final check)
        self._inner = 0.0  # time spent in timed calls nested inside the current one

    def timed(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """`fn`, its own time (less any timed call inside it) added to `name`."""
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            outer, self.current = self.current, name
            inner_before = self._inner
            self._inner = 0.0
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent = time.perf_counter() - start
                self.seconds[name] = self.seconds.get(name, 0.0) + spent - self._inner
                self._inner = inner_before + spent
                self.calls[name] += 1
                self.current = outer

        return wrapper


@contextmanager
def _instrumented(timers: _Timers) -> Iterator[None]:
    import baton.checkpoints as checkpoints
    from baton.models import ExecutionCheckpoint
    from baton.store.base import SqlStore
    from baton.store.blobs import BlobStore
    from baton.store.core import StoreCore, Tx
    from baton.store.sql_blobs import SqlBlobStore

    import baton.runtime.sdk as sdk
    from baton.handoff.quiesce import HandoffWatch

    original_tx, original_rows, original_send = StoreCore._tx, Tx.rows, Tx.send
    original_rows_later = Tx.rows_later

    @contextmanager
    def counted_tx(store: Any, write: bool = True) -> Iterator[Any]:
        timers.transactions[timers.current] += int(timers.in_step)
        with original_tx(store, write) as handle:
            yield handle

    def counted_rows(handle: Any, sql: str, params: Any = ()) -> Any:
        timers.statements[timers.current] += int(timers.in_step)
        return original_rows(handle, sql, params)

    def counted_send(handle: Any, sql: str, params: Any = ()) -> None:
        # a statement whose result nobody reads: pipelined on PostgreSQL, so it costs no round trip of its own
        timers.statements[timers.current] += int(timers.in_step)
        original_send(handle, sql, params)

    def counted_rows_later(handle: Any, sql: str, params: Any = ()) -> Any:
        # queued where writes are pipelined; elsewhere it reads through `Tx.rows`, which counts it
        if handle._after_execute is not None:
            timers.statements[timers.current] += int(timers.in_step)
        return original_rows_later(handle, sql, params)

    original_seal = ExecutionCheckpoint.seal

    def seal(**fields: Any) -> ExecutionCheckpoint:
        timed = timers.timed("ExecutionCheckpoint.seal (hash + validate)", original_seal)
        return cast(ExecutionCheckpoint, timed(**fields))

    from baton.bench.measure import _Lap

    lap_enter, lap_exit = _Lap.__enter__, _Lap.__exit__

    def enter_step(lap: Any) -> None:
        timers.in_step = True
        lap_enter(lap)

    def exit_step(lap: Any, *exc: object) -> None:
        lap_exit(lap, *exc)
        timers.in_step = False

    patches: list[tuple[Any, str, Any]] = [
        (_Lap, "__enter__", enter_step),
        (_Lap, "__exit__", exit_step),
        (StoreCore, "_tx", counted_tx),
        (Tx, "rows", counted_rows),
        (Tx, "send", counted_send),
        (Tx, "rows_later", counted_rows_later),
        (ExecutionCheckpoint, "seal", staticmethod(seal)),
        (checkpoints, "ensure_no_secrets",
         timers.timed("secret scan of new parts (secret_scan.ensure_no_secrets)", getattr(checkpoints, "ensure_no_secrets"))),
        (checkpoints, "get_record", timers.timed("parent segment read (checkpoints.get_record)", checkpoints.get_record)),
        (BlobStore, "put_many", timers.timed("blob files written (BlobStore.put_many)", BlobStore.put_many)),
        (BlobStore, "has_many", timers.timed("blob lookups (has_many)", BlobStore.has_many)),
        (SqlBlobStore, "has_many", timers.timed("blob lookups (has_many)", SqlBlobStore.has_many)),
        (SqlStore, "append_checkpoint",
         timers.timed("SqlStore.append_checkpoint (one transaction)", SqlStore.append_checkpoint)),
        (sdk, "ensure_no_secrets",
         timers.timed("secret scan of the observed content (SDK)", getattr(sdk, "ensure_no_secrets"))),
        (StoreCore, "db_now", timers.timed("store clock reads (db_now)", StoreCore.db_now)),
        (HandoffWatch, "lookup_later", timers.timed(
            "pending-handoff lookup queued in the seal transaction (HandoffWatch)", HandoffWatch.lookup_later)),
        (HandoffWatch, "fold", timers.timed("pending-handoff lookup's rows folded in, after the commit (HandoffWatch)",
                                            HandoffWatch.fold)),
        (HandoffWatch, "check", timers.timed("pending-handoff lookup (HandoffWatch, own read)", HandoffWatch.check)),
    ]
    with ExitStack() as stack:
        for owner, name, replacement in patches:
            stack.enter_context(mock.patch.object(owner, name, replacement))
        yield


@contextmanager
def _leg_input(observations: tuple[str, ...], backend: str) -> Iterator[LegInput]:
    with ExitStack() as stack:
        scratch = Path(tempfile.mkdtemp(prefix="baton-bench-profile-"))
        stack.callback(shutil.rmtree, scratch, True)
        url: str | None = None
        if backend == "postgres":
            server = stack.enter_context(postgres_server())
            url = stack.enter_context(fresh_database(server.url, prefix="profile")).url
        yield LegInput(observations, scratch, url)


def profile_baton(steps: int = 400, backend: str = "sqlite", blobs: str = "files", top: int = 18) -> StepProfile:
    """Phase split (wall clock) and cProfile top functions of one Baton leg of `steps` steps."""
    legs = {"files": ckpt_baton.file_blobs_leg, "sql": ckpt_baton.sql_blobs_leg,
            "default": ckpt_baton.default_blobs_leg, "sdk": ckpt_sdk.sdk_leg}
    if blobs not in legs:
        raise ValueError(f"blobs is one of {', '.join(legs)}, not {blobs!r}")
    leg = legs[blobs]
    observations = Trajectory(steps).materialize()
    with _leg_input(Trajectory(5, seed=1).materialize(), backend) as warm:
        leg(warm)
    timers = _Timers()
    with _leg_input(observations, backend) as inp, _instrumented(timers):
        out = leg(inp)
    total = sum(out.step_seconds)
    phases = [
        Phase(name, seconds / steps * 1000, timers.calls[name] / steps, seconds / total,
              timers.transactions[name] / steps, timers.statements[name] / steps)
        for name, seconds in sorted(timers.seconds.items(), key=lambda item: -item[1])
    ]
    accounted = sum(timers.seconds.values())
    phases.append(Phase("everything else (records, pydantic, canonical JSON)", (total - accounted) / steps * 1000,
                        0.0, (total - accounted) / total, timers.transactions["everything else"] / steps,
                        timers.statements["everything else"] / steps))
    profiler = cProfile.Profile()
    with _leg_input(observations, backend) as inp:
        profiler.enable()
        leg(inp)
        profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).strip_dirs().sort_stats("tottime").print_stats(top)
    return StepProfile(backend, blobs, steps, total / steps * 1000, tuple(phases), text.getvalue())
