"""Baton through the agent SDK: what an agent pays at a semantic boundary.

Each step is one `RunContext.observe(...)` call of a launched, adopted run, in
the default configuration (`open_store` and `open_blobs` with nothing set:
SQLite under BATON_HOME or PostgreSQL, and the default blob backend). That is
the whole production path of an "observation completed" boundary: the budget
check against the store clock, the secret scan of the content, the new
`Observation` record, the tool-call charge, sealing (the new parts, the
checkpoint row, CHECKPOINT_STARTED and CHECKPOINT_SEALED) and the
pending-handoff check. The step is timed from the call to its return.

The run is launched and adopted before timing starts (as a worker does);
bytes stored include the launch's own checkpoint and events.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

from baton.bench.ckpt_baton import _sqlite_files
from baton.bench.leg import LegInput, LegOutput
from baton.bench.measure import StepClock, tree_footprint
from baton.models import AuthorityLevel, BudgetLimits, RunKind
from baton.store.base import SqlStore
from baton.store.blobs import Blobs

if TYPE_CHECKING:
    from baton.runtime.sdk import RunContext

RUN_ID = "bench-sdk-run"
OWNER = "worker:bench"
_KEY = b"bench-sdk-signing-key-0123456789abcdef"


def _limits(now: dt.datetime) -> BudgetLimits:
    return BudgetLimits(
        model_spend_usd=Decimal("10"), model_calls=10_000, search_expansions=10_000, tool_calls=100_000,
        browser_seconds=0, sandbox_seconds=0, verification_reserve_usd=Decimal("1"), retries=3,
        deadline=now + dt.timedelta(days=1),
    )


def start_sdk_run(store: SqlStore, blobs: Blobs, run_id: str = RUN_ID, *, owner: str = OWNER) -> RunContext:
    """Launch a research run, adopt it as `owner` (as a worker does) and return its SDK context."""
    from baton.authority import AuthorityService
    from baton.catalog.releases import RELEASES
    from baton.gateway import MutationGateway
    from baton.handoff.resume import prepare_resume
    from baton.ownership import Coordinator
    from baton.placements import DEFAULT_PLACEMENTS, placement_named
    from baton.runtime.launch import RunSpec, launch_run
    from baton.runtime.services import RuntimeServices

    authority = AuthorityService(_KEY)
    services = RuntimeServices(
        store=store, blobs=blobs, authority=authority, gateway=MutationGateway(store, authority, {}),
        targets={}, releases={release.release_id: release for release in RELEASES.values()},
    )
    placement = placement_named(DEFAULT_PLACEMENTS, "local-gpu-eu")
    if store.latest_checkpoint(run_id) is None:
        spec = RunSpec(run_id, RunKind.RESEARCH, RELEASES["model-v7"], placement, "accumulate observations",
                       {"bench": "sdk"}, AuthorityLevel.OBSERVE, limits=_limits(store.db_now()))
        launch_run(store, blobs, spec, reservation_ttl_s=3600.0)
    lease = store.get_lease(run_id)
    won = Coordinator(store, name="bench").grant(run_id, owner, ttl_s=3600.0, observed_epoch=lease.epoch, force=True)
    if won is None:
        raise RuntimeError(f"could not adopt run {run_id!r}")
    plan = prepare_resume(store, blobs, run_id, placement=placement, epoch=won.epoch)
    from baton.runtime.sdk import RunContext

    return RunContext(services, plan, owner=owner)


def sdk_leg(inp: LegInput) -> LegOutput:
    """N observe() boundaries through the SDK, default blob backend, on the leg's store."""
    from baton.store.factory import open_blobs, open_store

    home: Path = inp.workdir / "baton_home"
    home.mkdir()
    store = open_store(inp.database_url, home)
    clock = StepClock()
    try:
        ctx = start_sdk_run(store, open_blobs(home, store))
        for index, text in enumerate(inp.observations):
            content = text.encode("ascii")
            with clock.time_step():
                ctx.observe("bench://trajectory", {"step": index}, content, freshness_s=3600)
        latest = store.latest_checkpoint(RUN_ID)
        if latest is None or latest.checkpoint_hash != ctx.last_checkpoint.checkpoint_hash:
            raise RuntimeError("the SDK's last checkpoint is not the store's latest")
    finally:
        store.close()
    blob_root = home / "blobs"
    components = {"blobs": tree_footprint(blob_root)} if blob_root.exists() else {}
    if inp.database_url is None:
        components["sqlite"] = _sqlite_files(home, blob_root)
    return LegOutput(step_seconds=tuple(clock.seconds), components=components)
