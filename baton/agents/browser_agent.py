"""The browser agent: log in, fill a three-page form as a server-side draft, verify it, submit it once.

Written only against the SDK and two tools the worker lends it: `browser` (a
`baton.agents.browser_session.BrowserPool`: real Chromium through Playwright)
and `webapp` (the application's read side, for the postcondition). The final
submit is the consequential side effect and goes through `ctx.perform`, i.e.
the gateway, with an idempotency key bound to the snapshot's hash; the
application checks the capability, the fencing epoch and the key itself.

What the checkpoint holds about the browser (memory `browser`): the draft id,
the version and snapshot hash the server confirmed when read back, and the
next step, whose durable URL is `/drafts/<id>/page/<n>`. Never a cookie, a
session id, a CSRF token or the login credential: those live in the browser
context of one worker, and a scoped credential from the authority opens a
new session wherever the run resumes.

Every time the agent (re)starts before the submit it reads the server's draft
and picks the sec. 13 class that holds (`baton.agents.browser_resume`),
recording it as a BROWSER_RESUME_CHOSEN event: reopen the durable URL in the
live session, rebuild the session from a scoped credential, restart from the
server's newer state, or escalate when the draft was submitted or changed by
someone else. The old DOM is never trusted: every step loads its page anew.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from baton.agents.browser_resume import ConfirmedDraft, ServerDraft, choose_resume
from baton.agents.browser_session import NO_ANSWER, BrowserPool, BrowserSession, BrowserStepError
from baton.agents.verifiers import Verdict
from baton.identity import sha256_ref
from baton.lifecycle import TERMINAL
from baton.models import AuthorityLevel, Boundary, VerdictResult
from baton.resumability import BrowserResumeClass
from baton.runtime.sdk import RunContext
from baton.targets.webapp_form import PAGES, complete, page_fields, snapshot_bytes
from baton.targets.webapp_service import LOGIN_OPERATION, SUBMIT_LEVEL, SUBMIT_OPERATION, account_scope

BROWSER_STATE = "browser"
DRAFT_PREFIX = "webapp://drafts/"
FRESHNESS_S = 300.0
FORM_VERIFIER = "form-check-1"
_LOGIN_ATTEMPTS = 3
_SAVE_ATTEMPTS = 3
_SESSION_LOST = frozenset({"no_session", "unknown_session", "session_expired", "session_revoked"})
_BEFORE_COMMIT = (
    Boundary.GENERATING,
    Boundary.CANDIDATE_READY,
    Boundary.VERIFIED,
    Boundary.AWAITING_AUTHORITY,
    Boundary.AUTHORIZED,
)


def default_answers(company: str) -> dict[str, str]:
    """A complete set of answers for one company (what fleet runs fill in)."""
    return {"company": company, "country": "DE", "plan": "team", "seats": "12",
            "contact_email": f"ops@{company.lower().replace(' ', '-')}.example", "notes": "filled by a Baton run"}


def durable_path(confirmed: ConfirmedDraft) -> str:
    """The URL path of the next step: it names the draft and the page, nothing else."""
    if confirmed.next_page > len(PAGES):
        return f"/drafts/{confirmed.draft_id}/review"
    return f"/drafts/{confirmed.draft_id}/page/{confirmed.next_page}"


def check_submission(candidate: bytes, account: str, answers: Mapping[str, str]) -> Verdict:
    """PASS when the snapshot is of `account`, complete, and holds exactly the task's answers."""
    try:
        snapshot = json.loads(candidate)
        held = dict(snapshot["answers"])
        owner = snapshot["account"]
    except (ValueError, KeyError, TypeError) as exc:
        return Verdict(VerdictResult.FAIL, f"not a draft snapshot: {exc}", FORM_VERIFIER)
    if owner != account:
        return Verdict(VerdictResult.FAIL, f"the draft belongs to {owner!r}, the task to {account!r}", FORM_VERIFIER)
    missing = complete(held)
    if missing:
        return Verdict(VerdictResult.FAIL, f"required fields missing: {', '.join(missing)}", FORM_VERIFIER)
    wrong = sorted(name for name, value in answers.items() if held.get(name, "") != value)
    if wrong:
        return Verdict(VerdictResult.FAIL, f"answers differ from the task: {', '.join(wrong)}", FORM_VERIFIER)
    return Verdict(VerdictResult.PASS, f"{len(held)} answers of {account} match the task", FORM_VERIFIER)


