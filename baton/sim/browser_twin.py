"""An HTTP-level browser for the simulation: the `browser` tool without Chromium.

Chromium cannot run on the virtual clock, so `TwinPool` / `TwinSession` offer the
methods the browser agent calls on `BrowserPool` / `BrowserSession`, and do what
a browser does at the HTTP level: each run has its own cookie jar, every page is
the application's own HTML (loaded over the transport given, e.g. the sim
network's), forms are read from that HTML (hidden fields such as the CSRF token
included) and posted back as a browser posts them. Cookies and CSRF tokens stay
inside the twin: its methods return page data only, as BrowserSession's do.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any

import httpx

from baton.agents.browser_session import _DRAFT_URL, NO_ANSWER, BrowserStepError, refusal_error
from baton.read_retry import RETRY_STATUSES, retry_read


@dataclass
class _Form:
    """One `<form>` as the page shows it: where it posts, its fields' values, and input id -> field name."""

    form_id: str
    action: str
    values: dict[str, str] = field(default_factory=dict)
    ids: dict[str, str] = field(default_factory=dict)


class _Forms(HTMLParser):
    """Every form of a page with its inputs (the app's pages are plain forms, no scripts)."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: dict[str, _Form] = {}
        self._open: _Form | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        if tag == "form":
            self._open = self.forms[found.get("id", "")] = _Form(found.get("id", ""), found.get("action", ""))
        elif tag == "input" and self._open is not None and found.get("name"):
            self._open.values[found["name"]] = found.get("value", "")
            if found.get("id"):
                self._open.ids[found["id"]] = found["name"]

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._open = None


def forms_of(page: str) -> dict[str, _Form]:
    """The forms of an HTML page, by form id."""
    parser = _Forms()
    parser.feed(page)
    return parser.forms


class TwinSession:
    """One run's cookie jar on the web application at `base_url`, driven through its pages."""

    def __init__(self, base_url: str, transport: httpx.BaseTransport | None = None, *, timeout_s: float = 15.0) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(base_url=self.base_url, transport=transport, follow_redirects=True,
                                  timeout=timeout_s)

    def _landed(self, response: httpx.Response) -> str:
        return response.url.path + (f"?{response.url.query.decode()}" if response.url.query else "")

    def _get(self, path: str) -> httpx.Response:
        """GET `path`, asked again if its answer was lost (as the live session reloads a page)."""
        return retry_read(lambda: self._http.get(path), (httpx.TransportError,),
                          again=lambda response: response.status_code in RETRY_STATUSES)

    def _open(self, step: str, path: str) -> tuple[httpx.Response, dict[str, _Form]]:
        response = self._get(path)
        if response.status_code >= 400:
            raise refusal_error(step, response.status_code, response.text)
        return response, forms_of(response.text)

    def _post(self, step: str, form: _Form, fill: Mapping[str, str] | None = None) -> str:
        """Post `form` with its shown values, inputs given by id changed; the path landed on, or BrowserStepError."""
        values = dict(form.values)
        for input_id, value in (fill or {}).items():
            values[form.ids.get(input_id, input_id)] = value
        try:
            response = self._http.post(form.action, data=values)
        except httpx.TransportError as exc:
            raise BrowserStepError(step, 0, NO_ANSWER, repr(exc)) from exc
        if response.status_code >= 400:
            raise refusal_error(step, response.status_code, response.text)
        return self._landed(response)

    def session_live(self) -> bool:
        """True when the application accepts this jar's session right now."""
        try:
            return self._http.get("/api/session").status_code == 200
        except httpx.TransportError:
            return False  # unknown: the caller logs in again, which is always safe

    def login(self, account: str, credential: Callable[[], str]) -> None:
        """Log in through the login page with a scoped credential (asked for at the last moment, never kept)."""
        _, forms = self._open("login", "/login?next=/drafts")
        landed = self._post("login", forms["login"], {"account": account, "credential": credential()})
        if landed != "/drafts":
            raise BrowserStepError("login", 200, "unexpected_page", f"landed on {landed}")

    def new_draft(self) -> str:
        """Start a draft from the drafts page; its id, from the URL the server redirected to."""
        response, forms = self._open("new draft", "/drafts")
        if "new-draft" not in forms:
            raise BrowserStepError("new draft", 401, "no_session", f"landed on {self._landed(response)}")
        landed = self._post("new draft", forms["new-draft"])
        found = _DRAFT_URL.search(landed)
        if found is None:
            raise BrowserStepError("new draft", 200, "unexpected_page", f"landed on {landed}")
        return found.group(1)

    def fill_page(self, path: str, answers: Mapping[str, str]) -> str:
        """Open a form page by its durable path, fill the given fields, save; the path landed on."""
        response, forms = self._open(f"open {path}", path)
        if response.url.path.startswith("/login"):
            raise BrowserStepError(f"open {path}", 401, "no_session", "the application asked for a login")
        if "page-form" not in forms:
            raise BrowserStepError(f"open {path}", response.status_code, "unexpected_page", response.text[:200])
        return self._post(f"save {path}", forms["page-form"], {f"field-{k}": v for k, v in answers.items()})

    def draft(self, draft_id: str) -> dict[str, Any] | None:
        """The draft as the server reports it (`GET /api/drafts/{id}`), None if it has no such draft."""
        response = self._get(f"/api/drafts/{draft_id}")
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise refusal_error(f"read draft {draft_id}", response.status_code, response.text)
        return dict(response.json())

    def close(self) -> None:
        self._http.close()


class TwinPool:
    """The `browser` tool of a simulated worker: one TwinSession (one cookie jar) per run."""

    def __init__(self, base_url: str | Callable[[], str], transport: httpx.BaseTransport | None = None, *,
                 timeout_s: float = 15.0) -> None:
        self._base_url = base_url
        self._transport = transport
        self._timeout_s = timeout_s
        self._sessions: dict[str, TwinSession] = {}
        self.launches = 0

    @property
    def base_url(self) -> str:
        return self._base_url() if callable(self._base_url) else self._base_url

    def held(self, run_id: str) -> TwinSession | None:
        """The session this worker already holds for `run_id`, or None."""
        return self._sessions.get(run_id)

    def session(self, run_id: str) -> TwinSession:
        """The session held for `run_id`, or a fresh jar with no cookies at all."""
        held = self._sessions.get(run_id)
        if held is None:
            held = self._sessions[run_id] = TwinSession(self.base_url, self._transport, timeout_s=self._timeout_s)
        return held

    def discard(self, run_id: str) -> None:
        """Drop the run's jar (the run ended or moved away)."""
        session = self._sessions.pop(run_id, None)
        if session is not None:
            session.close()

    def drain(self) -> int:
        """The worker goes away: drop every jar; return how many."""
        count = len(self._sessions)
        for run_id in list(self._sessions):
            self.discard(run_id)
        return count

    def close(self) -> None:
        self.drain()
