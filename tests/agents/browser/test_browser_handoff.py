"""Live browser runs in real Chromium: a handoff during which the session expires, stale and
capability-less submits, no session secret in any checkpoint blob, and the resume classes."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from baton.agents.browser_agent import BROWSER_STATE
from baton.agents.browser_session import BrowserPool
from baton.checkpoints import restore
from baton.errors import TargetRejectedError
from baton.faults.oracles import inflated_store_rows
from baton.fencing import FencingToken
from baton.handoff.coordinator import HandoffOutcome, HandoffRequest
from baton.models import AuthorityLevel, Boundary
from baton.store.records import Lease
from baton.targets.webapp_service import SUBMISSIONS_FILE, SUBMIT_OPERATION, count_side_effects

from agents.browser.harness import POOL, SPARE, BrowserWorld, open_world
from builders.live import wait_for

pytestmark = pytest.mark.integration
RUN = "browser-moved-1"
TTL_S = 6.0


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserWorld]:
    opened = open_world(tmp_path_factory.mktemp("browser-home"), session_ttl_s=TTL_S)
    yield opened
    opened.close()


def _parse(text: str) -> dt.datetime:
    return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.timezone.utc)


def _confirmed_page(world: BrowserWorld, run_id: str) -> int:
    latest = world.store.latest_checkpoint(run_id)
    if latest is None:
        return 0
    state = restore(world.blobs, latest).parts.state.memory.get(BROWSER_STATE)
    return int(state["next_page"]) if isinstance(state, dict) else 0


class Mover(threading.Thread):
    """Drains the browser pool once the run has confirmed page 1, then lets the run's session expire."""

    def __init__(self, world: BrowserWorld) -> None:
        super().__init__(daemon=True)
        self.world = world
        self.outcome: HandoffOutcome | None = None
        self.error: BaseException | None = None

    def run(self) -> None:  # noqa: D102 - thread body
        try:
            wait_for(lambda: _confirmed_page(self.world, RUN) >= 2, timeout_s=90, what="page 1 to be confirmed")
            self.outcome = self.world.coordinator().handoff(HandoffRequest(
                RUN, "browser_pool_drained", preferred_targets=(SPARE,), excluded_placements=(POOL,)))
            # The session the first owner opened expires while the run is between owners.
            issued = [s for s in self.world.records("sessions.jsonl") if s.get("run_id") == RUN]
            deadline = max(_parse(s["expires_at"]) for s in issued)
            wait_for(lambda: dt.datetime.now(dt.timezone.utc) > deadline + dt.timedelta(seconds=0.2),
                     timeout_s=TTL_S + 30, what="the first owner's session to expire")
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            self.error = exc


@pytest.fixture(scope="module")
def moved(world: BrowserWorld, chromium: Any) -> tuple[Any, Mover, Any]:
    """The run, moved mid-form while its session expires, then finished on the spare placement: (the first owner's
    outcome, the mover, the second owner's outcome). A fixture, so every test of the module that reads what the run
    left finds it, whichever of them runs first and in whichever process (pytest-xdist splits modules)."""
    pool = BrowserPool(world.app.url, browser=chromium)  # one worker process: its pool keeps the run's context
    world.launch(RUN)
    mover = Mover(world)
    mover.start()
    first = world.run_once(world.executor(world.services(pool, boundary_pause_s=0.4), "worker:a", POOL), RUN)
    mover.join(timeout=120)
    moved_at = None
    if mover.error is None and first.result == "handed_off":
        moved_at = restore(world.blobs, world.store.latest_checkpoint(RUN))  # type: ignore[arg-type]
    second = world.run_once(world.executor(world.services(pool), "worker:b", SPARE), RUN)
    return first, mover, (moved_at, second)