class _Browsing:
    """One agent call's view of the browser: the session, and how to rebuild it."""

    def __init__(self, ctx: RunContext, pool: BrowserPool, account: str) -> None:
        self.ctx, self.pool, self.account = ctx, pool, account
        self.inherited = pool.held(ctx.run_id) is not None
        """True when this worker already held a browser context for the run (an earlier step here)."""
        self.session: BrowserSession = pool.session(ctx.run_id)

    def login(self) -> None:
        """A new session from a scoped credential the authority issues now (held in this frame only).

        The credential lives no longer than the run's lease, so it is asked for when the login form is
        already filled in, and asked for again if it expired on the way.
        """
        def credential() -> str:
            return self.ctx.scoped_credential(LOGIN_OPERATION, scope=account_scope(self.account),
                                              level=AuthorityLevel.OBSERVE)

        for attempt in range(_LOGIN_ATTEMPTS):
            try:
                self.session.login(self.account, credential)
                return
            except BrowserStepError as exc:  # an expired credential, or a login whose answer was lost: log in anew
                if exc.error not in ("capability:expired", NO_ANSWER) or attempt == _LOGIN_ATTEMPTS - 1:
                    raise

    def step(self, action: Any) -> Any:
        """Run one browser action; if the session was lost meanwhile, rebuild it once and redo the action."""
        try:
            return action()
        except BrowserStepError as exc:
            if exc.error not in _SESSION_LOST:
                raise
        self.login()
        return action()

    def draft(self, draft_id: str) -> dict[str, Any] | None:
        return self.step(lambda: self.session.draft(draft_id))  # type: ignore[no-any-return]


def _confirmed(ctx: RunContext) -> ConfirmedDraft | None:
    return ConfirmedDraft.from_memory(ctx.memory(BROWSER_STATE))


def _confirm(ctx: RunContext, view: Mapping[str, Any], next_page: int) -> ConfirmedDraft:
    """Keep what the server just confirmed, and seal it (a quiesce point)."""
    confirmed = ConfirmedDraft(str(view["draft_id"]), int(view["version"]), str(view["hash"]), next_page)
    ctx.remember(BROWSER_STATE, confirmed.as_memory())
    ctx.checkpoint()
    return confirmed


def _resume(ctx: RunContext, browsing: _Browsing) -> None:
    """Pick, record and act on the sec. 13 class that holds now."""
    confirmed = _confirmed(ctx)
    live = browsing.inherited and browsing.session.session_live()
    if not live:
        browsing.login()
    view = browsing.draft(confirmed.draft_id) if confirmed is not None else None
    server = ServerDraft.from_view(view) if view is not None else None
    choice = choose_resume(ctx.run_id, confirmed, server, session_live=live)
    ctx.record_browser_resume(choice.resume, choice.reason, {
        "draft_id": None if confirmed is None else confirmed.draft_id,
        "confirmed_version": None if confirmed is None else confirmed.version,
        "server_version": None if server is None else server.current.version,
        "durable_url": None if confirmed is None else durable_path(confirmed),
    })
    if choice.resume is BrowserResumeClass.NOT_RESUMABLE:
        ctx.escalate(f"the browser workflow cannot be resumed safely: {choice.reason}")
    if choice.resume is BrowserResumeClass.RESTART_FROM_SERVER_STATE and view is not None:
        last_page = int(view["history"][-1]["page"])
        candidate = ctx.candidate
        if candidate is not None and candidate.artifact_hash != view["hash"] and ctx.boundary in _BEFORE_COMMIT:
            ctx.withdraw_candidate("the server's draft moved past the candidate")
        _confirm(ctx, view, last_page + 1)


def _revalidate(ctx: RunContext, browsing: _Browsing) -> None:
    """Re-read every draft observation the SDK says may not be used as recorded."""
    for observation, _mode in ctx.needs_revalidation():
        if not observation.source.startswith(DRAFT_PREFIX):
            continue
        view = browsing.draft(observation.source.removeprefix(DRAFT_PREFIX))
        if view is None:
            ctx.drop_observation(observation, "the application no longer has this draft")
            continue
        ctx.revalidate(observation, snapshot_bytes(view["draft_id"], view["account"], view["version"], view["answers"]))


def _new_draft(browsing: _Browsing) -> str:
    """Start a draft; if the answer was lost, start another (a draft nobody answered for stays an unsubmitted
    orphan on the server: nothing is ever submitted from it)."""
    for attempt in range(_SAVE_ATTEMPTS):
        try:
            return str(browsing.step(browsing.session.new_draft))
        except BrowserStepError as exc:
            if exc.error != NO_ANSWER or attempt == _SAVE_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable: the last attempt returns or raises")


