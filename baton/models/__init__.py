"""Baton's domain records: frozen pydantic models, one concept per module."""

from baton.models.authority import Approval, AuthorityContext, AuthorityLevel
from baton.models.base import Record, Ref
from baton.models.budget import BudgetLedger, BudgetLimits, BudgetUsage
from baton.models.candidate import Candidate
from baton.models.checkpoint import (
    CHECKPOINT_SCHEMA_VERSION,
    Boundary,
    ExecutionCheckpoint,
    ResumabilityClass,
    RunKind,
    checkpoint_id_for,
)
from baton.models.constraints import PortabilityConstraints
from baton.models.environment import EnvironmentIdentity
from baton.models.events import Event, EventType
from baton.models.evidence import CandidateManifest, EvidenceManifest, VerdictResult, VerifierEvidence
from baton.models.observation import Observation, ObservationSegment, SourceAuthority, UseMode
from baton.models.operation import OperationEntry, OperationLedger, OperationState
from baton.models.placement import Placement
from baton.models.release import BehavioralRelease
from baton.models.search import SearchNode, SearchState, VerificationStatus
from baton.models.state import DerivedFact, PortableRunState
from baton.models.workspace import WorkspaceIdentity

__all__ = [
    "CHECKPOINT_SCHEMA_VERSION",
    "Approval",
    "AuthorityContext",
    "AuthorityLevel",
    "BehavioralRelease",
    "Boundary",
    "BudgetLedger",
    "BudgetLimits",
    "BudgetUsage",
    "Candidate",
    "CandidateManifest",
    "DerivedFact",
    "EnvironmentIdentity",
    "Event",
    "EventType",
    "EvidenceManifest",
    "ExecutionCheckpoint",
    "Observation",
    "ObservationSegment",
    "OperationEntry",
    "OperationLedger",
    "OperationState",
    "Placement",
    "PortabilityConstraints",
    "PortableRunState",
    "Record",
    "Ref",
    "ResumabilityClass",
    "RunKind",
    "SearchNode",
    "SearchState",
    "SourceAuthority",
    "UseMode",
    "VerdictResult",
    "VerificationStatus",
    "VerifierEvidence",
    "WorkspaceIdentity",
    "checkpoint_id_for",
]
