"""The one set of test builders every suite uses (import as `builders.<module>`).

- `records`: valid models: releases, placements, budgets, run parts, observations, operations.
- `checkpoints`: sealed checkpoint chains built from real run parts (and their v1 forms).
- `rows`: store rows with stand-in refs (runs, checkpoints, events, ledger entries) and a transaction counter.
- `authority`: approvals, capabilities and gateway requests for a lease holder.
- `handoff`: a research run sealed up to a boundary by the reference agent's model and verifier.
- `replay`: finished runs recorded the way the SDK records them.
- `runtime`: an in-memory fenced target and runtime services for the SDK.
- `live`: real target services and worker processes, and polling helpers.
- `fault_cases`: checks the live fault-case tests share (a case passed over its forbidden placement, clean).
- `fixtures`: the shared pytest fixtures (a store per backend, blobs, a signing key, an authority),
  registered by `tests/conftest.py`.
"""
