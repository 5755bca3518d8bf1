"""An in-process mutation target for model-based tests: fenced, idempotent, with scripted faults."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from baton.checker import TargetEffect
from baton.errors import FencedTokenError, TargetRejectedError, TargetUnavailableError
from baton.fencing import FenceGuard, FencingToken
from baton.identity import ref_of
from baton.models import OperationState

Fault = Literal["reject", "lose_request", "lose_reply"]


class InProcessLedger:
    """Same contract as the HTTP ledger service, in memory (fence marks in a SQLite file)."""

    name = "ledger"

    def __init__(self, fence_path: Path) -> None:
        self.guard = FenceGuard(fence_path)
        self.effects: list[TargetEffect] = []
        self._by_key: dict[tuple[str, str], tuple[str, str]] = {}
        self._sealed: set[str] = set()
        self.next_fault: Fault | None = None

    def apply(
        self, operation_id: str, idempotency_key: str, fencing_token: FencingToken, payload: Mapping[str, Any]
    ) -> dict[str, Any]:
        fault, self.next_fault = self.next_fault, None
        if fault == "lose_request":
            raise TargetUnavailableError("the request was lost on the way")
        if operation_id in self._sealed:
            raise TargetRejectedError(f"{operation_id} was declared NOT_COMMITTED", reason="sealed")
        try:
            self.guard.admit(fencing_token)
        except FencedTokenError as exc:
            raise TargetRejectedError(str(exc), reason="fenced", fenced=True) from exc
        slot = (fencing_token.run_id, idempotency_key)
        payload_ref = ref_of(dict(payload))
        if slot in self._by_key:
            applied_as, applied_ref = self._by_key[slot]
            if applied_ref != payload_ref:
                raise TargetRejectedError("different payload for this key", reason="payload_mismatch")
            return {"status": "replayed", "operation_id": applied_as}
        if fault == "reject":
            raise TargetRejectedError("refused", reason="rejected")
        self._by_key[slot] = (operation_id, payload_ref)
        self.effects.append(
            TargetEffect(seq=len(self.effects) + 1, run_id=fencing_token.run_id, idempotency_key=idempotency_key,
                         operation_id=operation_id, epoch=fencing_token.epoch)
        )
        if fault == "lose_reply":
            raise TargetUnavailableError("the reply was lost on the way back")
        return {"status": "applied", "operation_id": operation_id}

    def lookup(self, operation_id: str) -> OperationState:
        if any(effect.operation_id == operation_id for effect in self.effects):
            return OperationState.COMMITTED
        self._sealed.add(operation_id)
        return OperationState.NOT_COMMITTED

    def advance_fence(self, token: FencingToken) -> int:
        return self.guard.advance(token)