def test_session_expires_during_a_handoff_and_the_run_resumes_from_the_server_draft(
    world: BrowserWorld, moved: tuple[Any, Mover, Any],
) -> None:
    first, mover, (moved_at, second) = moved
    assert mover.error is None, mover.error
    assert first.result == "handed_off", first
    assert mover.outcome is not None and mover.outcome.committed and mover.outcome.target_placement == SPARE
    assert moved_at is not None
    assert moved_at.checkpoint.boundary is Boundary.GENERATING  # mid-form: the draft is not complete yet
    assert 2 <= int(moved_at.parts.state.memory[BROWSER_STATE]["next_page"]) <= 3
    assert second.result == "verified", second
    assert world.store.get_run(RUN).status == "verified"

    # The application's own records: exactly one submission for the run, of one draft it created once.
    submissions = [s for s in world.records(SUBMISSIONS_FILE) if s["run_id"] == RUN]
    assert len(submissions) == 1, submissions
    assert count_side_effects(world.data_dir)["duplicates"] == {}
    created = [d for d in world.records("drafts.jsonl") if d["version"] == 0 and d["writer"].get("run_id") == RUN]
    assert len(created) == 1  # resumed from the server-side draft, not started over
    versions = [d for d in world.records("drafts.jsonl") if d["draft_id"] == submissions[0]["draft_id"]]
    assert [d["version"] for d in versions] == [0, 1, 2, 3]
    assert len({d["writer"]["epoch"] for d in versions}) == 2  # pages saved by both owners, each page once
    assert submissions[0]["submission_hash"] == versions[-1]["hash"] and submissions[0]["version"] == 3

    # The first owner's session really expired before the second owner logged in (app's session table).
    sessions = [s for s in world.records("sessions.jsonl") if s.get("run_id") == RUN]
    old = [s for s in sessions if s["epoch"] < submissions[0]["epoch"]]
    new = [s for s in sessions if s["epoch"] == submissions[0]["epoch"]]
    assert old and new
    assert max(_parse(s["expires_at"]) for s in old) < min(_parse(s["issued_at"]) for s in new)

    # The resume class the new owner chose, recorded as an event.
    events = world.resume_events(RUN)
    after = [e for e in events if e["epoch"] == submissions[0]["epoch"]]
    assert after and after[0]["resume_class"] in ("RECONSTRUCT_SESSION", "RESTART_FROM_SERVER_STATE"), events
    assert after[0]["confirmed_version"] == after[0]["server_version"] or after[0]["resume_class"] != "RECONSTRUCT_SESSION"


def _holding(root: Path, secrets: list[bytes], skip: tuple[str, ...]) -> list[str]:
    """Files under `root` (but not under `skip`) whose raw bytes contain any of `secrets`; in a SQLite store, also
    inside its compressed blob rows (inflated with zlib by the oracle, not by Baton's reader)."""
    found = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        if path.relative_to(root).parts[0] in skip:
            continue
        contents = [path.read_bytes(), *(inflated_store_rows(path) if path.name == "baton.db" else [])]
        if any(secret in data for data in contents for secret in secrets):
            found.append(str(path.relative_to(root)))
    return found


def test_no_session_id_csrf_token_or_credential_is_in_any_checkpoint_blob(
        world: BrowserWorld, moved: tuple[Any, Mover, Any], tmp_path: Path) -> None:
    """The oracle is the application's own session table, searched for in the raw bytes Baton stored."""
    sessions = [s for s in world.records("sessions.jsonl") if s.get("run_id") == RUN]
    secrets = [s["session_id"].encode() for s in sessions] + [s["csrf_token"].encode() for s in sessions]
    assert len(secrets) >= 4
    files = [p for p in (world.home / "blobs").rglob("*") if p.is_file()] if (world.home / "blobs").exists() else []
    rows = world.store.execute_raw("SELECT count(*) FROM blobs")[0][0]  # small blobs live in the store's table
    assert len(files) + int(rows) > 10, "the run sealed hardly any blob"
    # Every blob, the SQL store (and its WAL): nothing but the application's own files may hold them.
    skip = ("targets", "authority")
    assert _holding(world.home, secrets, skip) == []
    assert _holding(world.home, [b"eyJ"], skip) == []  # nor a signed credential (JWTs start so)
    # The search itself can fail: a planted session id is found.
    planted = tmp_path / "home"
    (planted / "blobs").mkdir(parents=True)
    (planted / "blobs" / "x").write_bytes(b'{"memory": {"browser": "' + secrets[0] + b'"}}')
    assert _holding(planted, secrets, skip) == ["blobs/x"]


