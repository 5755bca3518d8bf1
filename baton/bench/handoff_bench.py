"""Handoff latency: prepare, commit and restore, without revalidation, on SQLite and PostgreSQL.

Every sample is one real handoff of its own run, through the code every
trigger uses: `HandoffCoordinator.prepare(HandoffRequest(run_id, reason,
source_alive=False))` (the source worker is gone, so nothing waits for a
quiesce answer), `HandoffCoordinator.commit(prepared)`, then the new owner's
`prepare_resume(store, blobs, run_id, placement=target, epoch=new_epoch)`.

The runs are realistic research runs: a checkpoint chain of one checkpoint
per observation (20 observations of 2 KB each, one GENERATING checkpoint
apiece), then CANDIDATE_READY with a 4 KB candidate, then VERIFIED with
passing verifier evidence bound to that candidate's hash: 22 checkpoints.
Setting them up is not timed.

"Without revalidation": the two placements are two worker pools that share
one environment identity (same region, provider, runtime image and tool
versions) and support the same releases, schemas, verifiers and tools, at the
same authority ceiling. The gate then allows a PHYSICAL move with nothing to
revalidate, reverify or reauthorize, and the benchmark checks every resume
plan for exactly that (a sample that would trigger revalidation is an error,
not a data point).

Four systems: the SQL store on SQLite or PostgreSQL, each with file blobs
(the default) or SQL blobs (BATON_BLOBS=sql). Samples are interleaved
(sample i of every system, then sample i+1, starting with a different system
each time) so drift of the machine touches all alike.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import shutil
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

from baton.bench.measure import percentile
from baton.bench.pg import NoPostgres, PgServer, fresh_database, postgres_server
from baton.bench.trajectory import OBSERVATION_BYTES, observation

Backend = Literal["sqlite", "postgres"]

DEFAULT_SAMPLES = 200
OBSERVATIONS = 20
CANDIDATE_BYTES = 4096
WARMUP = 3
TARGET_P99_MS = 20.0
PHASES = ("prepare", "commit", "restore")
SOURCE_NAME = "bench-pool-a"
TARGET_NAME = "bench-pool-b"


@dataclass(frozen=True)
class HandoffSystem:
    key: str
    backend: Backend
    blobs: str  # "default" (open_blobs: small blobs in the SQL store, large as files), "files" or "sql"

    @property
    def label(self) -> str:
        kind = {"default": "default blobs", "files": "file blobs", "sql": "SQL blobs"}[self.blobs]
        return f"{'SQLite' if self.backend == 'sqlite' else 'PostgreSQL'}, {kind}"


SYSTEMS: tuple[HandoffSystem, ...] = (
    HandoffSystem("sqlite-default", "sqlite", "default"),
    HandoffSystem("postgres-default", "postgres", "default"),
    HandoffSystem("sqlite-files", "sqlite", "files"),
    HandoffSystem("sqlite-sqlblobs", "sqlite", "sql"),
    HandoffSystem("postgres-files", "postgres", "files"),
    HandoffSystem("postgres-sqlblobs", "postgres", "sql"),
)


def select_systems(spec: str | Sequence[str] | None) -> tuple[HandoffSystem, ...]:
    """Systems named by key or by backend ("sqlite", "postgres"); None or "all" for every one."""
    if spec is None:
        return SYSTEMS
    names = [part.strip() for part in (spec.split(",") if isinstance(spec, str) else spec) if part.strip()]
    if not names or names == ["all"]:
        return SYSTEMS
    chosen = []
    for name in names:
        matches = [s for s in SYSTEMS if name in (s.key, s.backend)]
        if not matches:
            raise ValueError(f"unknown handoff system {name!r}; known: {', '.join(s.key for s in SYSTEMS)}, sqlite, postgres")
        chosen += matches
    return tuple(s for s in SYSTEMS if s in chosen)


# ---------------------------------------------------------------------------- the runs


def placements() -> tuple[Any, Any]:
    """Two worker pools with one environment identity and the same capabilities (release support as the catalog's)."""
    from baton.models import EnvironmentIdentity, Placement
    from baton.placements import DEFAULT_PLACEMENTS

    base = DEFAULT_PLACEMENTS[0]  # local-gpu-eu: runs model-v7 and model-v8, schemas 1 and 2
    shared = EnvironmentIdentity(
        placement="bench-pool", region=base.region, provider=base.provider,
        runtime_image=base.environment.runtime_image, tool_versions=dict(base.environment.tool_versions),
    )
    source, target = (
        Placement.model_validate({**base.model_dump(), "name": name, "environment": shared.model_dump()})
        for name in (SOURCE_NAME, TARGET_NAME)
    )
    return source, target


def _candidate_bytes(index: int) -> bytes:
    text = "".join(observation(10_000 + part, seed=index) for part in range(CANDIDATE_BYTES // OBSERVATION_BYTES))
    return text.encode("ascii")


def seed_run(store: Any, blobs: Any, run_id: str, source: Any, index: int, observations: int = OBSERVATIONS) -> None:
    """A research run owned at epoch 1 on `source`: `observations` GENERATING checkpoints, a candidate, evidence."""
    from baton.catalog.releases import RELEASES
    from baton.checkpoints import RunParts, seal_checkpoint
    from baton.identity import sha256_ref
    from baton.models import (
        AuthorityContext,
        AuthorityLevel,
        Boundary,
        BudgetLedger,
        BudgetLimits,
        Candidate,
        Observation,
        OperationLedger,
        PortableRunState,
        ResumabilityClass,
        RunKind,
        SourceAuthority,
        VerdictResult,
        VerifierEvidence,
    )
    from baton.ownership import Coordinator

    release = RELEASES["model-v7"]
    store.create_run(run_id, RunKind.RESEARCH, release.release_id, source.name, {"bench": "handoff"})
    lease = Coordinator(store, name="bench-scheduler").grant(run_id, "source-worker", ttl_s=3600)
    assert lease is not None
    now = store.db_now()
    parts = RunParts(
        run_kind=RunKind.RESEARCH,
        release=release,
        placement=source,
        state=PortableRunState(task="survey the corpus and write a cited report",
                               active_plan=("read", "draft", "verify", "publish")),
        operations=OperationLedger(),
        authority=AuthorityContext(level=AuthorityLevel.VERIFY, policy_id="bench-policy"),
        budget=BudgetLedger(limits=BudgetLimits(
            model_spend_usd=Decimal("10"), model_calls=1000, search_expansions=1000, tool_calls=1000,
            browser_seconds=0, sandbox_seconds=600, verification_reserve_usd=Decimal("1"), retries=3,
            deadline=now + dt.timedelta(days=1),
        )),
    )
    parent = None

    def seal(boundary: Boundary, contents: Sequence[bytes] = (), new: Sequence[Any] = ()) -> None:
        nonlocal parent
        parent = seal_checkpoint(
            store, blobs, contents=contents, run_id=run_id, parts=parts, new_observations=new, parent=parent,
            boundary=boundary, resumability=ResumabilityClass.R3,
            resumability_reasons=("recorded observations can be reused",), owner_epoch=lease.epoch,
            sealed_at=store.db_now(), scan_secrets=True,
        )

    for step in range(observations):
        content = observation(step, seed=index).encode("ascii")
        obs = Observation(
            source=f"corpus://bench/{step}", query={"step": step}, observed_at=now, content_ref=sha256_ref(content),
            freshness_budget_s=86_400, authority=SourceAuthority.AUTHORITATIVE,
        )
        parts = dataclasses.replace(parts, state=parts.state.model_copy(update={"step": step + 1}))
        seal(Boundary.GENERATING, (content,), (obs,))
    artifact = _candidate_bytes(index)
    candidate = Candidate(candidate_id="report-1", kind="report", artifact_hash=sha256_ref(artifact),
                          produced_by_release=release.release_id, created_at=now)
    parts = dataclasses.replace(parts, candidates=(candidate,))
    seal(Boundary.CANDIDATE_READY, (artifact,))
    evidence = VerifierEvidence(candidate_hash=candidate.artifact_hash, verifier_version="citations-1",
                                inputs={"observations": observations}, result=VerdictResult.PASS,
                                detail="every claim cites a recorded observation", verified_at=now)
    parts = dataclasses.replace(parts, evidence=(evidence,))
    seal(Boundary.VERIFIED)


def check_no_revalidation(plan: Any, observations: int) -> None:
    """Raise unless the resume plan restores everything and asks for nothing to be redone."""
    problems = []
    if plan.environment_changed:
        problems.append("environment changed")
    if plan.observations_to_revalidate:
        problems.append(f"{len(plan.observations_to_revalidate)} observations to revalidate or refresh")
    if len(plan.observation_uses) != observations:
        problems.append(f"{len(plan.observation_uses)} observations restored, not {observations}")
    if plan.requires_reverification or plan.dropped_evidence or not plan.valid_evidence:
        problems.append("evidence must be reverified")
    if plan.requires_reauthorization:
        problems.append("authority must be re-requested")
    if plan.decision is None or plan.decision.requires_revalidation or plan.decision.requires_reverification:
        problems.append(f"the gate asked for revalidation: {plan.decision}")
    if plan.unresolved_operations or plan.budget_exhausted:
        problems.append("open operations or an exhausted budget")
    if problems:
        raise AssertionError(f"run {plan.run_id}: the handoff was not revalidation-free: {'; '.join(problems)}")


# ---------------------------------------------------------------------------- one system


@dataclass
class _Bench:
    """One system's coordinator, the new owner's store and blobs, and the runs, ready to hand off."""

    system: HandoffSystem
    store: Any  # the new owner's (prepare_resume); the coordinator has its own
    blobs: Any
    coordinator: Any
    target: Any
    runs: list[str]
    observations: int
    samples: dict[str, list[float]] = field(default_factory=lambda: {phase: [] for phase in PHASES})

    def handoff(self, run_id: str, clock: Callable[[], float] = time.perf_counter) -> tuple[float, float, float]:
        """Prepare, commit and restore `run_id`; the seconds each took, read off `clock` at each boundary."""
        from baton.handoff import HandoffRequest, PreparedHandoff, prepare_resume

        start = clock()
        prepared = self.coordinator.prepare(HandoffRequest(run_id, "bench: source worker lost", source_alive=False))
        prepared_at = clock()
        if not isinstance(prepared, PreparedHandoff):
            raise AssertionError(f"prepare aborted: {prepared.abort_reason}")
        outcome = self.coordinator.commit(prepared)
        committed_at = clock()
        if not outcome.committed or outcome.target_placement != self.target.name:
            raise AssertionError(f"commit did not move the run to {self.target.name}: {outcome}")
        plan = prepare_resume(self.store, self.blobs, run_id, placement=self.target, epoch=outcome.target_epoch)
        restored_at = clock()
        check_no_revalidation(plan, self.observations)
        return prepared_at - start, committed_at - prepared_at, restored_at - committed_at

    def measure(self, run_id: str) -> None:
        for phase, seconds in zip(PHASES, self.handoff(run_id), strict=True):
            self.samples[phase].append(seconds * 1000)

    def count(self, run_id: str) -> dict[str, dict[str, int]]:
        """One more handoff, counting store transactions, SQL statements and blob reads per phase."""
        counter = _StoreCounter()
        marks: list[dict[str, int]] = []

        def mark() -> float:
            marks.append(dict(counter.totals))
            return time.perf_counter()

        with counter.installed():
            self.handoff(run_id, clock=mark)
        return {
            phase: {name: after[name] - before[name] for name in after}
            for phase, before, after in zip(PHASES, marks, marks[1:], strict=False)
        }


class _StoreCounter:
    """Counts store transactions (and write transactions), SQL statements and blob reads while installed.

    A blob read is one blob fetched and verified against its hash, whether alone (`get`) or
    as one of several fetched by one query (`get_many`).
    """

    def __init__(self) -> None:
        # "sent": statements whose result nobody reads (`Tx.send`), which a pipelined write transaction
        # sends with the next statement instead of in a round trip of their own; counted in "statements" too
        self.totals = {"transactions": 0, "write_transactions": 0, "statements": 0, "sent": 0, "blob_reads": 0}

    @contextmanager
    def installed(self) -> Iterator[None]:
        from unittest import mock

        from baton.store.blobs import BlobStore
        from baton.store.blobs_sql import BlobsSql
        from baton.store.core import StoreCore, Tx
        from baton.store.sql_blobs import SqlBlobStore

        totals = self.totals
        original_tx, original_rows, original_send = StoreCore._tx, Tx.rows, Tx.send
        file_get, sql_get = BlobStore.get, SqlBlobStore.get
        sql_select, sql_chain = BlobsSql._select_blobs, BlobsSql._select_segment_chain

        @contextmanager
        def tx(store: Any, write: bool = True) -> Iterator[Any]:
            totals["transactions"] += 1
            totals["write_transactions"] += int(write)
            with original_tx(store, write) as handle:
                yield handle

        def rows(handle: Any, sql: str, params: Any = ()) -> Any:
            totals["statements"] += 1
            return original_rows(handle, sql, params)

        def send(handle: Any, sql: str, params: Any = ()) -> None:
            totals["statements"] += 1
            totals["sent"] += 1
            original_send(handle, sql, params)

        def reading(get: Callable[[Any, str], bytes]) -> Callable[[Any, str], bytes]:
            def counted(blobs: Any, ref: str) -> bytes:
                totals["blob_reads"] += 1
                return get(blobs, ref)
            return counted

        def selecting(store: Any, handle: Any, refs: Any, *, missing_ok: bool) -> dict[str, bytes]:
            found = sql_select(store, handle, refs, missing_ok=missing_ok)  # several blobs per query
            totals["blob_reads"] += len(found)
            return found

        def chaining(store: Any, handle: Any, head: str) -> dict[str, bytes]:
            found = sql_chain(store, handle, head)  # a whole observation log's segments in one query
            totals["blob_reads"] += len(found)
            return found

        with ExitStack() as stack:
            stack.enter_context(mock.patch.object(StoreCore, "_tx", tx))
            stack.enter_context(mock.patch.object(Tx, "rows", rows))
            stack.enter_context(mock.patch.object(Tx, "send", send))
            stack.enter_context(mock.patch.object(BlobStore, "get", reading(file_get)))
            stack.enter_context(mock.patch.object(SqlBlobStore, "get", reading(sql_get)))
            stack.enter_context(mock.patch.object(BlobsSql, "_select_blobs", selecting))
            stack.enter_context(mock.patch.object(BlobsSql, "_select_segment_chain", chaining))
            yield


@contextmanager
def _open_system(
    system: HandoffSystem, workdir: Path, pg: PgServer | None, runs: int, observations: int,
    progress: Callable[[str], None] | None,
) -> Iterator[_Bench]:
    from baton.handoff import HandoffCoordinator
    from baton.store.blobs import BlobStore
    from baton.store.factory import open_blobs, open_store
    from baton.store.sql_blobs import SqlBlobStore

    with ExitStack() as stack:
        home = workdir / system.key
        home.mkdir(parents=True)
        url = None
        if system.backend == "postgres":
            assert pg is not None
            url = stack.enter_context(fresh_database(pg.url, prefix="handoff")).url

        def opened() -> tuple[Any, Any]:
            store = open_store(url, home)
            stack.callback(store.close)
            if system.blobs == "default":
                return store, open_blobs(home, store)
            return store, SqlBlobStore(store) if system.blobs == "sql" else BlobStore(home / "blobs")

        source, target = placements()
        # The source worker seals the runs; the coordinator and the new owner are other processes in
        # practice, so each gets a store object of its own (no cache warmed by the sealing).
        setup_store, setup_blobs = opened()
        run_ids = []
        for index in range(runs):
            if progress and index % 25 == 0:
                progress(f"setting up {system.key}: run {index + 1}/{runs}")
            run_id = f"handoff-{system.key}-{index:05d}"
            seed_run(setup_store, setup_blobs, run_id, source, index, observations)
            run_ids.append(run_id)
        setup_store.close()
        store, blobs = opened()
        coordinator = HandoffCoordinator(store, blobs, {source.name: source, target.name: target}, lease_ttl_s=3600)
        owner_store, owner_blobs = opened()
        yield _Bench(system, owner_store, owner_blobs, coordinator, target, run_ids, observations)


# ---------------------------------------------------------------------------- the run


@dataclass(frozen=True)
class PhaseStats:
    samples: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    mean_ms: float

    @classmethod
    def of(cls, values: Sequence[float]) -> PhaseStats:
        return cls(len(values), percentile(values, 50), percentile(values, 99), max(values, default=float("nan")),
                   sum(values) / len(values) if values else float("nan"))


@dataclass(frozen=True)
class SystemResult:
    system: HandoffSystem
    status: str  # "ok", "skipped", "failed"
    reason: str = ""
    phases: dict[str, tuple[float, ...]] = field(default_factory=dict)  # phase -> ms per sample
    counts: dict[str, dict[str, int]] = field(default_factory=dict)  # phase -> transactions, statements, blob reads

    def stats(self, phase: str) -> PhaseStats:
        if phase == "total":
            totals = [sum(values) for values in zip(*(self.phases[p] for p in PHASES), strict=True)]
            return PhaseStats.of(totals)
        return PhaseStats.of(self.phases[phase])

    @property
    def samples(self) -> int:
        return len(self.phases.get("prepare", ()))

    @property
    def target_met(self) -> bool:
        return self.status == "ok" and all(self.stats(p).p99_ms < TARGET_P99_MS for p in PHASES)


@dataclass(frozen=True)
class HandoffRun:
    samples: int
    observations: int
    results: tuple[SystemResult, ...]
    postgres: str


def run_handoff_bench(
    samples: int = DEFAULT_SAMPLES,
    systems: Sequence[HandoffSystem] = SYSTEMS,
    *,
    observations: int = OBSERVATIONS,
    warmup: int = WARMUP,
    workdir: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> HandoffRun:
    """Hand off `samples` fresh runs per system (after `warmup` discarded ones), interleaving the systems."""
    if samples < 1:
        raise ValueError(f"samples must be at least 1, not {samples}")
    if workdir is not None:
        workdir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="baton-bench-handoff-", dir=workdir))
    results: dict[str, SystemResult] = {}
    with ExitStack() as stack:
        stack.callback(shutil.rmtree, scratch, True)
        pg: PgServer | None = None
        pg_note = "not needed"
        if any(s.backend == "postgres" for s in systems):
            try:
                pg = stack.enter_context(postgres_server())
                pg_note = pg.origin
            except NoPostgres as exc:
                pg_note = str(exc)
        benches: list[_Bench] = []
        for system in systems:
            if system.backend == "postgres" and pg is None:
                results[system.key] = SystemResult(system, "skipped", f"skipped: no PostgreSQL ({pg_note})")
                continue
            try:
                benches.append(stack.enter_context(
                    _open_system(system, scratch, pg, samples + warmup + 1, observations, progress)))
            except Exception as exc:  # a broken system is reported, not fatal to the others
                results[system.key] = SystemResult(system, "failed", f"failed during setup: {_describe(exc)}")
        failed: dict[str, str] = {}
        for bench in benches:
            for run_id in bench.runs[:warmup]:
                try:
                    bench.handoff(run_id)
                except Exception as exc:
                    failed.setdefault(bench.system.key, f"failed in warm-up: {_describe(exc)}")
        for index in range(samples):
            if progress:
                progress(f"sample {index + 1}/{samples}")
            shift = index % max(1, len(benches))
            for bench in (*benches[shift:], *benches[:shift]):
                if bench.system.key in failed:
                    continue
                try:
                    bench.measure(bench.runs[warmup + index])
                except Exception as exc:
                    failed[bench.system.key] = f"failed at sample {index + 1}: {_describe(exc)}"
        for bench in benches:
            key = bench.system.key
            if key not in failed:
                try:
                    counts = bench.count(bench.runs[-1])  # one more handoff, instrumented, after the timed ones
                except Exception as exc:
                    failed[key] = f"failed while counting round trips: {_describe(exc)}"
            if key in failed:
                results[key] = SystemResult(bench.system, "failed", failed[key])
            else:
                results[key] = SystemResult(bench.system, "ok", phases={p: tuple(v) for p, v in bench.samples.items()},
                                            counts=counts)
    return HandoffRun(samples, observations, tuple(results[s.key] for s in systems if s.key in results), pg_note)


def _describe(exc: BaseException) -> str:
    return "".join(traceback.format_exception_only(exc)).strip()
