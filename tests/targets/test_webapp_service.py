"""The web application over real HTTP: sessions, CSRF, drafts and submissions, each refusal specific and harmless."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from baton.authority_keys import KeyRing
from baton.targets.service_process import ServiceProcess
from baton.targets.webapp_service import ACCOUNTS_FILE, SESSION_COOKIE, webapp_process
from baton.targets.webapp_state import Drafts, SessionRefused, Sessions

from builders.live import wait_for

_CSRF = re.compile(r"name='csrf_token' value='([^']+)'")


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    home = tmp_path_factory.mktemp("webapp")
    KeyRing.generate().save(home / "authority")
    with webapp_process(home / "webapp", trust=home / "authority" / "jwks.json") as process:
        yield process


def _person(app: ServiceProcess, account: str = "acme") -> httpx.Client:
    """A person logged in with the password the app keeps in its accounts file."""
    accounts = json.loads((app.data_dir / ACCOUNTS_FILE).read_text())["accounts"]
    client = httpx.Client(base_url=app.url, timeout=5.0)
    answer = client.post("/login", data={"account": account, "user": "alice",
                                         "password": accounts[account]["people"]["alice"]})
    assert answer.status_code == 303 and SESSION_COOKIE in client.cookies
    return client


def _csrf(client: httpx.Client, path: str = "/drafts") -> str:
    found = _CSRF.search(client.get(path).text)
    assert found is not None
    return found.group(1)


def _new_draft(client: httpx.Client) -> str:
    answer = client.post("/drafts", data={"csrf_token": _csrf(client)})
    assert answer.status_code == 303
    return answer.headers["location"].split("/")[2]


def _version(client: httpx.Client, draft_id: str) -> int:
    return int(client.get(f"/api/drafts/{draft_id}").json()["version"])


def test_a_person_fills_a_page_and_the_draft_is_kept_server_side(app: ServiceProcess) -> None:
    client = _person(app)
    draft = _new_draft(client)
    saved = client.post(f"/drafts/{draft}/page/1", data={"csrf_token": _csrf(client, f"/drafts/{draft}/page/1"),
                                                          "base_version": "0", "company": "Acme", "country": "DE"})
    assert saved.status_code == 303 and saved.headers["location"] == f"/drafts/{draft}/page/2"
    view = client.get(f"/api/drafts/{draft}").json()
    assert view["version"] == 1 and view["answers"] == {"company": "Acme", "country": "DE"}
    assert view["history"][-1]["writer"] == {"user": "alice"} and view["submitted"] is None
    lines = [json.loads(line) for line in (app.data_dir / "drafts.jsonl").read_text().splitlines()]
    assert [line["version"] for line in lines if line["draft_id"] == draft] == [0, 1]


@pytest.mark.parametrize(("token", "error"), [(None, "csrf_missing"), ("wc_forged", "csrf_invalid")])
def test_a_page_post_without_the_sessions_csrf_token_is_refused_and_saves_nothing(
    app: ServiceProcess, token: str | None, error: str,
) -> None:
    client = _person(app)
    draft = _new_draft(client)
    data = {"base_version": "0", "company": "Acme", "country": "DE"}
    if token is not None:
        data["csrf_token"] = token
    answer = client.post(f"/drafts/{draft}/page/1", data=data)
    assert answer.status_code == 403 and answer.json()["error"] == error, answer.text
    assert "CSRF" in answer.json()["message"]
    assert _version(client, draft) == 0


def test_another_sessions_csrf_token_is_refused(app: ServiceProcess) -> None:
    mine, theirs = _person(app), _person(app)
    draft = _new_draft(mine)
    answer = mine.post(f"/drafts/{draft}/page/1", data={"csrf_token": _csrf(theirs), "base_version": "0",
                                                        "company": "Acme", "country": "DE"})
    assert answer.status_code == 403 and answer.json()["error"] == "csrf_invalid"
    assert _version(mine, draft) == 0


@pytest.mark.parametrize(("body", "error", "needle"), [
    ({"company": "Acme", "country": "Germany"}, "invalid_fields", "country"),
    ({"company": "Acme", "country": "DE", "admin": "yes"}, "invalid_fields", "admin"),
    ({"company": "", "country": "DE"}, "invalid_fields", "company"),
])
def test_invalid_answers_name_each_bad_field(app: ServiceProcess, body: dict[str, str], error: str, needle: str) -> None:
    client = _person(app)
    draft = _new_draft(client)
    answer = client.post(f"/drafts/{draft}/page/1", data={"csrf_token": _csrf(client), "base_version": "0", **body})
    assert answer.status_code == 422 and answer.json()["error"] == error
    assert needle in answer.json()["fields"]
    assert _version(client, draft) == 0


def test_malformed_requests_get_specific_errors(app: ServiceProcess) -> None:
    client = _person(app)
    draft = _new_draft(client)
    csrf = _csrf(client)
    as_json = client.post(f"/drafts/{draft}/page/1", json={"csrf_token": csrf, "company": "Acme"})
    assert as_json.status_code == 422 and as_json.json()["error"] == "malformed_request"
    assert "application/x-www-form-urlencoded" in as_json.json()["message"]
    no_base = client.post(f"/drafts/{draft}/page/1", data={"csrf_token": csrf, "company": "Acme", "country": "DE"})
    assert no_base.status_code == 422 and "base_version" in no_base.json()["message"]
    far = client.post(f"/drafts/{draft}/page/9", data={"csrf_token": csrf, "base_version": "0"})
    assert far.status_code == 404 and far.json()["error"] == "no_such_page"
    stale = client.post(f"/drafts/{draft}/page/1", data={"csrf_token": csrf, "base_version": "4", "company": "Acme",
                                                         "country": "DE"})
    assert stale.status_code == 409 and stale.json()["error"] == "version_conflict"
    missing = client.get("/api/drafts/d_nothere")
    assert missing.status_code == 404 and missing.json()["error"] == "no_such_draft"
    submission = httpx.post(f"{app.url}/submissions", json={"draft_id": draft, "version": "one"},
                            headers={"X-Operation-Id": "op-m", "Idempotency-Key": "k-m", "X-Fencing-Run": "r",
                                     "X-Fencing-Epoch": "1"})
    assert submission.status_code == 422 and submission.json()["error"] == "malformed_request"
    assert "version" in submission.json()["message"] and "submission_hash" in submission.json()["message"]
    headers = httpx.post(f"{app.url}/submissions", json={"draft_id": draft, "version": 1,
                                                          "submission_hash": "sha256:" + "0" * 64})
    assert headers.status_code == 400 and headers.json()["error"] == "bad_headers"
    assert _version(client, draft) == 0


def test_requests_without_a_live_session_are_refused(app: ServiceProcess) -> None:
    anonymous = httpx.Client(base_url=app.url, timeout=5.0)
    assert anonymous.get("/api/session").json()["error"] == "no_session"
    anonymous.cookies.set(SESSION_COOKIE, "ws_made_up")
    assert anonymous.get("/api/session").json()["error"] == "unknown_session"
    assert anonymous.get("/drafts").status_code == 303  # a page asks for a login instead
    client = _person(app, "globex")
    draft = _new_draft(client)
    revoked = httpx.post(f"{app.url}/sessions/revoke", json={"account": "globex", "reason": "test revocation"})
    assert revoked.json()["revoked"] >= 1
    answer = client.post(f"/drafts/{draft}/page/1", data={"csrf_token": "x", "base_version": "0"})
    assert answer.status_code == 401 and answer.json()["error"] == "session_revoked"
    wrong = httpx.post(f"{app.url}/login", data={"account": "acme", "user": "alice", "password": "guess"})
    assert wrong.status_code == 403 and wrong.json()["error"] == "bad_credential"
    forged = httpx.post(f"{app.url}/login", data={"account": "acme", "credential": "not-a-capability"})
    assert forged.status_code == 403 and forged.json()["error"].startswith("capability:")


def test_sessions_expire_after_their_ttl_and_a_stale_epoch_session_is_fenced(tmp_path: Path) -> None:
    sessions = Sessions(tmp_path, ttl_s=0.2)
    person = sessions.issue("acme", "alice")
    agent = sessions.issue("acme", "run:r1", run_id="r1", epoch=3)
    assert sessions.get(agent.session_id, lambda run: 3).account == "acme"
    with pytest.raises(SessionRefused) as fenced:
        sessions.get(agent.session_id, lambda run: 5)
    assert fenced.value.reason == "session_fenced"

    def expired() -> bool:
        try:
            sessions.get(person.session_id)
        except SessionRefused as exc:
            return exc.reason == "session_expired"
        return False

    wait_for(expired, timeout_s=10, what="the session to expire")
    reloaded = Sessions(tmp_path, ttl_s=0.2)  # the table survives a restart, from its own file
    with pytest.raises(SessionRefused) as again:
        reloaded.get(person.session_id)
    assert again.value.reason == "session_expired"
    with pytest.raises(ValueError, match="positive"):
        Sessions(tmp_path, ttl_s=0)


def test_drafts_reload_from_their_file(tmp_path: Path) -> None:
    drafts = Drafts(tmp_path)
    draft = drafts.create("acme", {"user": "alice"})
    drafts.save_page(draft["draft_id"], "acme", 1, {"company": "Acme", "country": "DE"}, 0, {"user": "alice"})
    again = Drafts(tmp_path)
    assert [v["version"] for v in again.history(draft["draft_id"], "acme")] == [0, 1]
    assert again.current(draft["draft_id"], "acme")["hash"] == drafts.current(draft["draft_id"], "acme")["hash"]
