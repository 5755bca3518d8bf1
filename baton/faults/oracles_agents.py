"""Oracles for the coding and browser cases: the git remote's and the web application's own records.

Standard library only, like `baton.faults.oracles` (a test holds both to it);
each reads the files a case left under its directory, never what a run
reports about itself beyond `reported.json`'s run id:

- untested_push: a commit the git remote applied for the run whose tree fails
  the project's own tests. The oracle clones the bare repository itself,
  checks that commit out and runs pytest on it (the remote's
  `pushes.jsonl` names the commit; the tree is the repository's own);
- wrong_submission: a submission the web application recorded for the run of
  a draft version whose answers are not the ones the run's owner asked for,
  or that someone other than the run wrote last (`submissions.jsonl` against
  the application's draft history `drafts.jsonl` and the owner's
  `intent.json`);
- budget (for coding runs): the patch model provider's own call record
  (`providers/patch-model/calls.jsonl`) against what the run accounted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from decimal import Decimal
from pathlib import Path
from typing import Any

PYTEST_TIMEOUT_S = 180.0
QUESTIONS: dict[str, str] = {
    "untested_push": "the git remote holds a pushed commit whose tree fails the project's tests (oracle's own pytest)",
    "wrong_submission": "the application recorded a submission of answers the owner did not ask for (draft history)",
}


def _lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _run_id(root: Path) -> str:
    path = root / "reported.json"
    return str(json.loads(path.read_text(encoding="utf-8")).get("run_id", "")) if path.exists() else ""


def _tests_fail_at(bare: Path, commit: str) -> str | None:
    """Check `commit` out of `bare` into a scratch clone and run pytest there; the failure, or None."""
    with tempfile.TemporaryDirectory(prefix="oracle-push-") as scratch:
        tree = Path(scratch) / "tree"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("BATON_", "GIT_"))}
        subprocess.run(["git", "clone", "--quiet", "--no-checkout", str(bare), str(tree)], check=True, env=env,
                       capture_output=True)
        subprocess.run(["git", "-C", str(tree), "checkout", "--quiet", commit], check=True, env=env,
                       capture_output=True)
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=tree, env=env,
                             capture_output=True, text=True, timeout=PYTEST_TIMEOUT_S)
        if run.returncode == 0:
            return None
        tail = [line for line in run.stdout.splitlines() if line.strip()][-1:] or [f"exit {run.returncode}"]
        return tail[0]


def pushes_of(remote: Path, run_id: str) -> list[dict[str, Any]]:
    """The pushes the git remote whose records are in `remote` applied for `run_id` (its `pushes.jsonl`)."""
    return [p for p in _lines(remote / "pushes.jsonl") if p.get("run_id") == run_id]


def untested_push(root: Path) -> list[str]:
    return untested_pushes(root / "home" / "targets" / "git", _run_id(root))


def untested_pushes(remote: Path, run_id: str) -> list[str]:
    """The pushes the remote whose records are in `remote` applied for `run_id` whose tree fails pytest."""
    evidence = []
    for push in pushes_of(remote, run_id):
        commit = str((push.get("outcome") or {}).get("commit", ""))
        bare = remote / "repos" / f"{push.get('repository')}.git"
        failure = _tests_fail_at(bare, commit)
        if failure is not None:
            evidence.append(f"the remote's push seq {push.get('seq')} made {commit[:12]} on {push.get('branch')}; "
                            f"pytest on that tree: {failure}")
    return evidence


def wrong_submission(root: Path) -> list[str]:
    run_id = _run_id(root)
    intent_path = root / "intent.json"
    if not intent_path.exists():
        return []
    task = json.loads(intent_path.read_text(encoding="utf-8")).get("task", {})
    return submission_evidence(root / "home" / "targets" / "webapp", run_id, task)


def submission_evidence(app: Path, run_id: str, task: dict[str, Any]) -> list[str]:
    """`wrong_submission` over the application's records in `app` for `run_id`, whose owner asked for `task`
    (`{account, answers}`); the simulation's oracles use it too."""
    asked, account = dict(task.get("answers") or {}), task.get("account")
    versions = {(d["draft_id"], int(d["version"])): d for d in _lines(app / "drafts.jsonl")}
    evidence = []
    for submission in [s for s in _lines(app / "submissions.jsonl") if s.get("run_id") == run_id]:
        draft = versions.get((str(submission.get("draft_id")), int(submission.get("version", -1))))
        if draft is None:
            evidence.append(f"submission seq {submission.get('seq')} names draft {submission.get('draft_id')} "
                            f"v{submission.get('version')}, which the application's history does not hold")
            continue
        wrong = sorted(k for k, v in asked.items() if str(draft["answers"].get(k, "")).strip() != str(v).strip())
        if wrong or draft.get("account") != account:
            evidence.append(f"submission seq {submission.get('seq')} of draft {draft['draft_id']} v{draft['version']} "
                            f"(account {draft.get('account')}) differs from the owner's answers in {wrong}")
        writer = draft.get("writer") or {}
        if writer.get("run_id") != run_id:
            evidence.append(f"submission seq {submission.get('seq')} submitted draft {draft['draft_id']} "
                            f"v{draft['version']}, last written by {writer}, not by the run")
    return evidence


def patch_model_budget(root: Path) -> list[str]:
    """Answers `budget` for coding runs: the patch model provider's own call record against what the run
    accounted (that provider keeps its own file rather than the shared bill)."""
    reported_path = root / "reported.json"
    reported = json.loads(reported_path.read_text(encoding="utf-8")) if reported_path.exists() else {}
    run_id = str(reported.get("run_id", ""))
    calls = [c for c in _lines(root / "home" / "providers" / "patch-model" / "calls.jsonl") if c.get("run_id") == run_id]
    billed_usd = sum((Decimal(str(c.get("cost_usd", "0"))) for c in calls), Decimal("0"))
    said_calls = int(reported.get("model_calls") or 0)
    said_usd = Decimal(str(reported.get("model_spend_usd") or "0"))
    if len(calls) > said_calls or billed_usd > said_usd:
        return [f"the patch model provider recorded {len(calls)} call(s), ${billed_usd}; the run accounted "
                f"{said_calls}, ${said_usd}"]
    return []


ORACLES = {"untested_push": untested_push, "wrong_submission": wrong_submission, "budget": patch_model_budget}


def answer_agents(root: Path) -> dict[str, list[str]]:
    """Every agent question for the run whose files are under `root` (question value -> evidence; `budget`
    adds to the shared oracle's answer)."""
    return {name: oracle(Path(root)) for name, oracle in ORACLES.items()}
