"""Candidates: artifacts a run proposes, identified by their exact content hash."""

from __future__ import annotations

import datetime as dt

from pydantic import Field

from baton.models.base import Record, Ref


class Candidate(Record):
    """A proposed artifact (patch, report, deployment spec, form submission)."""

    candidate_id: str = Field(min_length=1)
    kind: str = Field(min_length=1)
    artifact_hash: Ref
    produced_by_release: Ref
    parent_candidate: Ref | None = None
    summary: str = ""
    created_at: dt.datetime
