"""The outside world of a fault scenario: sources that change, a provider, a verifier, an approver.

Everything here is in-process and seeded, and keeps its own records in the
scenario's fact log (the provider bills, the verifier logs verdicts, the web
application lists the sessions it issued), so the checks never depend on what
a worker says about itself.

Sources, by URI:

* `builds://checkout` - the build registry's list of builds (JSON);
* `corpus://<doc>` - documents of a small corpus;
* `repo://demo` - the repository head and the file a coding run patches;
* `web://signup` - the signup form a browser run fills in (its structure, no secrets).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import random
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from baton.agents.releases import RELEASES
from baton.agents.scripted_models import BuildInfo, ScriptedModel, model_for
from baton.agents.verifiers import Verdict
from baton.faults.facts import Billed, CredentialIssued, FactLog, Verified
from baton.identity import canonical_json, sha256_ref
from baton.models import Approval, AuthorityLevel, BehavioralRelease, BudgetUsage, VerifierEvidence

BUILDS = "builds://checkout"
REPO = "repo://demo"
FORM = "web://signup"
DOCS = ("leases", "fencing", "idempotency")
_DOC_TEXT = {
    "leases": "A lease names one owner per epoch. Its expiry is judged by the database clock.",
    "fencing": "Targets refuse fencing tokens below the highest they have seen. Stale owners cannot act.",
    "idempotency": "One idempotency key yields one side effect. Retries replay the recorded outcome.",
}


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


class Repository:
    """A repository with one branch; `advance` lands someone else's commit on it."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self.lines = ["# demo service settings", "timeout_s = 30", "retries = 1", "log_level = info"]
        self.head = self._commit_id()

    def _commit_id(self) -> str:
        return hashlib.sha1("\n".join(self.lines).encode() + self._rng.randbytes(4)).hexdigest()

    def advance(self) -> str:
        """Another team's commit: a line added above the one the run patches."""
        self.lines.insert(1, f"region = eu-{self._rng.choice(['west', 'central', 'north'])}")
        self.head = self._commit_id()
        return self.head

    def content(self) -> bytes:
        return canonical_json({"head": self.head, "file": "\n".join(self.lines) + "\n"})


@dataclass(frozen=True)
class Session:
    """A browser session: bearer material that lives in one worker's memory only."""

    token: str
    csrf: str
    expires_at: dt.datetime


class WebApp:
    """A web application with expiring sessions and CSRF tokens, and a form to submit."""

    def __init__(self, facts: FactLog, run_id_hint: str, *, session_ttl_s: float) -> None:
        self.facts = facts
        self.run_id_hint = run_id_hint
        self.session_ttl_s = session_ttl_s
        self._sessions: dict[str, Session] = {}

    def login(self) -> Session:
        """A fresh session for a scoped service principal (recorded as an issued credential)."""
        session = Session(token="sess-" + secrets.token_hex(16), csrf="csrf-" + secrets.token_hex(12),
                          expires_at=utcnow() + dt.timedelta(seconds=self.session_ttl_s))
        self._sessions[session.token] = session
        for kind, value in (("session", session.token), ("csrf", session.csrf)):
            self.facts.add(CredentialIssued(run_id=self.run_id_hint, at=utcnow(), kind=kind, value=value))
        return session

    def expire_sessions(self) -> int:
        """The server drops every session issued so far (they time out); returns how many."""
        now = utcnow()
        for token, session in list(self._sessions.items()):
            self._sessions[token] = Session(session.token, session.csrf, min(session.expires_at, now))
        return len(self._sessions)

    def accepts(self, token: str, csrf: str) -> bool:
        """True while the session is known, unexpired and the CSRF token is its own."""
        session = self._sessions.get(token)
        return session is not None and session.csrf == csrf and utcnow() < session.expires_at

    @staticmethod
    def page() -> bytes:
        return canonical_json({"form": "signup", "fields": ["company", "plan", "seats"], "revision": 3})


