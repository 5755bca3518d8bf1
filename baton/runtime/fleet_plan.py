"""What a fleet runs: which placements get workers, which runs start where, the handoff policy.

Workers fill placements in a fixed order chosen so that three workers already
give every chaos reason something to act on: a GPU placement (reclaimable), a
second provider and region, the browser pool, and a placement that runs only
the better release (so moving a run there is a behavioral migration).

Runs alternate research and deploy, and every fourth run is a coding run
(it fixes the failing tests of its own repository on the git remote,
`coding_repository`). Deploy and coding runs need external-mutation
authority, so they start only where the ceiling allows it; the fleet policy
forbids authority downgrades, so they never move to the browser pool either.
Each run starts on the first release its placement supports, in catalog order.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from pydantic import JsonValue

from baton.catalog.records import ReleasePublication
from baton.catalog.releases import BETTER_RELEASE, OLDER_RELEASE, RELEASES
from baton.compat import BehavioralMigration, HandoffPolicy, MigrationApproval
from baton.models import AuthorityLevel, Placement, RunKind
from baton.placements import hosts_kind
from baton.runtime.launch import RunSpec
from baton.store.base import SqlStore
from baton.targets.corpus_documents import INITIAL_DOCUMENTS

WORKER_PLACEMENT_ORDER: tuple[str, ...] = ("local-gpu-eu", "cloud-us", "browser-pool-eu", "cloud-eu")
DEPLOY_SERVICES: tuple[str, ...] = ("checkout", "payments", "search", "billing")
RESEARCH_TOPICS: tuple[str, ...] = ("ownership safety", "side-effect safety", "evidence freshness")
BROWSER_ACCOUNTS: tuple[str, ...] = ("acme", "globex", "initech")


def worker_placements(catalog: Sequence[Placement], workers: int) -> list[str]:
    """Placement names for `workers` workers, cycling through the preferred order."""
    names = {placement.name for placement in catalog}
    order = [name for name in WORKER_PLACEMENT_ORDER if name in names] + sorted(names - set(WORKER_PLACEMENT_ORDER))
    if not order or workers < 1:
        raise ValueError("a fleet needs at least one worker and one placement")
    return [order[index % len(order)] for index in range(workers)]


def workers_for_kind(catalog: Sequence[Placement], kind: RunKind) -> int | None:
    """How many workers a fleet needs before one sits on a placement that hosts `kind` (None: no placement does)."""
    by_name = {placement.name: placement for placement in catalog}
    for count in range(1, len(by_name) + 1):
        if any(hosts_kind(by_name[name], kind) for name in worker_placements(catalog, count)):
            return count
    return None


def _release_for(placement: Placement) -> str:
    for name in (OLDER_RELEASE, BETTER_RELEASE):
        if RELEASES[name].release_id in placement.supported_release_ids:
            return name
    raise ValueError(f"placement {placement.name} supports no catalog release")


def browser_spec(run_id: str, placement: Placement, index: int) -> RunSpec:
    """A browser run: fill in and submit the web application's form for one account."""
    from baton.agents.browser_agent import default_answers

    account = BROWSER_ACCOUNTS[index % len(BROWSER_ACCOUNTS)]
    return RunSpec(run_id, RunKind.BROWSER, RELEASES[_release_for(placement)], placement, f"sign up {account}",
                   {"account": account, "answers": default_answers(account.title())}, AuthorityLevel.SANDBOX_MUTATE)


