"""Where a Baton checkpoint step spends its time.

Runs the Baton leg once with timers around the functions a step goes
through (restored afterwards), so the split is in wall-clock milliseconds
per step, then once more under cProfile for the functions underneath. Used to
explain a missed target in docs/benchmarks.md; not part of the measured
benchmark, because the timers and the profiler add their own overhead.
"""

from __future__ import annotations

import cProfile
import hashlib
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
from typing import Any
from unittest import mock

from baton.bench import ckpt_baton
from baton.bench.leg import LegInput
from baton.bench.pg import fresh_database, postgres_server
from baton.bench.trajectory import Trajectory


@dataclass(frozen=True)
class Phase:
    name: str
    ms_per_step: float
    calls_per_step: float
    share: float


@dataclass(frozen=True)
class StepProfile:
    backend: str
    steps: int
    ms_per_step: float
    phases: tuple[Phase, ...]
    top_functions: str  # pstats text, sorted by internal time


class _Timers:
    def __init__(self) -> None:
        self.seconds: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()

    def timed(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - start
                self.calls[name] += 1

        return wrapper


@contextmanager
def _instrumented(timers: _Timers) -> Iterator[None]:
    import baton.checkpoints as checkpoints
    from baton.models import ExecutionCheckpoint
    from baton.store.base import SqlStore
    from baton.store.blobs import BlobStore

    original_put = BlobStore.put
    original_seal = ExecutionCheckpoint.seal

    def put(self: BlobStore, data: bytes) -> str:
        ref = "sha256:" + hashlib.sha256(data).hexdigest()
        name = "BlobStore.put, already stored" if self.has(ref) else "BlobStore.put, new file (write+fsync+rename)"
        return timers.timed(name, original_put)(self, data)

    def seal(**fields: Any) -> ExecutionCheckpoint:
        return timers.timed("ExecutionCheckpoint.seal (hash + validate)", original_seal)(**fields)

    with ExitStack() as stack:
        stack.enter_context(mock.patch.object(BlobStore, "put", put))
        stack.enter_context(mock.patch.object(ExecutionCheckpoint, "seal", staticmethod(seal)))
        stack.enter_context(
            mock.patch.object(
                checkpoints, "_scan_for_secrets",
                timers.timed("checkpoints._scan_for_secrets (detect-secrets)", checkpoints._scan_for_secrets),
            )
        )
        stack.enter_context(
            mock.patch.object(
                checkpoints, "get_record",
                timers.timed("checkpoints.get_record (parent segment)", checkpoints.get_record),
            )
        )
        stack.enter_context(
            mock.patch.object(
                SqlStore, "append_checkpoint",
                timers.timed("SqlStore.append_checkpoint (one transaction)", SqlStore.append_checkpoint),
            )
        )
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


def profile_baton(steps: int = 400, backend: str = "sqlite", top: int = 18) -> StepProfile:
    """Phase split (wall clock) and cProfile top functions of one Baton leg of `steps` steps."""
    observations = Trajectory(steps).materialize()
    with _leg_input(Trajectory(5, seed=1).materialize(), backend) as warm:
        ckpt_baton._leg(warm)
    timers = _Timers()
    with _leg_input(observations, backend) as inp, _instrumented(timers):
        out = ckpt_baton._leg(inp)
    total = sum(out.step_seconds)
    phases = [
        Phase(name, seconds / steps * 1000, timers.calls[name] / steps, seconds / total)
        for name, seconds in timers.seconds.most_common()
    ]
    accounted = sum(timers.seconds.values())
    phases.append(Phase("everything else (records, pydantic, canonical JSON)", (total - accounted) / steps * 1000,
                        0.0, (total - accounted) / total))
    profiler = cProfile.Profile()
    with _leg_input(observations, backend) as inp:
        profiler.enable()
        ckpt_baton._leg(inp)
        profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).strip_dirs().sort_stats("tottime").print_stats(top)
    return StepProfile(backend, steps, total / steps * 1000, tuple(phases), text.getvalue())
