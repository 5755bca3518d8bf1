"""JSON Schema export, so runtimes in other languages can produce and read checkpoints."""

from __future__ import annotations

import json
from pathlib import Path

from baton.identity import CANONICAL_FORM, CANONICAL_FORM_RULES
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


CANONICAL_FORM_FILE = "canonical_form.json"


def canonical_form_document() -> dict[str, object]:
    """How every record above is turned into the bytes its ref hashes (docs/canonical-form.md)."""
    return {
        "name": CANONICAL_FORM,
        "spec": "https://www.rfc-editor.org/rfc/rfc8785",
        "checkpoint_schema_version": ExecutionCheckpoint.model_fields["schema_version"].default,
        "rules": dict(CANONICAL_FORM_RULES),
        "legacy": "checkpoint schema versions 1 and 2 were sealed over pydantic's JSON output; they verify "
        "under that rule and `baton checkpoint migrate` re-seals them in this form",
    }


def write_schemas(out: Path) -> list[Path]:
    """Write one `<name>.schema.json` per record, and the canonical form beside them, into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    canonical = out / CANONICAL_FORM_FILE
    canonical.write_text(json.dumps(canonical_form_document(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    written = [canonical]
    for stem, document in schema_documents().items():
        path = out / f"{stem}.schema.json"
        path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        written.append(path)
    return written
