"""The simulation's HTTP-level browser twin against the web application's own app, and browser runs in whole worlds."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from baton.agents.browser_agent import default_answers
from baton.agents.browser_session import BrowserStepError
from baton.faults.transcript_agents import ControlIssuer
from baton.models import RunKind
from baton.sim.browser_twin import TwinPool
from baton.sim.faults import FaultPlan
from baton.sim.network import _call
from baton.sim.runner import config_for, invariants_of, run_seed
from baton.sim.scenarios import draw_lapsed_approval, draw_owner_rule, draw_retirement, mixed
from baton.sim.world import SimRecords, run_world
from baton.targets.webapp_service import LOGIN_LEVEL, LOGIN_OPERATION, SESSION_COOKIE, account_scope, create_app
from baton.targets.webapp_state import Drafts


class _AppTransport(httpx.BaseTransport):
    """The app in this thread, called as the sim network calls it (no clock, no faults)."""

    def __init__(self, app: object) -> None:
        self.app = app

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        status, headers, content = asyncio.run(_call(self.app, request, request.read()))
        return httpx.Response(status_code=status, headers=headers, content=content, request=request)


@pytest.fixture
def pool(tmp_path: Path) -> tuple[TwinPool, ControlIssuer, Path]:
    issuer = ControlIssuer(tmp_path / "issuer")
    data = tmp_path / "webapp"
    app = create_app(data, trust=issuer.trust_file)
    return TwinPool("http://webapp.sim", _AppTransport(app)), issuer, data


def test_the_twin_logs_in_fills_every_page_and_keeps_its_tokens(pool: tuple[TwinPool, ControlIssuer, Path]) -> None:
    twins, issuer, data = pool
    session = twins.session("run-1")
    assert not session.session_live()
    session.login("acme", lambda: issuer.token("run-1", 1, LOGIN_OPERATION, account_scope("acme"), LOGIN_LEVEL))
    assert session.session_live()
    draft_id = session.new_draft()
    answers = default_answers("Acme")
    landed = [session.fill_page(f"/drafts/{draft_id}/page/{n}", answers_of)
              for n, answers_of in ((1, {"company": answers["company"], "country": answers["country"]}),
                                    (2, {"plan": answers["plan"], "seats": answers["seats"]}),
                                    (3, {"contact_email": answers["contact_email"], "notes": answers["notes"]}))]
    assert landed == [f"/drafts/{draft_id}/page/2", f"/drafts/{draft_id}/page/3", f"/drafts/{draft_id}/review"]
    view = session.draft(draft_id)
    assert view is not None and view["version"] == 3 and view["answers"] == answers
    assert [v["version"] for v in Drafts(data).history(draft_id, "acme")] == [0, 1, 2, 3]
    cookie = session._http.cookies[SESSION_COOKIE]
    assert cookie not in repr(view) and cookie not in "".join(landed)
    assert twins.held("run-1") is session and twins.drain() == 1 and twins.held("run-1") is None
    # a new jar has no session: the app asks for a login, as a browser's fresh context would see
    with pytest.raises(BrowserStepError) as refused:
        twins.session("run-1").fill_page(f"/drafts/{draft_id}/page/1", {"company": "X"})
    assert refused.value.error == "no_session"


def test_a_forged_csrf_token_or_credential_is_refused_and_saves_nothing(
    pool: tuple[TwinPool, ControlIssuer, Path],
) -> None:
    twins, issuer, _ = pool
    session = twins.session("run-2")
    with pytest.raises(BrowserStepError) as bad_login:
        session.login("acme", lambda: "not-a-capability")
    assert bad_login.value.error.startswith("capability:") and not session.session_live()
    session.login("acme", lambda: issuer.token("run-2", 1, LOGIN_OPERATION, account_scope("acme"), LOGIN_LEVEL))
    draft_id = session.new_draft()
    _, forms = session._open("open", f"/drafts/{draft_id}/page/1")
    with pytest.raises(BrowserStepError) as forged:
        session._post("save", forms["page-form"], {"csrf_token": "wc_forged", "field-company": "Evil"})
    assert forged.value.error == "csrf_invalid" and forged.value.status == 403
    view = session.draft(draft_id)
    assert view is not None and view["version"] == 0 and "company" not in view["answers"]


# -- browser runs in whole simulated worlds --------------------------------------------------------------------

BROWSER = (RunKind.BROWSER,)
DROP_SUBMIT_ANSWER = '[{"arg": "", "at": 24, "kind": "drop_response"}]'
"""Seed 1's fault-free world sends the submit as message 24: its answer is lost."""


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def _app_records(seen: dict[str, Any]) -> Callable[[SimRecords], None]:
    def grab(records: SimRecords) -> None:
        app = records.root / "webapp"
        seen.update(submissions=_lines(app / "submissions.jsonl"), sessions=_lines(app / "sessions.jsonl"),
                    resumes=[json.loads(body)["detail"]["resume_class"] for (body,) in records.store.raw(
                        "SELECT body FROM events WHERE event_type = 'browser_resume_chosen' ORDER BY seq")])
    return grab


