"""The research agent: read the corpus, draft a cited report, verify every citation, publish.

Written only against the SDK (`baton.runtime.sdk.RunContext`) and the corpus
client the worker lends it as the `corpus` tool. It can resume from any
boundary: each step looks at the run's boundary and state, not at local
variables, so a new owner simply calls it again.

Before anything is built on an observation, every observation the SDK marks
for revalidation (the run moved, or its freshness budget ran out) is fetched
again. Unchanged content keeps its claims; changed content withdraws the
report (its claims are redrafted from the new text); a document the corpus no
longer serves is dropped, and so is its claim. A stale observation is never
used silently.
"""

from __future__ import annotations

import json

from baton.agents.scripted_models import model_for
from baton.agents.verifiers import verify_report
from baton.lifecycle import TERMINAL
from baton.models import AuthorityLevel, Boundary, Observation
from baton.runtime.sdk import RunContext
from baton.targets.capability_guard import TargetPolicy
from baton.targets.corpus_service import SOURCE_PREFIX, CorpusClient, DocumentNotFoundError, publication_payload

FRESHNESS_S = 120.0
PUBLISH = "publish"
PUBLISH_POLICY = TargetPolicy(PUBLISH, AuthorityLevel.SANDBOX_MUTATE, artifact_field="report_hash")
"""What the corpus checks a publication's capability for: the exact report's hash (fleet, fault matrix, simulation)."""
_BEFORE_COMMIT = (
    Boundary.GENERATING,
    Boundary.CANDIDATE_READY,
    Boundary.VERIFIED,
    Boundary.AWAITING_AUTHORITY,
    Boundary.AUTHORIZED,
)
_UNAVAILABLE = "unavailable_documents"


def _freshness_s(ctx: RunContext) -> float:
    """How long a fetched document may be used unchecked: the task's `freshness_s`, else FRESHNESS_S."""
    return float(ctx.task.get("freshness_s", FRESHNESS_S))


def _source(doc_id: str) -> str:
    return SOURCE_PREFIX + doc_id


def _first_sentence(text: str) -> str:
    return text.split(". ", 1)[0].rstrip(".") + "."


def revalidate_documents(ctx: RunContext, corpus: CorpusClient) -> None:
    """Fetch every document the SDK says may not be used as recorded; drop the ones that are gone."""
    for observation, _mode in ctx.needs_revalidation():
        if not observation.source.startswith(SOURCE_PREFIX):
            continue
        doc_id = str(observation.query.get("doc_id"))
        try:
            fetched = corpus.fetch(doc_id)
        except DocumentNotFoundError:
            ctx.drop_observation(observation, "the corpus no longer serves this document")
            ctx.remember(_UNAVAILABLE, sorted({*ctx.memory(_UNAVAILABLE, []), doc_id}))
            continue
        ctx.revalidate(observation, fetched.data, observed_at=fetched.served_at)


def _gather(ctx: RunContext, corpus: CorpusClient, documents: list[str]) -> list[tuple[Observation, bytes]]:
    """The current observation of every available document, fetching those not yet observed."""
    unavailable = set(ctx.memory(_UNAVAILABLE, []))
    gathered = []
    for doc_id in documents:
        if doc_id in unavailable:
            continue
        seen = ctx.read(_source(doc_id), {"doc_id": doc_id})
        if seen is None:
            try:
                fetched = corpus.fetch(doc_id)
            except DocumentNotFoundError:
                ctx.remember(_UNAVAILABLE, sorted(unavailable | {doc_id}))
                continue
            ctx.observe(fetched.source, {"doc_id": doc_id}, fetched.data, freshness_s=_freshness_s(ctx),
                        observed_at=fetched.served_at)
            seen = ctx.read(_source(doc_id), {"doc_id": doc_id})
        if seen is not None:
            gathered.append((seen.observation, seen.content))
    return gathered


def _draft(ctx: RunContext, corpus: CorpusClient) -> None:
    task = ctx.task
    gathered = _gather(ctx, corpus, list(task.get("documents", [])))
    if not gathered:
        ctx.fail("no document of the task could be observed")
    for observation, content in gathered:
        ctx.derive(f"doc:{observation.query.get('doc_id')}", _first_sentence(content.decode("utf-8")),
                   from_=[observation])
    model = model_for(ctx.release, account=ctx.run_id)
    reply = ctx.call_model(lambda: model.draft_report(gathered, topic=str(task.get("topic", "findings"))),
                           f"{model.name} drafted a report", cost=lambda r: r.charge)
    ctx.propose(reply.output, kind="report", summary=f"{len(gathered)} cited claims by {model.name}",
                inputs=[observation for observation, _ in gathered])


def _postcondition(ctx: RunContext, corpus: CorpusClient) -> None:
    report = ctx.candidate
    if report is None:
        ctx.fail("committed without a report")
    published = [p for p in corpus.publications() if p.get("run_id") == ctx.run_id]
    content = json.dumps(published, sort_keys=True).encode("utf-8")
    ctx.observe(SOURCE_PREFIX + "publications", {"run_id": ctx.run_id}, content, freshness_s=FRESHNESS_S)
    matching = [p for p in published if p.get("report_hash") == report.artifact_hash]
    ctx.confirm_postcondition(
        len(matching) == 1 and len(published) == 1,
        f"{len(matching)} publication(s) of report {report.artifact_hash[:19]} among {len(published)} for the run",
    )


def research_agent(ctx: RunContext) -> None:
    """Run (or resume) a research run until it ends."""
    corpus: CorpusClient = ctx.tool("corpus")
    while ctx.boundary not in TERMINAL:
        boundary = ctx.boundary
        if boundary in _BEFORE_COMMIT:
            revalidate_documents(ctx, corpus)
            if ctx.boundary is not boundary:
                continue  # a changed document withdrew the report
        if boundary is Boundary.GENERATING:
            _draft(ctx, corpus)
        elif boundary is Boundary.CANDIDATE_READY:
            candidate = ctx.candidate
            assert candidate is not None
            if candidate.produced_by_release != ctx.release.release_id:
                ctx.withdraw_candidate("the run now runs on another release: redraft under it")
                continue
            ctx.verify(lambda report: verify_report(report, ctx.valid_observation_refs()),
                       inputs={"valid_observations": len(ctx.valid_observation_refs())})
        elif boundary in (Boundary.VERIFIED, Boundary.AWAITING_AUTHORITY):
            ctx.request_approval(PUBLISH, level=AuthorityLevel.SANDBOX_MUTATE)
        elif boundary is Boundary.AUTHORIZED:
            report = ctx.candidate_bytes()
            candidate = ctx.candidate
            assert candidate is not None
            ctx.perform(PUBLISH, "corpus", publication_payload(ctx.run_id, report),
                        key=f"{ctx.run_id}:publish:{candidate.artifact_hash[7:23]}",
                        level=AuthorityLevel.SANDBOX_MUTATE)
        elif boundary is Boundary.COMMITTED:
            _postcondition(ctx, corpus)
        else:
            ctx.fail(f"research agent cannot continue from {boundary.value}")
