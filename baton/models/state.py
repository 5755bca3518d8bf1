"""Portable run state: authoritative inputs, derived facts and agent hypotheses kept apart."""

from __future__ import annotations

from pydantic import Field, JsonValue

from baton.models.base import Record, Ref


class DerivedFact(Record):
    """A structured fact derived from observations, with the refs it was derived from."""

    fact_id: str = Field(min_length=1)
    statement: str
    derived_from: tuple[Ref, ...] = ()


class PortableRunState(Record):
    """The logical state of a run, without any worker-process state.

    Authoritative observations live in the checkpoint's observation log; this
    record holds what was derived from them (facts) and what the agent believes
    or intends (hypotheses, plan), so a different model can reinterpret the
    same evidence without confusing its own guesses with inputs.
    """

    task: str
    step: int = Field(default=0, ge=0)
    derived_facts: tuple[DerivedFact, ...] = ()
    hypotheses: tuple[str, ...] = ()
    active_plan: tuple[str, ...] = ()
    candidate_refs: tuple[Ref, ...] = ()
    unresolved_uncertainty: tuple[str, ...] = ()
    memory: dict[str, JsonValue] = Field(default_factory=dict)
