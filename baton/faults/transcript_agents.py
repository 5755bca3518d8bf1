"""The coding and browser steps of the transcript-only controls (`baton.faults.transcript_agent`).

The same tools as Baton's agents: the coding control runs the same beam search
(`BeamBook`) over the same billed patch model, verifies with the same sandbox
pytest (`verify_patch`) and pushes with the same git remote client; the browser
control logs in with a scoped credential, fills the same three pages through
the application's own forms (session cookie and CSRF token, kept in the process,
never in the transcript), checks the draft with the browser agent's verifier and
submits with the same application client. What it keeps is the transcript:
messages with the search result, the candidate's text, the verifier's verdict.

A credential needs an issuer: the control's scheduler plays one (`ControlIssuer`,
a key ring of its own whose public keys the application trusts), issuing for
the run and the epoch the control sends, which is its resume counter
(competent) or 0 (naive). It holds no lease of Baton's, so nothing fences it.

When the target refuses because its state moved on (the git remote's
`stale_base`, the application's `draft_changed`), the competent control does
what an engineer's retry loop does: refresh to the target's current state
(rebase the patch onto the new branch head; take the draft's current version)
and send once more. Its verdict stays a transcript message: nothing binds it
to the bytes that now go out.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import httpx

from baton.agents.browser_agent import check_submission, default_answers
from baton.agents.coding_agent import _child_diff
from baton.agents.coding_model import PatchModelProvider, patch_model_dir
from baton.agents.coding_search import SOLVED, BeamBook, BeamConfig
from baton.agents.coding_verify import verify_patch
from baton.agents.coding_workspace import (
    Workspace,
    apply_diff,
    diff_against,
    make_patch,
    parse_patch,
    read_sources,
    run_pytest,
)
from baton.authority import AuthorityService
from baton.catalog.releases import RELEASES
from baton.authority_keys import JWKS_FILE, KeyRing
from baton.errors import TargetRejectedError
from baton.identity import sha256_ref
from baton.models import AuthorityContext, AuthorityLevel
from baton.placements import DEFAULT_PLACEMENTS, placement_named
from baton.store.records import Lease
from baton.targets.git_remote_service import GitRemoteClient
from baton.targets.http_server import PORT_FILE
from baton.targets.service_process import target_data_dir
from baton.targets.webapp_form import PAGES, snapshot_bytes
from baton.targets.webapp_service import (
    LOGIN_LEVEL,
    LOGIN_OPERATION,
    SUBMIT_LEVEL,
    SUBMIT_OPERATION,
    WebappClient,
    account_scope,
)

if TYPE_CHECKING:
    from baton.faults.transcript_agent import TranscriptAgent

ISSUER_DIR = "control-issuer"
_CSRF = re.compile(r"name='csrf_token' value='([^']+)'")
_DRAFT = re.compile(r"/drafts/([A-Za-z0-9_-]+)/page/1$")


def url_of(home: Path, service: str) -> str:
    return f"http://127.0.0.1:{int((target_data_dir(service, home) / PORT_FILE).read_text().strip())}"


class ControlIssuer:
    """The control scheduler's own credential issuer (an SSO), under `directory`."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.service = AuthorityService(KeyRing.load_or_create(self.directory))

    @property
    def trust_file(self) -> Path:
        return self.directory / JWKS_FILE

    def token(self, run_id: str, epoch: int, operation: str, artifact: str, level: AuthorityLevel,
              key: str | None = None) -> str:
        now = dt.datetime.now(dt.timezone.utc)
        lease = Lease(run_id=run_id, owner="control-scheduler", epoch=epoch, expires_at=now + dt.timedelta(minutes=5))
        return self.service.issue(
            run_id=run_id, epoch=epoch, operation=operation, artifact_hash=artifact, level=level, lease=lease,
            placement=placement_named(DEFAULT_PLACEMENTS, "browser-pool-eu"),
            context=AuthorityContext(level=SUBMIT_LEVEL, policy_id="control-scheduler"), now=now,
            idempotency_key=key,
        ).token


class AgentSteps(Protocol):
    """What a control needs to know of one agent kind."""

    def generate(self, agent: TranscriptAgent) -> None: ...
    def verify(self, agent: TranscriptAgent) -> None: ...
    def client(self, agent: TranscriptAgent) -> Any: ...
    def payload(self, agent: TranscriptAgent) -> dict[str, Any]: ...
    def capability(self, agent: TranscriptAgent, key: str, epoch: int, payload: dict[str, Any]) -> str | None: ...
    def refresh(self, agent: TranscriptAgent, refusal: TargetRejectedError) -> bool: ...
    def effects(self, agent: TranscriptAgent) -> list[dict[str, Any]]: ...


def _candidate(agent: TranscriptAgent) -> str:
    return str(agent.last("assistant", "candidate")["candidate"])


# -- coding ------------------------------------------------------------------------------------------


