"""`baton bench`: Baton measured side by side with the alternatives users would pick.

Benchmark-only dependencies (LangGraph, DBOS) come from the `bench` extra and
are imported only by the legs that need them; Baton itself never needs them.
The handoff and gateway benchmarks need nothing beyond Baton and PostgreSQL.

Each sub-benchmark is its own module with a `main(...)` entry point that runs
it with its defaults, prints its tables and returns its JSON document. The
registry below is what `baton bench all` runs, in order.
"""

from __future__ import annotations

SUBBENCHMARKS: dict[str, str] = {
    "checkpoint": "baton.bench.run_checkpoint",
    "handoff": "baton.bench.run_handoff",
    "gateway": "baton.bench.run_gateway",
    "bounds": "baton.bench.run_bounds",
}
"""Sub-benchmark name -> module exposing `main(*, out, as_json, console) -> dict`."""
