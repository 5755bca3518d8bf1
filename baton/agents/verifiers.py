"""Deterministic verifiers for the reference agents' candidates.

- `verify_report`: every claim of a research report cites at least one
  observation, and every cited ref is among the run's recorded observations.
- `check_deployment_spec`: a deployment spec names a build the run observed,
  with the same artifact hash, whose canary passed.

Both verifiers keep their own record of every verdict they give
(`record_verdict`): one JSON line per verdict, in the file the environment
variable `BATON_VERIFIER_RECORD` names (the fault matrix sets it; elsewhere it
is unset and nothing is written). A line names the verifier, the exact bytes
verified (their sha256; a report's is the ref the corpus files it under), the
deployment spec's fields where there are any, and the result, so anyone can
tell afterwards whether a deployed spec or a published report was ever
verified, and when.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from baton import clock
from baton.agents.report_format import parse_claims
from baton.agents.scripted_models import BuildInfo
from baton.models import VerdictResult

CITATION_VERIFIER = "citations-1"
DEPLOY_VERIFIER = "deploy-check-1"
VERIFIER_RECORD_ENV = "BATON_VERIFIER_RECORD"
_SPEC_FIELDS = ("service", "version", "artifact_hash", "strategy")


@dataclass(frozen=True)
class Verdict:
    """The outcome of a verifier and why."""

    result: VerdictResult
    detail: str
    verifier_version: str

    @property
    def passed(self) -> bool:
        return self.result is VerdictResult.PASS


def verify_report(report: str | bytes, recorded_observation_refs: Collection[str]) -> Verdict:
    """PASS only when each claim cites one or more recorded observations and nothing else (each verdict recorded)."""
    text = report.decode("utf-8") if isinstance(report, bytes) else report
    verdict = _verify_report(text, recorded_observation_refs)
    record_verdict(text.encode("utf-8"), verdict, {})
    return verdict


def _verify_report(text: str, recorded_observation_refs: Collection[str]) -> Verdict:
    claims = parse_claims(text)
    if not claims:
        return Verdict(VerdictResult.FAIL, "the report makes no claims", CITATION_VERIFIER)
    recorded = set(recorded_observation_refs)
    problems = []
    for claim in claims:
        if not claim.cited_refs:
            problems.append(f"line {claim.line_no}: claim cites no observation")
        for ref in claim.cited_refs:
            if ref not in recorded:
                problems.append(f"line {claim.line_no}: cites {ref}, which is not a recorded observation")
    if problems:
        return Verdict(VerdictResult.FAIL, "; ".join(problems), CITATION_VERIFIER)
    return Verdict(VerdictResult.PASS, f"all {len(claims)} claims cite recorded observations", CITATION_VERIFIER)


def record_verdict(content: bytes, verdict: Verdict, facts: Mapping[str, object]) -> None:
    """Append the verifier's own record of one verdict (fsynced) to the file `BATON_VERIFIER_RECORD` names.

    Written before the verdict is returned, so a caller that dies right after still shows in it.
    No variable, no record.
    """
    path = os.environ.get(VERIFIER_RECORD_ENV)
    if not path:
        return
    line = json.dumps({"at": clock.now().isoformat(), "verifier": verdict.verifier_version,
                       "content_sha256": "sha256:" + hashlib.sha256(content).hexdigest(),
                       "result": verdict.result.value, "detail": verdict.detail, **facts},
                      sort_keys=True, default=str) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)


def check_deployment_spec(spec: bytes, evidence: Sequence[BuildInfo]) -> Verdict:
    """PASS when the spec deploys an observed build, by its exact hash, whose canary passed (each verdict recorded)."""
    verdict = _check_deployment_spec(spec, evidence)
    try:
        body = json.loads(spec)
        facts = {name: body.get(name) for name in _SPEC_FIELDS} if isinstance(body, dict) else {}
    except ValueError:
        facts = {}
    record_verdict(spec, verdict, facts)
    return verdict


def _check_deployment_spec(spec: bytes, evidence: Sequence[BuildInfo]) -> Verdict:
    try:
        body = json.loads(spec)
        version, artifact_hash = body["version"], body["artifact_hash"]
    except (ValueError, KeyError, TypeError) as exc:
        return Verdict(VerdictResult.FAIL, f"unreadable deployment spec: {exc}", DEPLOY_VERIFIER)
    for build in evidence:
        if build.version == version:
            if build.artifact_hash != artifact_hash:
                return Verdict(VerdictResult.FAIL, f"{version}: artifact hash differs from the observed build", DEPLOY_VERIFIER)
            if not build.canary_passed:
                return Verdict(VerdictResult.FAIL, f"{version}: canary did not pass", DEPLOY_VERIFIER)
            return Verdict(VerdictResult.PASS, f"{version} matches an observed build with a passing canary", DEPLOY_VERIFIER)
    return Verdict(VerdictResult.FAIL, f"{version} is not among the observed builds", DEPLOY_VERIFIER)