class CodingSteps:
    """Fix the repository's failing tests: beam search, sandbox pytest, push to the git remote."""

    def _remote(self, agent: TranscriptAgent) -> GitRemoteClient:
        return GitRemoteClient(url_of(agent.home, "git"), timeout_s=5.0)

    def _workspace(self, agent: TranscriptAgent, remote: GitRemoteClient) -> Workspace:
        workspace = Workspace.create(f"{agent.run_id}-control")
        workspace.clone(str(remote.repository(agent.body["task"]["repository"])["path"]))
        return workspace

    def generate(self, agent: TranscriptAgent) -> None:
        task = agent.body["task"]
        models = PatchModelProvider(patch_model_dir(agent.home))
        with self._remote(agent) as remote:
            head = str(remote.head(task["repository"], task["branch"]))
            workspace = self._workspace(agent, remote)
        agent.say("GENERATING", "tool", {"branch_head": head})
        try:
            book = BeamBook.start(BeamConfig.from_task(task), head)
            while (action := book.next_action())[0] != "done":
                kind, node = action
                if kind == "select":
                    book.select()
                    continue
                assert node is not None
                with workspace.sandbox(f"{kind}-{node}", head) as tree:
                    apply_diff(tree, book.diff(node).encode("utf-8"))
                    run = run_pytest(tree) if kind == "score" else None
                    files = read_sources(tree) if kind == "expand" else {}
                if run is not None:
                    book.record_score(node, passed=run.passed, failed=run.failed, errors=run.errors,
                                      failing=run.failing, all_passed=run.all_passed, output_ref=sha256_ref(run.output))
                elif book.state.expansions_used >= book.config.max_expansions:
                    book.cancel(f"search budget spent: {book.state.expansions_used} expansions")
                else:
                    reply = models.propose(agent.release, files, list(book.nodes[node]["tests"]["failing"]),
                                           k=book.config.proposals, run_id=agent.run_id,
                                           epoch=int(agent.body["resumes"]), node_id=node)
                    agent.charge(1, reply.reply.charge.model_spend_usd)
                    children = [(e.as_json(), _child_diff(workspace, head, book.diff(node), e)) for e in reply.edits]
                    book.record_expansion(node, children, proposed_by=RELEASES[agent.release].model, base_commit=head)
            if book.status != SOLVED or book.solution is None:
                return agent.end("failed", f"the search ended without a passing patch: {book.meta.get('reason')}")
            patch = make_patch(head, book.diff(book.solution).encode("utf-8"))
        finally:
            workspace.close()
        agent.say("GENERATING", "assistant", {"candidate": patch.decode("utf-8"), "node": book.solution})
        agent.advance("CANDIDATE_READY")

    def verify(self, agent: TranscriptAgent) -> None:
        patch = _candidate(agent).encode("utf-8")
        with self._remote(agent) as remote:
            workspace = self._workspace(agent, remote)
        try:
            verdict = verify_patch(workspace, patch, name="control-verify").check(patch)
        finally:
            workspace.close()
        agent.say("CANDIDATE_READY", "verifier", {"result": verdict.result.value, "detail": verdict.detail})
        if not verdict.passed:
            return agent.end("failed", f"verification failed: {verdict.detail}")
        agent.advance("VERIFIED")

    def client(self, agent: TranscriptAgent) -> GitRemoteClient:
        return self._remote(agent)

    def payload(self, agent: TranscriptAgent) -> dict[str, Any]:
        task, patch = agent.body["task"], _candidate(agent)
        base, _diff = parse_patch(patch.encode("utf-8"))
        return {"repository": task["repository"], "branch": task["branch"], "base_commit": base, "patch": patch,
                "patch_hash": sha256_ref(patch.encode("utf-8")), "message": "Fix failing tests (control)"}

    def capability(self, agent: TranscriptAgent, key: str, epoch: int, payload: dict[str, Any]) -> str | None:
        return None  # the controls' git remote checks no capability, as their deploy service checks none

    def refresh(self, agent: TranscriptAgent, refusal: TargetRejectedError) -> bool:
        """`git pull --rebase`: rebase the patch onto the branch's new head (the verdict stays as it was)."""
        if refusal.reason != "stale_base":
            return False
        task = agent.body["task"]
        _base, diff = parse_patch(_candidate(agent).encode("utf-8"))
        with self._remote(agent) as remote:
            head = str(remote.head(task["repository"], task["branch"]))
            workspace = self._workspace(agent, remote)
        try:
            with workspace.sandbox("rebase", head) as tree:
                apply_diff(tree, diff)
                rebased = make_patch(head, diff_against(tree, head))
        except Exception as exc:  # noqa: BLE001 - a rebase conflict: the control gives up, as git would
            agent.say("AUTHORIZED", "tool", {"rebase_failed": str(exc)})
            return False
        finally:
            workspace.close()
        agent.say("AUTHORIZED", "assistant", {"candidate": rebased.decode("utf-8"), "rebased_onto": head})
        return True

    def effects(self, agent: TranscriptAgent) -> list[dict[str, Any]]:
        with self._remote(agent) as remote:
            return [p for p in remote.pushes() if p.get("run_id") == agent.run_id]


# -- browser -----------------------------------------------------------------------------------------


