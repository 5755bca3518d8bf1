"""Real browser sessions for the browser agent: Playwright for Python driving the system's Chromium.

`BrowserPool` is what a worker lends to runs as the `browser` tool. It launches
`/usr/bin/chromium` (never a downloaded browser) lazily, once per thread (the
sync Playwright API is bound to the thread that started it), or uses a browser
it is given (tests share one per module). Each run gets its own browser
context, i.e. its own cookie jar: nothing of one run's session is visible to
another, and nothing of it is ever returned to agent code except through the
methods below, which return page data, never cookies or CSRF tokens.

`BrowserSession` drives the web application through its pages: it always
navigates to a durable URL first and reads what the server confirms; it
never acts on a DOM it did not just load.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from baton import chromium
from baton.read_retry import RETRY_STATUSES, retry_read

if TYPE_CHECKING:  # Playwright is imported only when a browser is needed (it is an optional dependency)
    from playwright.sync_api import Browser, BrowserContext, Page

_DRAFT_URL = re.compile(r"/drafts/([A-Za-z0-9_-]+)/page/1$")
NO_ANSWER = "no_answer"
"""The error code of a step whose answer never came (timeout or transport error): it may have happened."""


def _playwright_error() -> type[Exception]:
    from playwright.sync_api import Error

    return Error


class BrowserStepError(RuntimeError):
    """The application refused a step; `error` is its error code (`session_expired`, `csrf_invalid`, ...)."""

    def __init__(self, step: str, status: int, error: str, message: str) -> None:
        super().__init__(f"{step}: HTTP {status} {error}: {message}")
        self.step, self.status, self.error = step, status, error


def refusal_error(step: str, status: int, text: str) -> BrowserStepError:
    """The application's JSON refusal `{"error", "message"}` as a BrowserStepError (any other page: `unexpected_page`)."""
    try:
        body = json.loads(text)
        return BrowserStepError(step, status, str(body.get("error")), str(body.get("message")))
    except ValueError:
        return BrowserStepError(step, status, "unexpected_page", text[:200])



class BrowserSession:
    """One run's browser context on the web application at `base_url`."""

    def __init__(self, context: BrowserContext, base_url: str) -> None:
        self.context = context
        self.base_url = base_url.rstrip("/")
        self.page: Page = context.new_page()
        self.page.set_default_timeout(15_000)

    def _url(self, path: str) -> str:
        return self.base_url + path

    def _refusal(self, step: str, status: int, text: str) -> BrowserStepError:
        return refusal_error(step, status, text)

    def _submit(self, step: str, button: str) -> str:
        """Click a form's submit button; the path the browser lands on, or BrowserStepError."""
        try:
            with self.page.expect_navigation() as landed:
                self.page.click(button)
            response = landed.value
        except _playwright_error() as exc:
            raise BrowserStepError(step, 0, NO_ANSWER, str(exc).splitlines()[0]) from exc
        if response is None or response.status >= 400:
            status = 0 if response is None else response.status
            raise self._refusal(step, status, "" if response is None else response.text())
        return self.page.url.removeprefix(self.base_url)

    def _load(self, path: str) -> Any:
        """Navigate to `path`, loading it again if the answer was lost."""
        return retry_read(lambda: self.page.goto(self._url(path)), (_playwright_error(),))

    def session_live(self) -> bool:
        """True when the application accepts this context's session right now."""
        try:
            return self.page.request.get(self._url("/api/session")).status == 200
        except _playwright_error():
            return False  # unknown: the caller logs in again, which is always safe

    def login(self, account: str, credential: Callable[[], str]) -> None:
        """Log in through the login page with a scoped credential (asked for at the last moment, never kept)."""
        self._load("/login?next=/drafts")
        self.page.fill("#account", account)
        self.page.fill("#credential", credential())
        landed = self._submit("login", "#login-submit")
        if landed != "/drafts":
            raise BrowserStepError("login", 200, "unexpected_page", f"landed on {landed}")

    def new_draft(self) -> str:
        """Start a draft from the drafts page; its id, from the URL the server redirected to."""
        self._load("/drafts")
        landed = self._submit("new draft", "#new-draft-submit")
        found = _DRAFT_URL.search(landed)
        if found is None:
            raise BrowserStepError("new draft", 200, "unexpected_page", f"landed on {landed}")
        return found.group(1)

    def fill_page(self, path: str, answers: Mapping[str, str]) -> str:
        """Open a form page by its durable path, fill the given fields, save; the path landed on."""
        response = self._load(path)
        if response is None or response.status >= 400:
            raise self._refusal(f"open {path}", 0 if response is None else response.status,
                                "" if response is None else response.text())
        if self.page.url.removeprefix(self.base_url).startswith("/login"):
            raise BrowserStepError(f"open {path}", 401, "no_session", "the application asked for a login")
        for name, value in answers.items():
            self.page.fill(f"#field-{name}", value)
        return self._submit(f"save {path}", "#page-submit")

    def draft(self, draft_id: str) -> dict[str, Any] | None:
        """The draft as the server reports it (`GET /api/drafts/{id}`), None if it has no such draft."""
        response = retry_read(lambda: self.page.request.get(self._url(f"/api/drafts/{draft_id}")),
                              (_playwright_error(),), again=lambda answer: answer.status in RETRY_STATUSES)
        if response.status == 404:
            return None
        if response.status != 200:
            raise self._refusal(f"read draft {draft_id}", response.status, response.text())
        return dict(response.json())

    def close(self) -> None:
        try:
            self.context.close()
        except Exception:  # noqa: BLE001 - a drained pool's browser may already be gone
            pass


