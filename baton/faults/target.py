"""An in-process mutation target over the same records the HTTP targets keep.

`LogTarget` wraps `baton.targets.mutation_log.MutationLog`, the fenced,
idempotent, durable core of the deploy and corpus services, and speaks the
gateway's `MutationTarget` and `FenceAware` protocols without HTTP in
between. Refusals are translated exactly as the HTTP layer translates them
(fenced and sealed requests are definite refusals), so a scenario run against
it exercises the same semantics as one run against the live services.

Faults are armed per logical intent (the payload's `intent` field), one shot
each: `lose_request` drops the request before the target sees it,
`lose_reply` applies it and then loses the answer (the caller times out).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from baton.checker import TargetEffect
from baton.errors import (
    FencedTokenError,
    IdempotencyConflictError,
    PayloadMismatchError,
    TargetRejectedError,
    TargetUnavailableError,
)
from baton.fencing import FencingToken
from baton.models import OperationState
from baton.targets.mutation_log import MutationLog, SealedOperationError

TargetFault = Literal["lose_request", "lose_reply"]


class LogTarget:
    """A `MutationTarget` (and `FenceAware`) whose side effects are `MutationLog` lines."""

    def __init__(self, directory: Path | str, name: str) -> None:
        self.name = name
        self.log = MutationLog(directory, f"{name}.jsonl")
        self._faults: dict[str, TargetFault] = {}
        self._lock = threading.Lock()

    def arm(self, intent: str, fault: TargetFault) -> None:
        """Misbehave once on the next request whose payload carries `intent`."""
        with self._lock:
            self._faults[intent] = fault

    def _take_fault(self, payload: Mapping[str, Any]) -> TargetFault | None:
        with self._lock:
            return self._faults.pop(str(payload.get("intent", "")), None)

    def apply(
        self, operation_id: str, idempotency_key: str, fencing_token: FencingToken, payload: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Apply once per idempotency key; refuse stale fencing tokens and sealed operation ids."""
        fault = self._take_fault(payload)
        if fault == "lose_request":
            raise TargetUnavailableError(f"{self.name}: request {operation_id} lost before it arrived")
        try:
            applied = self.log.apply(operation_id, idempotency_key, fencing_token, payload)
        except FencedTokenError as exc:
            raise TargetRejectedError(str(exc), reason="fenced", fenced=True) from exc
        except SealedOperationError as exc:
            raise TargetRejectedError(str(exc), reason="sealed") from exc
        except PayloadMismatchError as exc:
            raise TargetRejectedError(str(exc), reason="payload_mismatch") from exc
        except IdempotencyConflictError as exc:
            raise TargetRejectedError(str(exc), reason="operation_id_reused") from exc
        if fault == "lose_reply":
            raise TargetUnavailableError(f"{self.name}: applied {operation_id}, but the answer timed out")
        return {
            "status": "replayed" if applied.replayed else "applied",
            "operation_id": str(applied.record["operation_id"]),
            "seq": int(applied.record["seq"]),
        }

    def lookup(self, operation_id: str) -> OperationState:
        """COMMITTED or NOT_COMMITTED from the target's own records (an unknown id is sealed)."""
        return self.log.lookup(operation_id)

    def advance_fence(self, token: FencingToken) -> int:
        return self.log.advance_fence(token)

    def records(self) -> list[dict[str, Any]]:
        """Every side effect with its payload fields, in the target's order."""
        return self.log.effects()

    def effects(self) -> list[TargetEffect]:
        """The side effects as the invariant checker reads them."""
        return [
            TargetEffect(
                seq=int(r["seq"]), run_id=str(r["run_id"]), idempotency_key=str(r["idempotency_key"]),
                operation_id=str(r["operation_id"]), epoch=int(r["epoch"]),
            )
            for r in self.log.effects()
        ]

    def close(self) -> None:
        self.log.close()
