"""LangGraph legs: an agent loop whose state appends one observation per superstep.

The graph is what a LangGraph user writes for an agent that accumulates what
it saw: a state with an `observations` list channel reduced by `operator.add`
(or, in the delta variants, LangGraph 1.2's beta `DeltaChannel`), one node
that appends the next observation, and an edge back to itself until the
trajectory is done. One invocation runs the whole loop on one thread; the
checkpointer saves after every superstep with `durability="sync"`, so each
step is durable before the next starts (the default, "async", overlaps the
save with the next step and would not measure a durable step).

Per-step time is measured between consecutive entries into the node, so it
covers the node, the reducer and the checkpoint save of that step.
"""

from __future__ import annotations

import operator
import sqlite3
import time
from collections.abc import Callable, Sequence
from typing import Annotated, Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

from baton.bench.leg import LegInput, LegOutput
from baton.bench.measure import laps_from_marks, sqlite_footprint


class AppendState(TypedDict):
    observations: Annotated[list[str], operator.add]
    step: int


def _extend(state: list[str], batches: Sequence[list[str]]) -> list[str]:
    out = list(state)
    for batch in batches:
        out.extend(batch)
    return out


class DeltaState(TypedDict):
    observations: Annotated[list[str], DeltaChannel(_extend)]
    step: int


def _graph(state_type: type[Any], observations: Sequence[str], marks: list[float]) -> StateGraph[Any]:
    total = len(observations)

    def observe(state: Any) -> dict[str, Any]:
        marks.append(time.perf_counter())
        step = int(state["step"])
        return {"observations": [observations[step]], "step": step + 1}

    def route(state: Any) -> str:
        return "observe" if int(state["step"]) < total else END

    graph: StateGraph[Any] = StateGraph(state_type)
    graph.add_node("observe", observe)
    graph.add_edge(START, "observe")
    graph.add_conditional_edges("observe", route, ["observe", END])
    return graph


def _run(saver: BaseCheckpointSaver[Any], state_type: type[Any], observations: Sequence[str]) -> tuple[float, ...]:
    marks: list[float] = []
    app = _graph(state_type, observations, marks).compile(checkpointer=saver)
    config: RunnableConfig = {
        "configurable": {"thread_id": "bench-run"},
        "recursion_limit": len(observations) + 10,
    }
    start: dict[str, Any] = {"observations": [], "step": 0}
    final = app.invoke(start, config, durability="sync")
    end = time.perf_counter()
    if len(final["observations"]) != len(observations):
        raise RuntimeError(f"LangGraph run ended with {len(final['observations'])} observations")
    return tuple(laps_from_marks(marks, end))


def _sqlite_leg(state_type: type[Any]) -> Callable[[LegInput], LegOutput]:
    def leg(inp: LegInput) -> LegOutput:
        path = inp.workdir / "langgraph.sqlite"
        conn = sqlite3.connect(path, check_same_thread=False)
        try:
            saver = SqliteSaver(conn)
            saver.setup()
            seconds = _run(saver, state_type, inp.observations)
        finally:
            conn.close()
        return LegOutput(step_seconds=seconds, components={"sqlite": sqlite_footprint(path)})

    return leg


def _postgres_leg(state_type: type[Any]) -> Callable[[LegInput], LegOutput]:
    def leg(inp: LegInput) -> LegOutput:
        assert inp.database_url is not None
        with PostgresSaver.from_conn_string(inp.database_url) as saver:
            saver.setup()
            seconds = _run(saver, state_type, inp.observations)
        return LegOutput(step_seconds=seconds)

    return leg


sqlite_leg = _sqlite_leg(AppendState)
postgres_leg = _postgres_leg(AppendState)
delta_sqlite_leg = _sqlite_leg(DeltaState)
delta_postgres_leg = _postgres_leg(DeltaState)
