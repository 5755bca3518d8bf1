"""A graph that appends one 2 KB observation per step to an `operator.add` list channel."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph

from baton.integrations.langgraph import BatonSaver


class Growing(TypedDict):
    observations: Annotated[list[str], operator.add]
    step: int


def run_growing_graph(saver: BatonSaver, thread: str, steps: int) -> None:
    """Run `steps` steps on `thread`, saving after every one (durability="sync")."""
    def observe(state: Growing) -> dict[str, Any]:
        step = int(state["step"])
        return {"observations": [f"{step:04d}" + "x" * 2044], "step": step + 1}

    graph: StateGraph[Any] = StateGraph(Growing)
    graph.add_node("observe", observe)
    graph.add_edge(START, "observe")
    graph.add_conditional_edges("observe", lambda s: "observe" if s["step"] < steps else END, ["observe", END])
    graph.compile(checkpointer=saver).invoke({"observations": [], "step": 0}, {
        "configurable": {"thread_id": thread}, "recursion_limit": steps + 10}, durability="sync")
