"""The coding and browser agents' targets in a fault case's world: the git remote and the web application.

`start_agent_targets` starts them beside the deploy and corpus services when a
case names them (`TargetOptions.agents`), each keeping its own records under
`home/targets/` (`git/pushes.jsonl`, `git/requests.jsonl`, the bare
repositories; `webapp/submissions.jsonl`, `webapp/drafts.json`, ...). With a
trust file, the remote checks every push's capability and the application
checks logins and submissions itself. `agent_spec` is the run a case launches
for one of these kinds; `write_intent` records what the run was asked to do, as
its owner's own file, for the oracles.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx

from baton.agents.browser_agent import default_answers
from baton.catalog.releases import RELEASES
from baton.models import AuthorityLevel, BudgetLimits, Placement, PortabilityConstraints, RunKind
from baton.runtime.launch import RunSpec
from baton.runtime.worker import connect_git_remote, connect_webapp
from baton.targets.git_remote_service import PUSH_POLICY, GitRemoteClient, git_remote_process
from baton.targets.service_process import ServiceProcess, target_data_dir
from baton.targets.webapp_form import PAGES
from baton.targets.webapp_service import ACCOUNTS_FILE, WebappClient, webapp_process
from baton.targets.webapp_state import DRAFTS_FILE

AGENT_KINDS = ("coding", "browser")
TARGET_OF = {"coding": "git", "browser": "webapp"}
REPOSITORY = "calc"
BRANCH = "main"
ACCOUNT = "acme"
BROWSER_SOURCE = "browser-pool-eu"
INTENT_FILE = "intent.json"


def start_agent_targets(home: Path, cleanup: contextlib.ExitStack, agents: tuple[str, ...],
                        trust: str | None) -> dict[str, ServiceProcess]:
    """Start the git remote and/or web application named in `agents` (stopped by `cleanup`)."""
    unknown = sorted(set(agents) - set(TARGET_OF.values()))
    if unknown:
        raise ValueError(f"unknown agent target(s) {unknown}; known: {sorted(TARGET_OF.values())}")
    started: dict[str, ServiceProcess] = {}
    if "git" in agents:
        guard = PUSH_POLICY.arguments(Path(trust)) if trust else []
        remote = git_remote_process(target_data_dir("git", home), guard=guard, repositories=(REPOSITORY,))
        cleanup.callback(remote.stop)
        started["git"] = remote.start()
    if "webapp" in agents:
        app = webapp_process(target_data_dir("webapp", home), trust=Path(trust) if trust else None)
        cleanup.callback(app.stop)
        started["webapp"] = app.start()
    return started


def agent_clients(home: Path) -> list[GitRemoteClient | WebappClient]:
    """Clients of the agent targets running for `home` (what a coordinator fences on a move)."""
    clients: list[GitRemoteClient | WebappClient] = []
    remote, app = connect_git_remote(home, timeout_s=5.0), connect_webapp(home, timeout_s=5.0)
    clients += [c for c in (remote, app) if c is not None]
    return clients


def agent_task(kind: str, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The task input of a coding or browser run in a fault case."""
    if kind == "coding":
        return {"repository": REPOSITORY, "branch": BRANCH} | dict(extra or {})
    if kind == "browser":
        return {"account": ACCOUNT, "answers": default_answers(ACCOUNT.title())} | dict(extra or {})
    raise ValueError(f"not an agent kind: {kind!r}; known: {', '.join(AGENT_KINDS)}")


def agent_spec(kind: str, run_id: str, placement: Placement, limits: BudgetLimits, task: dict[str, Any],
               constraints: PortabilityConstraints) -> RunSpec:
    """The run a case launches: fix `calc`'s failing tests, or fill and submit the form for `acme`."""
    if kind == "coding":
        return RunSpec(run_id, RunKind.CODING, RELEASES["model-v7"], placement, "fix the failing tests", task,
                       AuthorityLevel.EXTERNAL_MUTATE, limits=limits, constraints=constraints)
    return RunSpec(run_id, RunKind.BROWSER, RELEASES["model-v7"], placement, f"sign up {task['account']}", task,
                   AuthorityLevel.SANDBOX_MUTATE, limits=limits, constraints=constraints)


def source_placement(kind: str, default: str) -> str:
    """Where a run of `kind` starts: a browser run needs the browser pool."""
    return BROWSER_SOURCE if kind == "browser" else default


def write_intent(root: Path, kind: str, task: Mapping[str, Any]) -> None:
    """The run owner's record of what was asked (account and answers, repository and branch)."""
    (Path(root) / INTENT_FILE).write_text(json.dumps({"kind": kind, "task": dict(task)}, indent=1, sort_keys=True))


# -- the world changing under a run --------------------------------------------------------------------


def commit_upstream(home: Path, repository: str, path: str, text: str, message: str) -> str:
    """Upstream commits one file to the remote's branch (the remote moves); the new head."""
    remote = connect_git_remote(home, timeout_s=10.0)
    if remote is None:
        raise RuntimeError("no git remote runs for this case")
    with remote:
        return remote.commit_upstream(repository, path, text, message, branch=BRANCH)


_CSRF = re.compile(r"name='csrf_token' value='([^']+)'")


def _drafts_of(home: Path, run_id: str) -> list[str]:
    path = target_data_dir("webapp", home) / DRAFTS_FILE
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    return sorted({line["draft_id"] for line in lines if (line.get("writer") or {}).get("run_id") == run_id})


def person_edits_draft(home: Path, run_id: str, changes: Mapping[str, str], account: str = ACCOUNT) -> str:
    """A person of `account` logs in with their password and changes answers of the run's draft, page by
    page, through the application's own form (session cookie, CSRF token, base version)."""
    data = target_data_dir("webapp", home)
    people = json.loads((data / ACCOUNTS_FILE).read_text())["accounts"][account]["people"]
    user, password = next(iter(sorted(people.items())))
    drafts = _drafts_of(home, run_id)
    if len(drafts) != 1:
        raise RuntimeError(f"run {run_id} wrote {len(drafts)} drafts; the person expected one")
    draft_id = drafts[0]
    app = connect_webapp(home, timeout_s=10.0)
    assert app is not None
    with httpx.Client(base_url=app.base_url, timeout=10.0) as browser:
        app.close()
        login = browser.post("/login", data={"account": account, "user": user, "password": password, "next": "/drafts"})
        if login.status_code != 303:
            raise RuntimeError(f"the person could not log in: HTTP {login.status_code} {login.text[:200]}")
        for page, fields in enumerate(PAGES, start=1):
            names = {field.name for field in fields}
            if not names & set(changes):
                continue
            view = browser.get(f"/api/drafts/{draft_id}").json()
            shown = browser.get(f"/drafts/{draft_id}/page/{page}")
            token = _CSRF.search(shown.text)
            if token is None:
                raise RuntimeError(f"page {page} of draft {draft_id} showed no form: HTTP {shown.status_code}")
            form = {name: str(changes.get(name, view["answers"].get(name, ""))) for name in names}
            saved = browser.post(f"/drafts/{draft_id}/page/{page}",
                                 data={**form, "csrf_token": token.group(1), "base_version": str(view["version"])})
            if saved.status_code != 303:
                raise RuntimeError(f"the person's save of page {page} was refused: HTTP {saved.status_code} "
                                   f"{saved.text[:200]}")
        after = browser.get(f"/api/drafts/{draft_id}").json()
    return f"person {user} of {account} changed {sorted(changes)} of draft {draft_id}: now v{after['version']}"