class BrowserSteps:
    """Fill the application's three pages as a server-side draft, check it, submit it once."""

    def __init__(self, issuer_dir: Path) -> None:
        self.issuer = ControlIssuer(issuer_dir)

    def _epoch(self, agent: TranscriptAgent) -> int:
        return int(agent.body["resumes"]) if agent.mode == "competent" else 0

    def _session(self, agent: TranscriptAgent) -> httpx.Client:
        """A logged-in session (cookie jar of this process only)."""
        account = str(agent.body["task"].get("account", "acme"))
        browser = httpx.Client(base_url=url_of(agent.home, "webapp"), timeout=10.0)
        credential = self.issuer.token(agent.run_id, self._epoch(agent), LOGIN_OPERATION, account_scope(account),
                                       LOGIN_LEVEL)
        landed = browser.post("/login", data={"account": account, "credential": credential, "next": "/drafts"})
        if landed.status_code != 303:
            raise TargetRejectedError(f"webapp login refused: {landed.text[:200]}", reason="login_refused")
        return browser

    @staticmethod
    def _csrf(page: httpx.Response) -> str:
        found = _CSRF.search(page.text)
        if found is None:
            raise TargetRejectedError(f"no form on the page (HTTP {page.status_code})", reason="no_form")
        return found.group(1)

    def _snapshot(self, browser: httpx.Client, draft_id: str) -> bytes:
        view = browser.get(f"/api/drafts/{draft_id}").json()
        return snapshot_bytes(view["draft_id"], view["account"], view["version"], view["answers"])

    def generate(self, agent: TranscriptAgent) -> None:
        task = agent.body["task"]
        answers = dict(task.get("answers") or default_answers(str(task.get("account", "acme")).title()))
        with contextlib.closing(self._session(agent)) as browser:
            started = browser.post("/drafts", data={"csrf_token": self._csrf(browser.get("/drafts"))})
            found = _DRAFT.search(started.headers.get("location", ""))
            if found is None:
                return agent.end("failed", f"could not start a draft: HTTP {started.status_code}")
            draft_id = found.group(1)
            for page, fields in enumerate(PAGES, start=1):
                shown = browser.get(f"/drafts/{draft_id}/page/{page}")
                version = browser.get(f"/api/drafts/{draft_id}").json()["version"]
                saved = browser.post(f"/drafts/{draft_id}/page/{page}", data={
                    **{f.name: str(answers.get(f.name, "")) for f in fields},
                    "csrf_token": self._csrf(shown), "base_version": str(version)})
                if saved.status_code != 303:
                    return agent.end("failed", f"page {page} was refused: {saved.text[:200]}")
                agent.say("GENERATING", "tool", {"draft_id": draft_id, "saved_page": page})
            snapshot = self._snapshot(browser, draft_id)
        agent.say("GENERATING", "assistant", {"candidate": snapshot.decode("utf-8"), "draft_id": draft_id})
        agent.advance("CANDIDATE_READY")

    def verify(self, agent: TranscriptAgent) -> None:
        task = agent.body["task"]
        account = str(task.get("account", "acme"))
        verdict = check_submission(_candidate(agent).encode("utf-8"), account,
                                   dict(task.get("answers") or default_answers(account.title())))
        agent.say("CANDIDATE_READY", "verifier", {"result": verdict.result.value, "detail": verdict.detail})
        if not verdict.passed:
            return agent.end("failed", f"verification failed: {verdict.detail}")
        agent.advance("VERIFIED")

    def client(self, agent: TranscriptAgent) -> WebappClient:
        return WebappClient(url_of(agent.home, "webapp"), timeout_s=2.0)

    def payload(self, agent: TranscriptAgent) -> dict[str, Any]:
        candidate = _candidate(agent)
        snapshot = json.loads(candidate)
        return {"draft_id": snapshot["draft_id"], "version": snapshot["version"],
                "submission_hash": sha256_ref(candidate.encode("utf-8"))}

    def capability(self, agent: TranscriptAgent, key: str, epoch: int, payload: dict[str, Any]) -> str | None:
        return self.issuer.token(agent.run_id, epoch, SUBMIT_OPERATION, str(payload["submission_hash"]),
                                 SUBMIT_LEVEL, key)

    def refresh(self, agent: TranscriptAgent, refusal: TargetRejectedError) -> bool:
        """Take the server's current draft as the thing to submit (the verdict stays as it was)."""
        if refusal.reason != "draft_changed":
            return False
        draft_id = json.loads(_candidate(agent))["draft_id"]
        with contextlib.closing(self._session(agent)) as browser:
            snapshot = self._snapshot(browser, draft_id)
        agent.say("AUTHORIZED", "assistant", {"candidate": snapshot.decode("utf-8"), "refreshed_from": "server"})
        return True

    def effects(self, agent: TranscriptAgent) -> list[dict[str, Any]]:
        with self.client(agent) as app:
            return [s for s in app.submissions() if s.get("run_id") == agent.run_id]


def steps_for(kind: str, root: Path) -> AgentSteps | None:
    """The agent steps of `kind` (None for the deploy and research kinds the control runs itself)."""
    if kind == "coding":
        return CodingSteps()
    if kind == "browser":
        return BrowserSteps(root / ISSUER_DIR)
    return None