@pytest.mark.parametrize("seed", [1, 3, 4])  # crashes, a rebalance, catalog changes, lost and late messages
def test_browser_runs_under_faults_end_without_violations(seed: int) -> None:
    seen: dict[str, Any] = {}
    kinds = (RunKind.DEPLOY, RunKind.BROWSER)
    drawn = mixed(seed, 5, kinds)  # the seed's schedule before stop 30 added the owner's and provider's draws
    extra = {draw_owner_rule(seed), draw_retirement(seed), draw_lapsed_approval(seed)}
    plan = FaultPlan(tuple(f for f in drawn.faults if f not in extra))
    outcome = run_world(config_for(seed, 0, plan=plan, kinds=kinds), before_check=_app_records(seen))
    assert outcome.fired and outcome.ok and not outcome.errors, outcome.violations
    browser_run = f"sim{seed}-browser-1"
    assert outcome.statuses[browser_run] == "verified"
    assert [s["run_id"] for s in seen["submissions"]] == [browser_run]
    assert seen["sessions"] and all(s["run_id"] == browser_run for s in seen["sessions"])


def test_a_browser_seed_replays_to_the_same_trail() -> None:
    first, second = run_seed(7, 5, kinds=BROWSER), run_seed(7, 5, kinds=BROWSER)
    assert first.fired and first.trail_hash == second.trail_hash and first.statuses == second.statuses


def test_a_crashed_worker_leaves_no_session_the_next_owner_logs_in_again() -> None:
    seen: dict[str, Any] = {}
    outcome = run_world(config_for(1, 0, plan=FaultPlan.from_json('[{"arg": "after", "at": 12, "kind": "crash"}]'),
                                   kinds=BROWSER), before_check=_app_records(seen))
    assert outcome.ok and outcome.statuses == {"sim1-browser-0": "verified"}, outcome.violations
    assert seen["resumes"] == ["RECONSTRUCT_SESSION", "RECONSTRUCT_SESSION"]
    epochs = [s["epoch"] for s in seen["sessions"]]
    assert len(epochs) == 2 and epochs[0] < epochs[1]  # a fresh login, from a new scoped credential, at the new epoch
    assert len(seen["submissions"]) == 1 and seen["submissions"][0]["epoch"] == epochs[1]


def test_reconcile_before_retry_ablated_is_caught_on_a_browser_run() -> None:
    """A lost submit answer: with the protection off the key is sent again without asking the app (I4, from the
    network log); the app's own records still hold one submission (its idempotency and draft rules shadow it)."""
    plan = FaultPlan.from_json(DROP_SUBMIT_ANSWER)
    seen: dict[str, Any] = {}
    ablated = run_world(config_for(1, 0, ablate=("reconcile-before-retry",), plan=plan, kinds=BROWSER),
                        before_check=_app_records(seen))
    assert invariants_of(ablated) == {"I4"}, ablated.violations
    assert len(seen["submissions"]) == 1
    protected = run_seed(1, 0, plan=plan, kinds=BROWSER)
    assert protected.ok and protected.statuses == {"sim1-browser-0": "verified"}, protected.violations


def _tampered(change: Callable[[SimRecords], None]) -> list[str]:
    return run_world(config_for(1, 0, kinds=BROWSER), before_check=change).violations


def test_the_browser_oracles_read_the_apps_records() -> None:
    def seal_a_token(records: SimRecords) -> None:
        token = _lines(records.root / "webapp" / "sessions.jsonl")[0]["csrf_token"]
        records.store.raw("INSERT INTO blobs (digest, data) VALUES (?, ?)", ("sha256:" + "0" * 64,
                                                                             json.dumps({"note": token}).encode()))

    def submit_twice(records: SimRecords) -> None:
        path = records.root / "webapp" / "submissions.jsonl"
        line = _lines(path)[0]
        with path.open("a") as handle:
            handle.write(json.dumps({**line, "seq": 2, "idempotency_key": "other", "epoch": 1}) + "\n")

    def submit_other_answers(records: SimRecords) -> None:
        path = records.root / "webapp" / "drafts.jsonl"
        lines = _lines(path)
        lines[-1]["answers"]["seats"] = "999"
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))

    assert _tampered(lambda records: None) == []
    assert _tampered(seal_a_token) == ["browser: a csrf_token the application issued is stored in a checkpoint or blob"]
    doubled = _tampered(submit_twice)
    assert any("recorded 2 submission(s)" in v for v in doubled) and any("at epoch 1 submitted" in v for v in doubled)
    assert any("differs from the owner's answers in ['seats']" in v for v in _tampered(submit_other_answers))
