"""A web application with login sessions, CSRF tokens, a three-page form and a consequential submit.

Run: `python -m baton.targets.webapp_service --data DIR [--port P] [--session-ttl-s S] --trust jwks.json`.
It binds 127.0.0.1 (port 0 = a free port) and writes the bound port to `DIR/port`.
In production DIR is `BATON_HOME/targets/webapp/`. Records: see `docs/targets.md`.

Browser side (cookie `wa_session`, HttpOnly, SameSite=Strict; form posts carry
the session's `csrf_token`, JSON posts the `X-CSRF-Token` header):

- `GET /login`, `POST /login` (form: `account` and either `credential`, a scoped
  capability for operation `webapp.login` on the account's scope (agents), or
  `user` + `password` from `DIR/accounts.json` (people)); 303 to `next`.
- `GET /drafts`, `POST /drafts` (start a draft, 303 to its first page).
- `GET /drafts/{id}/page/{n}` and `POST /drafts/{id}/page/{n}` (form fields,
  `csrf_token`, `base_version`): saves the page as the draft's next version,
  303 to the next page or `/drafts/{id}/review`.
- `GET /api/session`, `GET /api/drafts/{id}` (the draft, its version history
  and its submission, if any): what a client reads back as confirmed state.

Machine side (what the mutation gateway calls):

- `POST /submissions` with the mutation headers of `baton.targets.http_server`
  and JSON `{draft_id, version, submission_hash}`: submits the draft once. It
  needs no session: its authority is the capability, checked by the app itself
  (operation `submit`, artifact = `submission_hash`, which must be the hash of
  the draft's current snapshot), with the fencing epoch and the idempotency key.
- `GET /submissions`, `GET /operations/{id}`, `POST /fence`, `GET /health`.
- `POST /sessions/revoke` (`{account?, runs?, reason?}`): revokes live sessions (an
  operator's action; tests use it).

Every refusal is JSON `{"error", "message"}` with a specific `error` code:
`no_session`, `unknown_session`, `session_expired`, `session_revoked`,
`session_fenced` (401), `csrf_missing`, `csrf_invalid`, `bad_credential`,
`capability:<reason>`, `not_a_writer` (403), `no_such_draft`, `no_such_page`
(404), `version_conflict`, `draft_submitted`, `draft_changed`, `fenced`,
`already_submitted` (409), `malformed_request`, `invalid_fields`,
`incomplete_draft`, `no_such_draft_for_submission`, `payload_mismatch` (422).
Nothing is changed by a refused request.
"""

from __future__ import annotations

import datetime as dt
import hmac
import json
import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote

import httpx
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from baton import clock
from baton.authority import CapabilityVerifier
from baton.checker import TargetEffect
from baton.errors import CapabilityError, FencedTokenError
from baton.fencing import FencingToken
from baton.identity import ref_of
from baton.models.authority import AuthorityLevel
from baton.targets.audit import count_by_key, effects_of
from baton.targets.capability_guard import KeyFile, TargetGuard, TargetPolicy, guard_from_arguments
from baton.durable_files import read_json, write_json
from baton.targets.http_client import MutationClient
from baton.targets.http_server import (
    PORT_FILE,
    Ambiguity,
    apply_mutation,
    install_common_routes,
    mutation_headers,
    origin_placement,
    refusal,
    serve,
    service_arguments,
    BadHeadersError,
)
from baton.targets.mutation_log import MutationLog
from baton.targets.service_process import ServiceProcess
from baton.targets.webapp_form import NoSuchPageError, PAGES, complete, page_fields, validate_page
from baton.targets.webapp_pages import drafts_page, form_page, login_page, review_page
from baton.targets.webapp_state import DraftError, Drafts, Session, SessionRefused, Sessions

SERVICE_NAME = "webapp"
SUBMISSIONS_FILE = "submissions.jsonl"
ACCOUNTS_FILE = "accounts.json"
SESSION_COOKIE = "wa_session"
CSRF_HEADER = "X-CSRF-Token"
LOGIN_OPERATION = "webapp.login"
SUBMIT_OPERATION = "submit"
SUBMIT_LEVEL = AuthorityLevel.SANDBOX_MUTATE
LOGIN_LEVEL = AuthorityLevel.OBSERVE
DEFAULT_ACCOUNTS = ("acme", "globex", "initech")
DEFAULT_SESSION_TTL_S = 600.0


