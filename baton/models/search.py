"""Search state: the whole tree or frontier, not only the winning branch."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field, model_validator

from baton.models.base import Record, Ref


class VerificationStatus(StrEnum):
    UNVERIFIED = "UNVERIFIED"
    PASSED = "PASSED"
    FAILED = "FAILED"


class SearchNode(Record):
    """One node of a search: lineage, visits, score, verification and pruning."""

    node_id: str = Field(min_length=1)
    parent_id: str | None = None
    candidate_ref: Ref | None = None
    visits: int = Field(default=0, ge=0)
    score: float = 0.0
    verification: VerificationStatus = VerificationStatus.UNVERIFIED
    pruned_reason: str | None = None
    cancelled: bool = False


class SearchState(Record):
    """Nodes, remaining frontier, cancellation and expansions consumed."""

    nodes: tuple[SearchNode, ...] = ()
    frontier: tuple[str, ...] = ()
    expansions_used: int = Field(default=0, ge=0)
    cancelled: bool = False

    @model_validator(mode="after")
    def _lineage_is_closed(self) -> SearchState:
        ids = [node.node_id for node in self.nodes]
        known = set(ids)
        if len(known) != len(ids):
            raise ValueError("search node ids must be unique")
        for node in self.nodes:
            if node.parent_id is not None and node.parent_id not in known:
                raise ValueError(f"node {node.node_id!r} names unknown parent {node.parent_id!r}")
        missing = [node_id for node_id in self.frontier if node_id not in known]
        if missing:
            raise ValueError(f"frontier names unknown nodes: {missing}")
        return self