def plan_runs(count: int, placements: Sequence[Placement], *, prefix: str, browser: bool = False) -> list[RunSpec]:
    """`count` run specs spread over `placements` (deploy runs only where mutation is allowed).

    With `browser`, every third run is a browser run, started on a placement with a browser pool.
    """
    mutating = [p for p in placements if p.authority_ceiling.allows(AuthorityLevel.EXTERNAL_MUTATE)]
    pools = [p for p in placements if hosts_kind(p, RunKind.BROWSER)] if browser else []
    documents = sorted(INITIAL_DOCUMENTS)
    specs: list[RunSpec] = []
    for index in range(count):
        if pools and index % 3 == 2:
            specs.append(browser_spec(f"{prefix}-{index + 1:02d}", pools[(index // 3) % len(pools)], index))
            continue
        deploy = index % 2 == 1 and bool(mutating)
        pool = mutating if deploy else list(placements)
        placement = pool[(index // 2) % len(pool)] if deploy else pool[index % len(pool)]
        release = RELEASES[_release_for(placement)]
        run_id = f"{prefix}-{index + 1:02d}"
        if deploy and index % 4 == 3:
            specs.append(RunSpec(run_id, RunKind.CODING, release, placement, "fix the failing tests",
                                 coding_task(run_id),
                                 AuthorityLevel.EXTERNAL_MUTATE))
        elif deploy:
            service = DEPLOY_SERVICES[(index // 2) % len(DEPLOY_SERVICES)]
            specs.append(RunSpec(run_id, RunKind.DEPLOY, release, placement, f"deploy {service}",
                                 {"service": service}, AuthorityLevel.EXTERNAL_MUTATE))
        else:
            topic = RESEARCH_TOPICS[(index // 2) % len(RESEARCH_TOPICS)]
            chosen: list[JsonValue] = [documents[(index + k) % len(documents)] for k in range(3)]
            specs.append(RunSpec(run_id, RunKind.RESEARCH, release, placement, f"research {topic}",
                                 {"topic": topic, "documents": chosen}, AuthorityLevel.SANDBOX_MUTATE))
    return specs


def coding_task(run_id: str) -> dict[str, JsonValue]:
    """The task input of a fleet's coding run: fix the failing tests of its own repository's `main`."""
    return {"repository": coding_repository(run_id), "branch": "main"}


def coding_repository(run_id: str) -> str:
    """The git remote repository a fleet's coding run works on (one each, so runs do not race for a branch)."""
    return "calc-" + "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in run_id)[-48:]


APPROVAL_TTL_S = 3 * 3600.0
"""How long the release board's approval of the move to the better release lasts after that release's publication."""


def fleet_policy(publication: ReleasePublication, *, approval_ttl_s: float = APPROVAL_TTL_S) -> HandoffPolicy:
    """Runs stay on their release unless moved to the better one, which the release board approved.

    The approval runs for `approval_ttl_s` from the better release's last publication as the catalog records it
    (`publication`, read from the store), and there is none while that release is withdrawn: building the policy
    again later never extends it. A catalog never seeded (the built-in releases apply) records no publication;
    there the approval runs from the store's clock at the build, as every build's did before stop 38.
    """
    older, better = RELEASES[OLDER_RELEASE], RELEASES[BETTER_RELEASE]
    anchor = publication.published_at if publication.catalog_seeded else publication.now
    approvals = () if anchor is None else (
        MigrationApproval(
            approval_id=f"release-board-{BETTER_RELEASE}",
            from_release_id=older.release_id,
            to_release_id=better.release_id,
            approved_by="release-board",
            expires_at=anchor + dt.timedelta(seconds=approval_ttl_s),
        ),
    )
    return HandoffPolicy(
        allowed_behavioral_migrations=(BehavioralMigration(from_release_id=older.release_id, to_release=better),),
        approvals=approvals,
        allow_authority_downgrade=False,
    )


def clock_and_fleet_policy(store: SqlStore) -> tuple[dt.datetime, HandoffPolicy]:
    """The store's clock and the fleet policy as its catalog has it now, from one read."""
    publication = store.release_publication(RELEASES[BETTER_RELEASE].release_id)
    return publication.now, fleet_policy(publication)


def store_fleet_policy(store: SqlStore) -> HandoffPolicy:
    """`fleet_policy` as `store`'s catalog has it now (one read)."""
    return clock_and_fleet_policy(store)[1]