def account_scope(account: str) -> str:
    """The artifact hash a login capability names: it admits its holder to that one account."""
    return ref_of({"webapp_account": account})


def submit_policy() -> TargetPolicy:
    """What the app's own guard demands of a submission's capability."""
    return TargetPolicy(SUBMIT_OPERATION, SUBMIT_LEVEL, artifact_field="submission_hash")


class SubmissionBody(BaseModel):
    """Submit draft `draft_id` as it stands at `version`, whose snapshot hashes to `submission_hash`."""

    model_config = ConfigDict(extra="forbid")

    draft_id: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
    version: int = Field(ge=1)
    submission_hash: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")


class RevokeBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    account: str | None = None
    runs: list[str] | None = None
    reason: str = "revoked by an operator"


def load_accounts(data_dir: Path) -> dict[str, dict[str, str]]:
    """`account -> {user: password}` from `accounts.json`, created with random passwords when absent."""
    path = data_dir / ACCOUNTS_FILE
    document = read_json(path)
    if document is None:
        document = {"accounts": {name: {"people": {"alice": secrets.token_urlsafe(12)}} for name in DEFAULT_ACCOUNTS}}
        write_json(path, document)
    return {name: dict(entry.get("people", {})) for name, entry in document["accounts"].items()}


async def _form(request: Request) -> dict[str, str]:
    """The fields of an HTML form post; ValueError for another body or a repeated field."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        raise ValueError(f"expected an HTML form (application/x-www-form-urlencoded), got {kind or 'no content type'}")
    try:
        parsed = parse_qs((await request.body()).decode("utf-8"), keep_blank_values=True, strict_parsing=False)
    except UnicodeDecodeError:
        raise ValueError("the form body is not UTF-8") from None
    repeated = sorted(name for name, values in parsed.items() if len(values) > 1)
    if repeated:
        raise ValueError(f"fields given more than once: {', '.join(repeated)}")
    return {name: values[0] for name, values in parsed.items()}


def _malformed(message: str) -> JSONResponse:
    return refusal(422, "malformed_request", message)


def create_app(
    data_dir: Path | str, *, session_ttl_s: float = DEFAULT_SESSION_TTL_S, trust: Path | None = None,
    guard: TargetGuard | None = None,
) -> FastAPI:
    """The web application over the records in `data_dir`.

    `trust` (a jwks.json) lets agents log in with scoped credentials and, with
    `guard` (by default one built from it with `submit_policy`), makes the app
    check every submission's capability itself.
    """
    data = Path(data_dir)
    log = MutationLog(data, SUBMISSIONS_FILE)
    sessions = Sessions(data, session_ttl_s)
    drafts = Drafts(data)
    accounts = load_accounts(data)
    keys = KeyFile(trust) if trust is not None else None
    verifiers: list[CapabilityVerifier] = []  # the one for the key set loaded last (rebuilt when it rotates)
    if guard is None and keys is not None:
        guard = TargetGuard(keys, submit_policy())
    app = FastAPI(title="baton web application")
    install_common_routes(app, log, SERVICE_NAME)

    @app.exception_handler(RequestValidationError)
    async def malformed(_request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg')}" for e in exc.errors())
        return _malformed(f"the request does not have the expected shape: {problems}")

    def fence_mark(run_id: str) -> int | None:
        return log.fence.highest(run_id)

    def submitted(draft_id: str) -> dict[str, Any] | None:
        return next((record for record in log.effects() if record.get("draft_id") == draft_id), None)

    def session_of(request: Request) -> Session:
        return sessions.get(request.cookies.get(SESSION_COOKIE), fence_mark)

    def check_csrf(session: Session, given: str | None) -> JSONResponse | None:
        if not given:
            return refusal(403, "csrf_missing", "the request carries no CSRF token (form field csrf_token or "
                                                f"header {CSRF_HEADER})")
        if not hmac.compare_digest(given.encode(), session.csrf_token.encode()):
            return refusal(403, "csrf_invalid", "the CSRF token is not the one issued with this session")
        return None

    def to_login(request: Request) -> RedirectResponse:
        return RedirectResponse(f"/login?next={quote(request.url.path)}", status_code=303)

    def verifier() -> CapabilityVerifier:
        assert keys is not None
        loaded = keys()
        if not verifiers or verifiers[0].trusted is not loaded:
            verifiers[:] = [CapabilityVerifier(loaded)]
        return verifiers[0]

    def agent_login(account: str, credential: str) -> Session:
        if keys is None:
            raise CapabilityError("this application trusts no authority key: scoped credentials cannot be checked",
                                  reason="no_trust")
        check = verifier()
        claims = check.decode(credential)
        check.check(claims, run_id=claims.run_id, epoch=claims.epoch, operation=LOGIN_OPERATION,
                    artifact_hash=account_scope(account), required_level=LOGIN_LEVEL,
                    now=clock.now())
        log.fence.admit(FencingToken(claims.run_id, claims.epoch))  # a stale owner cannot log in either
        return sessions.issue(account, f"run:{claims.run_id}", run_id=claims.run_id, epoch=claims.epoch)

    @app.get("/login", response_class=HTMLResponse)
    async def login_form(next: str = "/drafts") -> str:  # noqa: A002 - the query parameter's name
        return login_page(next)

    @app.post("/login", response_model=None)
    async def login(request: Request) -> Response:
        try:
            form = await _form(request)
        except ValueError as exc:
            return _malformed(str(exc))
        account = form.get("account", "").strip()
        if account not in accounts:
            return refusal(403, "bad_credential", f"no account {account!r}")
        credential, user, password = form.get("credential", ""), form.get("user", ""), form.get("password", "")
        if credential:
            try:
                session = agent_login(account, credential)
            except CapabilityError as exc:
                return refusal(403, f"capability:{exc.reason}", str(exc))
            except FencedTokenError as exc:
                return refusal(409, "fenced", str(exc))
        elif user and password:
            known = accounts[account].get(user)
            if known is None or not hmac.compare_digest(known.encode(), password.encode()):
                return refusal(403, "bad_credential", f"wrong user or password for account {account!r}")
            session = sessions.issue(account, user)
        else:
            return refusal(403, "bad_credential", "give a scoped credential, or a user and a password")
        target = form.get("next", "/drafts")
        local = target.startswith("/") and not target.startswith("//")  # never a redirect off this application
        response = RedirectResponse(target if local else "/drafts", status_code=303)
        response.set_cookie(SESSION_COOKIE, session.session_id, httponly=True, samesite="strict", path="/",
                            max_age=int(session_ttl_s))
        return response

    @app.get("/api/session", response_model=None)
    async def whoami(request: Request) -> Response:
        try:
            session = session_of(request)
        except SessionRefused as exc:
            return refusal(401, exc.reason, str(exc))
        return JSONResponse({"account": session.account, "actor": session.actor,
                             "expires_at": session.expires_at.isoformat()})

    @app.get("/drafts", response_model=None)
    async def start(request: Request) -> Response:
        try:
            session = session_of(request)
        except SessionRefused:
            return to_login(request)
        return HTMLResponse(drafts_page(session.account, session.csrf_token))

    @app.post("/drafts", response_model=None)
    async def new_draft(request: Request) -> Response:
        try:
            session = session_of(request)
            form = await _form(request)
        except SessionRefused as exc:
            return refusal(401, exc.reason, str(exc))
        except ValueError as exc:
            return _malformed(str(exc))
        bad = check_csrf(session, form.get("csrf_token"))
        if bad is not None:
            return bad
        draft = drafts.create(session.account, session.writer())
        return RedirectResponse(f"/drafts/{draft['draft_id']}/page/1", status_code=303)

    @app.get("/drafts/{draft_id}/page/{page}", response_model=None)
    async def show_page(draft_id: str, page: int, request: Request) -> Response:
        try:
            session = session_of(request)
        except SessionRefused:
            return to_login(request)
        try:
            page_fields(page)
            draft = drafts.current(draft_id, session.account)
        except NoSuchPageError as exc:
            return refusal(404, "no_such_page", str(exc))
        except DraftError as exc:
            return refusal(exc.status, exc.reason, str(exc))
        return HTMLResponse(form_page(draft, page, session.csrf_token))

    @app.post("/drafts/{draft_id}/page/{page}", response_model=None)
    async def save_page(draft_id: str, page: int, request: Request) -> Response:
        try:
            session = session_of(request)
            form = await _form(request)
        except SessionRefused as exc:
            return refusal(401, exc.reason, str(exc))
        except ValueError as exc:
            return _malformed(str(exc))
        bad = check_csrf(session, form.pop("csrf_token", None))
        if bad is not None:
            return bad
        base = form.pop("base_version", "")
        if not base.isdigit():
            return _malformed(f"base_version must be the draft version the form was shown for, not {base!r}")
        try:
            answers, problems = validate_page(page, form)
            if problems:
                return refusal(422, "invalid_fields", "; ".join(f"{k}: {v}" for k, v in sorted(problems.items())),
                               fields=problems)
            drafts.current(draft_id, session.account)
            if submitted(draft_id) is not None:
                return refusal(409, "draft_submitted", f"draft {draft_id} was already submitted")
            drafts.save_page(draft_id, session.account, page, answers, int(base), session.writer())
        except NoSuchPageError as exc:
            return refusal(404, "no_such_page", str(exc))
        except DraftError as exc:
            return refusal(exc.status, exc.reason, str(exc))
        following = f"/drafts/{draft_id}/page/{page + 1}" if page < len(PAGES) else f"/drafts/{draft_id}/review"
        return RedirectResponse(following, status_code=303)

    @app.get("/drafts/{draft_id}/review", response_model=None)
    async def review(draft_id: str, request: Request) -> Response:
        try:
            session = session_of(request)
            draft = drafts.current(draft_id, session.account)
        except SessionRefused:
            return to_login(request)
        except DraftError as exc:
            return refusal(exc.status, exc.reason, str(exc))
        return HTMLResponse(review_page(draft, submitted(draft_id) is not None))

    @app.get("/api/drafts/{draft_id}", response_model=None)
    async def draft_view(draft_id: str, request: Request) -> Response:
        try:
            session = session_of(request)
            history = drafts.history(draft_id, session.account)
        except SessionRefused as exc:
            return refusal(401, exc.reason, str(exc))
        except DraftError as exc:
            return refusal(exc.status, exc.reason, str(exc))
        current = history[-1]
        return JSONResponse({
            "draft_id": draft_id, "account": current["account"], "version": current["version"],
            "hash": current["hash"], "answers": current["answers"], "missing": complete(current["answers"]),
            "history": [{k: v[k] for k in ("version", "page", "hash", "writer", "at")} for v in history],
            "submitted": submitted(draft_id),
        })

    @app.post("/submissions", response_model=None)
    async def submit(body: SubmissionBody, request: Request) -> JSONResponse:
        try:
            operation_id, key, token = mutation_headers(request)
            origin_placement(request)  # a malformed origin is refused before anything is logged
        except BadHeadersError as exc:
            return refusal(400, "bad_headers", str(exc))
        payload = body.model_dump()

        def refuse(status: int, error: str, message: str, **extra: Any) -> JSONResponse:
            log.refuse(operation_id, key, token, error, message)
            return refusal(status, error, message, **extra)

        stale = log.refuse_if_fenced(operation_id, key, token)  # first: a stale owner is refused as stale
        if stale is not None:
            return refusal(409, "fenced", str(stale), highest_epoch=stale.highest_seen)
        if guard is not None:
            try:
                guard.admit(request.headers.get("X-Baton-Capability"), run_id=token.run_id, epoch=token.epoch,
                            idempotency_key=key, payload=payload)
            except CapabilityError as exc:
                return refuse(403, f"capability:{exc.reason}", str(exc))
        if not any(record["idempotency_key"] == key for record in log.effects()):
            current = drafts.find(body.draft_id)
            if current is None:
                return refuse(422, "no_such_draft_for_submission", f"there is no draft {body.draft_id!r}")
            earlier = submitted(body.draft_id)
            if earlier is not None:
                return refuse(409, "already_submitted", f"draft {body.draft_id} was already submitted by run "
                                                        f"{earlier['run_id']} (key {earlier['idempotency_key']})")
            if current["version"] != body.version or current["hash"] != body.submission_hash:
                return refuse(409, "draft_changed", f"draft {body.draft_id} is at version {current['version']} "
                                                    f"({current['hash']}), not version {body.version} "
                                                    f"({body.submission_hash})")
            missing = complete(current["answers"])
            if missing:
                return refuse(422, "incomplete_draft", f"draft {body.draft_id} lacks {', '.join(missing)}")
            writers = {v["writer"].get("run_id") for v in drafts.history(body.draft_id, current["account"])}
            if token.run_id not in writers:
                return refuse(403, "not_a_writer", f"run {token.run_id} never worked on draft {body.draft_id}")
        return await apply_mutation(log, request, payload, Ambiguity(0.0, 0, 0.0), None)

    @app.get("/submissions")
    async def submissions() -> list[dict[str, Any]]:
        return log.effects()

    @app.post("/sessions/revoke")
    async def revoke(body: RevokeBody) -> dict[str, Any]:
        return {"revoked": sessions.revoke(account=body.account, runs=body.runs, reason=body.reason)}

    return app


class WebappClient(MutationClient):
    """The web application's machine side as a gateway `MutationTarget` (also `FenceAware`), plus reads."""

    mutation_path = "/submissions"

    def __init__(self, base_url: str, *, name: str = SERVICE_NAME, timeout_s: float = 2.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        super().__init__(base_url, name=name, timeout_s=timeout_s, transport=transport)

    def _body(self, payload: Mapping[str, Any] | bytes) -> dict[str, Any]:
        return SubmissionBody.model_validate(super()._body(payload)).model_dump()

    def submissions(self) -> list[dict[str, Any]]:
        """Every submission, as the application reports it."""
        response = self._read("/submissions")
        response.raise_for_status()
        return list(response.json())

    def revoke_sessions(self, account: str | None = None, reason: str = "revoked by an operator", *,
                        runs: Sequence[str] | None = None) -> int:
        """Revoke live sessions (of `account`, of the runs `runs`, if given): an operator's action."""
        body = {"account": account, "reason": reason, "runs": None if runs is None else list(runs)}
        response = self._http.post("/sessions/revoke", json=body)
        response.raise_for_status()
        return int(response.json()["revoked"])


def count_side_effects(data_dir: Path | str) -> dict[str, Any]:
    """Submissions per idempotency key, read from `submissions.jsonl` only."""
    return count_by_key(Path(data_dir) / SUBMISSIONS_FILE)


def read_effects(data_dir: Path | str) -> list[TargetEffect]:
    """The submissions as `TargetEffect`s for `baton.checker.check`."""
    return effects_of(Path(data_dir) / SUBMISSIONS_FILE)


def read_submissions(data_dir: Path | str) -> list[dict[str, Any]]:
    """Every line of `submissions.jsonl`, with the standard json module only."""
    path = Path(data_dir) / SUBMISSIONS_FILE
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def main(argv: list[str] | None = None) -> None:
    """Serve the web application (see the module docstring for the options)."""
    parser = service_arguments("Baton's web application target")
    parser.add_argument("--session-ttl-s", type=float, default=DEFAULT_SESSION_TTL_S, help="how long a session lives")
    args = parser.parse_args(argv)
    data_dir: Path = args.data
    data_dir.mkdir(parents=True, exist_ok=True)
    guard = guard_from_arguments(args, SUBMIT_OPERATION)
    if guard is not None and args.capability_operation is None:
        guard = TargetGuard(KeyFile(args.trust), submit_policy())
    app = create_app(data_dir, session_ttl_s=args.session_ttl_s, trust=args.trust, guard=guard)
    serve(app, args.host, args.port, args.port_file or data_dir / PORT_FILE)


if __name__ == "__main__":
    main()


WEBAPP_MODULE = "baton.targets.webapp_service"


def webapp_process(
    data_dir: Path | str, *, trust: Path | None = None, session_ttl_s: float = DEFAULT_SESSION_TTL_S,
) -> ServiceProcess:
    """A (not yet started) web application subprocess; with `trust` it checks credentials and capabilities."""
    args = ["--session-ttl-s", str(session_ttl_s)]
    if trust is not None:
        args += ["--trust", str(trust)]
    return ServiceProcess(WEBAPP_MODULE, data_dir, args)
