"""JSON Schema export, so runtimes in other languages can produce and read checkpoints."""

from __future__ import annotations

import json
from pathlib import Path

from baton.models import (
    AuthorityContext,
    BehavioralRelease,
    BudgetLedger,
    Candidate,
    CandidateManifest,
    EnvironmentIdentity,
    Event,
    EvidenceManifest,
    ExecutionCheckpoint,
    Observation,
    ObservationSegment,
    OperationLedger,
    Placement,
    PortableRunState,
    Record,
    SearchState,
    VerifierEvidence,
    WorkspaceIdentity,
)

EXPORTED: dict[str, type[Record]] = {
    "execution_checkpoint": ExecutionCheckpoint,
    "behavioral_release": BehavioralRelease,
    "environment_identity": EnvironmentIdentity,
    "placement": Placement,
    "portable_run_state": PortableRunState,
    "observation": Observation,
    "observation_segment": ObservationSegment,
    "candidate": Candidate,
    "candidate_manifest": CandidateManifest,
    "verifier_evidence": VerifierEvidence,
    "evidence_manifest": EvidenceManifest,
    "operation_ledger": OperationLedger,
    "authority_context": AuthorityContext,
    "budget_ledger": BudgetLedger,
    "search_state": SearchState,
    "workspace_identity": WorkspaceIdentity,
    "event": Event,
}


def schema_documents() -> dict[str, dict[str, object]]:
    """JSON Schema (draft 2020-12) of every exported record, by file stem."""
    documents: dict[str, dict[str, object]] = {}
    for stem, model in EXPORTED.items():
        document = model.model_json_schema(mode="validation")
        document["$schema"] = "https://json-schema.org/draft/2020-12/schema"
        document["$id"] = f"baton:{stem}"
        documents[stem] = document
    return documents


def write_schemas(out: Path) -> list[Path]:
    """Write one `<name>.schema.json` per record into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for stem, document in schema_documents().items():
        path = out / f"{stem}.schema.json"
        path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        written.append(path)
    return written
