"""A worker process running one LangGraph thread; the fencing test starts two of these.

Each step appends "<tag>:<step>" to an `operator.add` list. With `--pause-at N`
the node of step N writes a marker file and waits for a go file before it
returns, so the test can hand the thread to another worker meanwhile. The
outcome (final state or the error that stopped the run) goes to `--result`
as JSON.
"""

from __future__ import annotations

import argparse
import json
import operator
import sqlite3
import sys
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph

STEPS = 6
DEADLINE_S = 120.0


class State(TypedDict):
    observations: Annotated[list[str], operator.add]
    step: int


def build_graph(owner: str, pause_at: int | None, marker: Path | None, go: Path | None) -> StateGraph[Any]:
    def observe(state: State) -> dict[str, Any]:
        step = int(state["step"])
        if pause_at is not None and step == pause_at:
            assert marker is not None and go is not None
            marker.write_text(str(step))
            deadline = time.monotonic() + DEADLINE_S
            while not go.exists():
                if time.monotonic() > deadline:
                    raise TimeoutError("never told to go on")
                time.sleep(0.05)
        return {"observations": [f"{owner}:{step}"], "step": step + 1}

    def route(state: State) -> str:
        return "observe" if int(state["step"]) < STEPS else END

    graph: StateGraph[Any] = StateGraph(State)
    graph.add_node("observe", observe)
    graph.add_edge(START, "observe")
    graph.add_conditional_edges("observe", route, ["observe", END])
    return graph


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--saver", choices=["baton", "langgraph-sqlite"], required=True)
    parser.add_argument("--url", required=True)
    parser.add_argument("--thread", required=True)
    parser.add_argument("--owner", required=True)
    parser.add_argument("--tag", required=True, help="what this worker writes on its observations")
    parser.add_argument("--placement", default="langgraph-local")
    parser.add_argument("--epoch", type=int)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--pause-at", type=int)
    parser.add_argument("--marker", type=Path)
    parser.add_argument("--go", type=Path)
    parser.add_argument("--result", type=Path, required=True)
    args = parser.parse_args(argv)
    config = {"configurable": {"thread_id": args.thread}}
    graph = build_graph(args.tag, args.pause_at, args.marker, args.go)
    inputs = None if args.resume else {"observations": [], "step": 0}
    outcome: dict[str, Any]
    try:
        if args.saver == "baton":
            from baton.integrations.langgraph import BatonSaver
            from baton.integrations.langgraph.platform import default_parts
            from baton.store.factory import open_store

            store = open_store(args.url)
            lease = store.get_lease(BatonSaver.run_id_for(args.thread))
            if lease.owner != args.owner or lease.epoch != args.epoch:
                raise RuntimeError(f"lease is {lease.owner}@{lease.epoch}, not {args.owner}@{args.epoch}")
            saver = BatonSaver(store, lease=lease, parts=default_parts(args.placement))
            final = graph.compile(checkpointer=saver).invoke(inputs, config, durability="sync")
            store.close()
        else:
            from langgraph.checkpoint.sqlite import SqliteSaver

            conn = sqlite3.connect(args.url, check_same_thread=False)
            lg_saver = SqliteSaver(conn)
            lg_saver.setup()
            final = graph.compile(checkpointer=lg_saver).invoke(inputs, config, durability="sync")
            conn.close()
        outcome = {"final": final}
    except Exception as exc:  # noqa: BLE001 - the test reads what stopped the run
        outcome = {"error": type(exc).__name__, "message": str(exc)}
    args.result.write_text(json.dumps(outcome))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