class BrowserPool:
    """Browser sessions for runs, one context per run, one Chromium per thread (or a given one)."""

    def __init__(self, base_url: str | Callable[[], str], *, browser: Browser | None = None) -> None:
        self._base_url = base_url
        self._shared = browser
        self._local = threading.local()
        self.launches = 0

    @property
    def base_url(self) -> str:
        return self._base_url() if callable(self._base_url) else self._base_url

    def _browser(self) -> Browser:
        if self._shared is not None:
            return self._shared
        browser: Browser | None = getattr(self._local, "browser", None)
        if browser is None or not browser.is_connected():
            playwright = getattr(self._local, "playwright", None)
            if playwright is None:
                from playwright.sync_api import sync_playwright

                playwright = self._local.playwright = sync_playwright().start()
            browser = self._local.browser = chromium.launch(playwright)
            self.launches += 1
        return browser

    def _sessions(self) -> dict[str, BrowserSession]:
        if not hasattr(self._local, "sessions"):
            self._local.sessions = {}
        return self._local.sessions  # type: ignore[no-any-return]

    def held(self, run_id: str) -> BrowserSession | None:
        """The session this thread already holds for `run_id` (from an earlier step on this worker), or None."""
        session = self._sessions().get(run_id)
        if session is not None and not self._browser().is_connected():
            return None
        return session

    def session(self, run_id: str) -> BrowserSession:
        """The session held for `run_id`, or a fresh context with no cookies at all."""
        held = self.held(run_id)
        if held is None:
            held = self._sessions()[run_id] = BrowserSession(self._browser().new_context(), self.base_url)
        return held

    def discard(self, run_id: str) -> None:
        """Close the run's context (the run ended or moved away)."""
        session = self._sessions().pop(run_id, None)
        if session is not None:
            session.close()

    def drain(self) -> int:
        """The pool goes away: close every context this thread holds; return how many."""
        sessions = self._sessions()
        count = len(sessions)
        for run_id in list(sessions):
            self.discard(run_id)
        return count

    def close(self) -> None:
        """Close this thread's contexts, and its browser unless it was given one."""
        self.drain()
        if self._shared is None:
            browser = getattr(self._local, "browser", None)
            playwright = getattr(self._local, "playwright", None)
            if browser is not None:
                browser.close()
            if playwright is not None:
                playwright.stop()
            self._local.browser = self._local.playwright = None