def _old_epoch_capability(world: BrowserWorld, epoch: int, key: str, artifact: str) -> str:
    """What a stale worker still holds: a capability it was issued while epoch `epoch` was live."""
    placement = world.placements[POOL]
    lease = Lease(run_id=RUN, owner="worker:a", epoch=epoch,
                  expires_at=dt.datetime.now(dt.timezone.utc) + dt.timedelta(minutes=5))
    from baton.models import AuthorityContext

    return world.authority.issue(
        run_id=RUN, epoch=epoch, operation=SUBMIT_OPERATION, artifact_hash=artifact,
        level=AuthorityLevel.SANDBOX_MUTATE, lease=lease, placement=placement,
        context=AuthorityContext(level=AuthorityLevel.SANDBOX_MUTATE, policy_id="fleet-policy"),
        idempotency_key=key,
    ).token


def test_a_stale_worker_and_a_submit_without_capability_are_refused_by_the_app_itself(
        world: BrowserWorld, moved: tuple[Any, Mover, Any]) -> None:
    (submitted,) = [s for s in world.records(SUBMISSIONS_FILE) if s["run_id"] == RUN]
    stale_epoch = min(s["epoch"] for s in world.records("sessions.jsonl") if s.get("run_id") == RUN)
    assert stale_epoch < submitted["epoch"]  # the first owner's epoch
    payload = {"draft_id": submitted["draft_id"], "version": submitted["version"],
               "submission_hash": submitted["submission_hash"]}
    key = f"{RUN}:submit:stale"
    token = _old_epoch_capability(world, stale_epoch, key, submitted["submission_hash"])
    with pytest.raises(TargetRejectedError) as stale:
        world.client.apply("op-stale-1", key, FencingToken(RUN, stale_epoch, capability=token), payload)
    assert stale.value.reason == "fenced" and stale.value.fenced

    with pytest.raises(TargetRejectedError) as bare:
        world.client.apply("op-bare-1", f"{RUN}:submit:bare", FencingToken(RUN, submitted["epoch"]), payload)
    assert bare.value.reason == "capability:no_capability"

    requests = {r["operation_id"]: r for r in world.records("requests.jsonl")}
    assert requests["op-stale-1"]["result"] == "fenced" and requests["op-stale-1"]["epoch"] == stale_epoch
    assert requests["op-bare-1"]["result"] == "capability:no_capability"
    assert len([s for s in world.records(SUBMISSIONS_FILE) if s["run_id"] == RUN]) == 1  # nothing applied

    # The stale session cannot touch the draft either: the app refuses it as fenced or expired.
    stale_sessions = [s for s in world.records("sessions.jsonl") if s.get("run_id") == RUN and s["epoch"] == stale_epoch]
    response = httpx.get(f"{world.app.url}/api/drafts/{submitted['draft_id']}",
                         cookies={"wa_session": stale_sessions[-1]["session_id"]})
    assert response.status_code == 401 and response.json()["error"] in ("session_fenced", "session_expired")


class Trigger(threading.Thread):
    """Asks for a move once `run_id` has confirmed page 1; then runs `after` (e.g. a person edits the draft)."""

    def __init__(self, world: BrowserWorld, run_id: str, request: HandoffRequest, after: Any = None) -> None:
        super().__init__(daemon=True)
        self.world, self.run_id, self.request, self.after = world, run_id, request, after
        self.outcome: HandoffOutcome | None = None
        self.error: BaseException | None = None

    def run(self) -> None:  # noqa: D102 - thread body
        try:
            wait_for(lambda: _confirmed_page(self.world, self.run_id) >= 2, timeout_s=90, what="page 1 to be confirmed")
            self.outcome = self.world.coordinator().handoff(self.request)
            if self.after is not None:
                self.after()
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            self.error = exc


