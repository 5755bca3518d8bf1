"""The simulation's HTTP-level browser twin against the web application's own app."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from baton.agents.browser_agent import default_answers
from baton.agents.browser_session import BrowserStepError
from baton.faults.transcript_agents import ControlIssuer
from baton.sim.browser_twin import TwinPool
from baton.sim.network import _call
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