def _fill(ctx: RunContext, browsing: _Browsing, answers: Mapping[str, str]) -> None:
    """Fill the pages still to do, confirming each save by reading the draft back; then propose it."""
    confirmed = _confirmed(ctx)
    if confirmed is None:
        draft_id = _new_draft(browsing)
        view = browsing.draft(draft_id)
        if view is None:
            ctx.fail(f"the application lost draft {draft_id} right after creating it")
        confirmed = _confirm(ctx, view, 1)
    unanswered = 0
    while confirmed.next_page <= len(PAGES):
        page = confirmed.next_page
        values = {field.name: answers.get(field.name, "") for field in page_fields(page)}
        path = durable_path(confirmed)
        lost = False
        try:
            browsing.step(lambda: browsing.session.fill_page(path, values))
        except BrowserStepError as exc:
            if exc.error in ("version_conflict", "draft_submitted"):
                ctx.escalate(f"the draft moved under the run while it filled page {page}: {exc}")
            if exc.error != NO_ANSWER or unanswered == _SAVE_ATTEMPTS - 1:
                raise
            lost = True  # the save may or may not have happened: the draft read back below says which
            unanswered += 1
        view = browsing.draft(confirmed.draft_id)
        if lost and view is not None and int(view["version"]) == confirmed.version:
            continue  # the lost save never reached the draft: fill the page again
        if view is None or int(view["version"]) != confirmed.version + 1 or any(
                view["answers"].get(name) != value.strip() for name, value in values.items() if value.strip()):
            ctx.escalate(f"the server did not confirm page {page} of draft {confirmed.draft_id} as saved")
        confirmed = _confirm(ctx, view, page + 1)
    view = browsing.draft(confirmed.draft_id)
    if view is None:
        ctx.escalate(f"draft {confirmed.draft_id} disappeared before it could be proposed")
    content = snapshot_bytes(view["draft_id"], view["account"], view["version"], view["answers"])
    if sha256_ref(content) != view["hash"]:
        ctx.fail(f"the server's hash of draft {confirmed.draft_id} does not match its snapshot")
    observation = ctx.observe(DRAFT_PREFIX + confirmed.draft_id, {"draft_id": confirmed.draft_id}, content,
                              freshness_s=FRESHNESS_S)
    ctx.propose(content, kind="form-submission", summary=f"draft {confirmed.draft_id} v{view['version']}",
                inputs=[observation])


def _postcondition(ctx: RunContext) -> None:
    webapp = ctx.tool("webapp")
    candidate = ctx.candidate
    if candidate is None:
        ctx.fail("committed without a candidate")
    mine = [s for s in webapp.submissions() if s.get("run_id") == ctx.run_id]
    matching = [s for s in mine if s.get("submission_hash") == candidate.artifact_hash]
    ctx.confirm_postcondition(len(mine) == 1 and len(matching) == 1,
                              f"{len(mine)} submission(s) recorded by the application for this run, "
                              f"{len(matching)} of the verified draft")


def browser_agent(ctx: RunContext) -> None:
    """Run (or resume) a browser run until it ends."""
    pool: BrowserPool = ctx.tool("browser")
    account = str(ctx.task.get("account", "acme"))
    answers = {str(k): str(v) for k, v in dict(ctx.task.get("answers") or default_answers(account)).items()}
    browsing = _Browsing(ctx, pool, account)
    try:
        if ctx.boundary in _BEFORE_COMMIT:
            _resume(ctx, browsing)
        while ctx.boundary not in TERMINAL:
            boundary = ctx.boundary
            if boundary in _BEFORE_COMMIT:
                _revalidate(ctx, browsing)
                if ctx.boundary is not boundary:
                    continue
            if boundary is Boundary.GENERATING:
                _fill(ctx, browsing, answers)
            elif boundary is Boundary.CANDIDATE_READY:
                ctx.verify(lambda content: check_submission(content, account, answers),
                           inputs={"account": account, "fields": len(answers)})
            elif boundary in (Boundary.VERIFIED, Boundary.AWAITING_AUTHORITY):
                ctx.request_approval(SUBMIT_OPERATION, level=SUBMIT_LEVEL)
            elif boundary is Boundary.AUTHORIZED:
                candidate = ctx.candidate
                assert candidate is not None
                snapshot = json.loads(ctx.candidate_bytes())
                ctx.perform(SUBMIT_OPERATION, "webapp",
                            {"draft_id": snapshot["draft_id"], "version": snapshot["version"],
                             "submission_hash": candidate.artifact_hash},
                            key=f"{ctx.run_id}:submit:{candidate.artifact_hash[7:23]}", level=SUBMIT_LEVEL)
            elif boundary is Boundary.COMMITTED:
                _postcondition(ctx)
            else:
                ctx.fail(f"browser agent cannot continue from {boundary.value}")
    finally:
        if ctx.boundary in TERMINAL:
            pool.discard(ctx.run_id)