class ExternalWorld:
    """Every source a run can observe, readable live at any moment."""

    def __init__(self, rng: random.Random, facts: FactLog, run_id_hint: str, *, session_ttl_s: float) -> None:
        self.builds = [
            BuildInfo(version="1.4.2", artifact_hash=sha256_ref(b"checkout@1.4.2"), canary_passed=True),
            BuildInfo(version=f"1.5.{rng.randint(0, 3)}-rc.1", artifact_hash=sha256_ref(rng.randbytes(8)),
                      canary_passed=True),
            BuildInfo(version="1.5.0", artifact_hash=sha256_ref(b"checkout@1.5.0"), canary_passed=False),
        ]
        self.docs = dict(_DOC_TEXT)
        self.repo = Repository(rng)
        self.webapp = WebApp(facts, run_id_hint, session_ttl_s=session_ttl_s)
        self.freshness_s: dict[str, float] = {}

    def read(self, uri: str) -> bytes:
        """The live content behind `uri` right now."""
        if uri == BUILDS:
            return canonical_json(list(self.builds))
        if uri == REPO:
            return self.repo.content()
        if uri == FORM:
            return self.webapp.page()
        if uri.startswith("corpus://"):
            return self.docs[uri.removeprefix("corpus://")].encode("utf-8")
        raise KeyError(f"no source {uri!r}")

    def live_ref(self, uri: str) -> str:
        return sha256_ref(self.read(uri))

    def freshness(self, uri: str) -> float:
        """How long an observation of `uri` may be used as recorded."""
        return self.freshness_s.get(uri, 3600.0)


class ModelProvider:
    """Serves models by name per provider; an alias can be repointed without the release changing."""

    def __init__(self) -> None:
        self._aliases: dict[tuple[str, str], str] = {}

    def repoint(self, provider: str, alias: str, model: str) -> None:
        """From now on `provider` answers calls to `alias` with `model`."""
        self._aliases[(provider, alias)] = model

    def serve(self, provider: str, release: BehavioralRelease) -> ScriptedModel:
        """The model `provider` actually runs when asked for `release.model`."""
        served = self._aliases.get((provider, release.model), release.model)
        if served == release.model:
            return model_for(release)
        return model_for(next(r for r in RELEASES.values() if r.model == served))


class Meter:
    """Bills consumption to runs (the provider's invoice, the tool meters)."""

    def __init__(self, facts: FactLog) -> None:
        self.facts = facts

    def bill(self, run_id: str, worker: str, charge: BudgetUsage, what: str) -> None:
        self.facts.add(Billed(run_id=run_id, at=utcnow(), worker=worker, charge=charge, what=what))


class VerifierService:
    """Runs a verifier and logs which exact artifact it judged."""

    def __init__(self, facts: FactLog) -> None:
        self.facts = facts

    def run(self, run_id: str, worker: str, artifact: bytes, check: Callable[[], Verdict]) -> Verdict:
        verdict = check()
        self.facts.add(Verified(run_id=run_id, at=utcnow(), worker=worker, candidate_hash=sha256_ref(artifact),
                                passed=verdict.passed, verifier=verdict.verifier_version))
        return verdict


class Approver:
    """Approves one operation on one exact artifact when passing evidence binds to it."""

    def __init__(self, *, ttl_s: float) -> None:
        self.ttl_s = ttl_s
        self.issued = 0

    def approve(self, operation: str, artifact_hash: str, level: AuthorityLevel,
                evidence: Sequence[VerifierEvidence], now: dt.datetime) -> Approval | None:
        if not any(e.passed and e.applies_to(artifact_hash) for e in evidence):
            return None
        self.issued += 1
        return Approval(approval_id=f"appr-{self.issued}", operation=operation, artifact_hash=artifact_hash,
                        level=level, approved_by="change-board", expires_at=now + dt.timedelta(seconds=self.ttl_s))
