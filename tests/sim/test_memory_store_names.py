"""The in-memory store names each transaction by the public store method it runs for.

The simulation's write faults target writes by that name (`append_checkpoint`, `finish_operation`), so the name
must not depend on which private helper of the store happens to open the transaction.
"""

from __future__ import annotations

import uuid

from baton.models import OperationState
from baton.sim.memory_store import MemoryStore

from builders.rows import chain, entry, new_run


class _Recorder:
    def __init__(self) -> None:
        self.writes: list[str] = []

    def before_tx(self, store: MemoryStore, write: bool, caller: str) -> None:
        if write:
            self.writes.append(caller)

    def after_tx(self, store: MemoryStore, write: bool, caller: str) -> None:
        return None


def test_writes_are_named_by_the_public_method_not_the_helper_that_opens_the_transaction() -> None:
    store = MemoryStore(f"names-{uuid.uuid4().hex[:8]}")
    try:
        run = new_run(store)
        recorder = _Recorder()
        store.hooks = recorder
        first, second = chain(run.run_id, 2)
        store.append_checkpoint(first)
        store.append_checkpoint(second)  # on stores that pipeline, this one goes through the guarded routine
        claim = store.claim_operation(entry(run.run_id, "k", 0))
        store.finish_operation(claim.entry.operation_id, OperationState.COMMITTED, {"ok": True})
    finally:
        store.close()
    assert recorder.writes == ["append_checkpoint", "append_checkpoint", "claim_operation", "finish_operation"]
