"""The four kinds of work the fault scenarios run: deploy, research report, code patch, browser form.

Each task is pure: which questions to observe, how a model turns observations
into a candidate, how a verifier judges it, and what payload carries it to its
target. Deploy and report use the reference agents' scripted models and
verifiers; the patch and the form are small deterministic functions priced
like a model call.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from baton.agents.scripted_models import BuildInfo, ModelReply, ScriptedModel, count_tokens
from baton.agents.verifiers import Verdict, check_deployment_spec, verify_report
from baton.faults.external import BUILDS, DOCS, FORM, REPO
from baton.identity import canonical_json
from baton.models import AuthorityLevel, BudgetUsage, Observation, RunKind, VerdictResult
from baton.resumability import BrowserResumeClass

Inputs = Sequence[tuple[Observation, bytes]]


def _priced(model: ScriptedModel, prompt: str, output: str) -> ModelReply:
    tokens_in, tokens_out = count_tokens(prompt), count_tokens(output)
    charge = BudgetUsage(model_calls=1, model_spend_usd=model.pricing.cost(tokens_in, tokens_out))
    return ModelReply(output.encode("utf-8"), tokens_in, tokens_out, charge)


@dataclass(frozen=True)
class Task:
    """One kind of run: what it observes, proposes, verifies and sends."""

    name: str
    run_kind: RunKind
    candidate_kind: str
    operation: str
    target: str
    questions: tuple[tuple[str, dict[str, Any]], ...]
    spec: dict[str, Any] = field(default_factory=dict)
    level: AuthorityLevel = AuthorityLevel.EXTERNAL_MUTATE
    browser: BrowserResumeClass | None = None

    @property
    def intent(self) -> str:
        """The logical operation: one per run, whatever the attempts and keys."""
        return self.operation

    def generate(self, model: ScriptedModel, inputs: Inputs) -> ModelReply:
        raise NotImplementedError

    def verify(self, artifact: bytes, inputs: Inputs) -> Verdict:
        raise NotImplementedError

    def payload(self, run_id: str, artifact: bytes, artifact_hash: str) -> dict[str, Any]:
        return {"intent": self.intent, "run": run_id, "candidate_hash": artifact_hash}


def _builds(inputs: Inputs) -> list[BuildInfo]:
    return [BuildInfo.model_validate(item) for _, content in inputs for item in json.loads(content)]


@dataclass(frozen=True)
class DeployTask(Task):
    def generate(self, model: ScriptedModel, inputs: Inputs) -> ModelReply:
        return model.plan_deployment("checkout", _builds(inputs))

    def verify(self, artifact: bytes, inputs: Inputs) -> Verdict:
        return check_deployment_spec(artifact, _builds(inputs))

    def payload(self, run_id: str, artifact: bytes, artifact_hash: str) -> dict[str, Any]:
        return {**super().payload(run_id, artifact, artifact_hash), **json.loads(artifact)}


@dataclass(frozen=True)
class ReportTask(Task):
    def generate(self, model: ScriptedModel, inputs: Inputs) -> ModelReply:
        return model.draft_report(list(inputs), topic=str(self.spec.get("topic", "findings")))

    def verify(self, artifact: bytes, inputs: Inputs) -> Verdict:
        return verify_report(artifact, [observation.record_ref() for observation, _ in inputs])


def _apply(file_text: str, patch: dict[str, Any]) -> str | None:
    lines = file_text.splitlines()
    index = int(patch["line"]) - 1
    if not 0 <= index < len(lines) or lines[index] != patch["old"]:
        return None
    lines[index] = patch["new"]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class PatchTask(Task):
    """Raise the retry setting: the patch names its base commit and the line it changes."""

    def generate(self, model: ScriptedModel, inputs: Inputs) -> ModelReply:
        repo = json.loads(inputs[0][1])
        lines = repo["file"].splitlines()
        line = next(i for i, text in enumerate(lines, start=1) if text.startswith("retries"))
        patch = {"base": repo["head"], "line": line, "old": lines[line - 1], "new": "retries = 3"}
        return _priced(model, f"raise retries in {repo['head']}", canonical_json(patch).decode())

    def verify(self, artifact: bytes, inputs: Inputs) -> Verdict:
        repo, patch = json.loads(inputs[0][1]), json.loads(artifact)
        applied = _apply(repo["file"], patch) if patch.get("base") == repo["head"] else None
        ok = applied is not None and "retries = 3" in applied
        return Verdict(VerdictResult.PASS if ok else VerdictResult.FAIL,
                       "patch applies to the observed head and the tests pass" if ok
                       else "patch does not apply to the observed head", "repo-tests-1")

    def payload(self, run_id: str, artifact: bytes, artifact_hash: str) -> dict[str, Any]:
        return {**super().payload(run_id, artifact, artifact_hash), "base": json.loads(artifact)["base"]}


@dataclass(frozen=True)
class FormTask(Task):
    """Fill in the signup form from the task's values."""

    def generate(self, model: ScriptedModel, inputs: Inputs) -> ModelReply:
        form = json.loads(inputs[0][1])
        values = {name: self.spec.get(name, "") for name in form["fields"]}
        return _priced(model, f"fill {form['form']}", canonical_json({"revision": form["revision"], **values}).decode())

    def verify(self, artifact: bytes, inputs: Inputs) -> Verdict:
        form, filled = json.loads(inputs[0][1]), json.loads(artifact)
        missing = [name for name in form["fields"] if not filled.get(name)]
        ok = not missing and filled.get("revision") == form["revision"]
        return Verdict(VerdictResult.PASS if ok else VerdictResult.FAIL,
                       "every field filled for the observed revision" if ok else f"missing {missing}", "form-check-1")


TASKS: dict[str, Task] = {
    "deploy": DeployTask("deploy", RunKind.DEPLOY, "deployment-spec", "deploy", "deploy",
                         ((BUILDS, {"service": "checkout"}),)),
    "report": ReportTask("report", RunKind.RESEARCH, "report", "publish", "publisher",
                         tuple((f"corpus://{doc}", {"doc_id": doc}) for doc in DOCS), spec={"topic": "ownership"}),
    "patch": PatchTask("patch", RunKind.CODING, "patch", "merge", "repo", ((REPO, {"branch": "main"}),)),
    "form": FormTask("form", RunKind.BROWSER, "form-submission", "submit", "webapp", ((FORM, {"page": "signup"}),),
                     spec={"company": "Example GmbH", "plan": "team", "seats": 12},
                     browser=BrowserResumeClass.RECONSTRUCT_SESSION),
}