def _person_edits_the_draft(world: BrowserWorld, run_id: str) -> None:
    """Alice, a person of the same account, logs in with her password and changes the run's draft."""
    import json
    import re

    password = json.loads((world.data_dir / "accounts.json").read_text())["accounts"]["acme"]["people"]["alice"]
    draft = next(d for d in world.records("drafts.jsonl") if d["writer"].get("run_id") == run_id)["draft_id"]
    with httpx.Client(base_url=world.app.url, timeout=5.0) as person:
        assert person.post("/login", data={"account": "acme", "user": "alice", "password": password}).status_code == 303
        version = person.get(f"/api/drafts/{draft}").json()["version"]
        page = person.get(f"/drafts/{draft}/page/1").text
        csrf = re.search(r"name='csrf_token' value='([^']+)'", page).group(1)  # type: ignore[union-attr]
        saved = person.post(f"/drafts/{draft}/page/1", data={"csrf_token": csrf, "base_version": str(version),
                                                              "company": "Acme Holdings", "country": "FR"})
        assert saved.status_code == 303, saved.text


def test_a_draft_changed_by_someone_else_during_the_move_is_not_resumed_but_escalated(
    world: BrowserWorld, chromium: Any,
) -> None:
    run_id = "browser-tampered-1"
    world.launch(run_id)
    trigger = Trigger(world, run_id, HandoffRequest(run_id, "browser_pool_drained", preferred_targets=(SPARE,),
                                                    excluded_placements=(POOL,)),
                      after=lambda: _person_edits_the_draft(world, run_id))
    trigger.start()
    first = world.run_once(world.executor(world.services(BrowserPool(world.app.url, browser=chromium),
                                                         boundary_pause_s=0.4), "worker:c", POOL), run_id)
    trigger.join(timeout=120)
    assert trigger.error is None, trigger.error
    assert first.result == "handed_off"
    second = world.run_once(world.executor(world.services(BrowserPool(world.app.url, browser=chromium)), "worker:d",
                                           SPARE), run_id)
    assert second.result == "escalated", second
    assert "alice" in second.detail
    assert not [s for s in world.records(SUBMISSIONS_FILE) if s["run_id"] == run_id]  # nothing was submitted
    chosen = world.resume_events(run_id)[-1]
    assert chosen["resume_class"] == "NOT_RESUMABLE" and "alice" in chosen["reason"]
    assert chosen["server_version"] > chosen["confirmed_version"]


def test_a_move_that_aborts_leaves_the_run_on_its_worker_which_reopens_the_durable_url(
    world: BrowserWorld, chromium: Any,
) -> None:
    run_id = "browser-stays-1"
    world.launch(run_id)
    nowhere = HandoffRequest(run_id, "scheduler_rebalance", excluded_placements=(POOL, SPARE))
    trigger = Trigger(world, run_id, nowhere)
    trigger.start()
    outcome = world.run_once(world.executor(world.services(BrowserPool(world.app.url, browser=chromium),
                                                           boundary_pause_s=0.4), "worker:e", POOL), run_id)
    trigger.join(timeout=120)
    assert trigger.error is None, trigger.error
    assert trigger.outcome is not None and not trigger.outcome.committed
    assert outcome.result == "verified", outcome
    classes = [e["resume_class"] for e in world.resume_events(run_id)]
    assert classes[0] == "RECONSTRUCT_SESSION"  # the first start: a session from a scoped credential
    assert "REOPEN_DURABLE_URL" in classes[1:]  # after the aborted move: same worker, live session, durable URL
    assert len([s for s in world.records(SUBMISSIONS_FILE) if s["run_id"] == run_id]) == 1
