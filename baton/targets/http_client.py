"""The client side of the HTTP targets: one `MutationTarget`-shaped adapter over httpx.

Error mapping, the same as `baton.targets.ledger_target`:

- 200/201: the request's effect (applied now, or replayed from the record);
- 400/409/422: `TargetRejectedError` (definite: nothing was applied; `reason`
  is the service's `error`, `fenced` is True for a fencing refusal);
- timeouts, transport errors, other statuses: `TargetUnavailableError`
  (ambiguous: the effect may have happened; reconcile with `lookup`).

Reads (`_read`) are asked again (`baton.read_retry`) when the answer is lost to a timeout or a transport
error or the service answers 502/503/504. Mutations are never repeated here: an unanswered mutation is
UNKNOWN and goes to reconciliation.

Every mutation names the placement its process was started on (`ORIGIN_HEADER`), when the process that
started it put one in its environment (`ORIGIN_ENV`): the infrastructure's word, which no agent sets.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any, Self

import httpx

from baton import fault_points
from baton.errors import TargetRejectedError, TargetUnavailableError
from baton.fencing import FencingToken
from baton.models.operation import OperationState
from baton.read_retry import RETRY_STATUSES, retry_read
from baton.targets.http_server import (
    CAPABILITY_HEADER,
    FENCING_EPOCH_HEADER,
    FENCING_RUN_HEADER,
    IDEMPOTENCY_HEADER,
    OPERATION_HEADER,
    ORIGIN_ENV,
    ORIGIN_HEADER,
)


class MutationClient:
    """Base adapter: `apply` posts to `mutation_path`; `lookup` and `advance_fence` are shared."""

    mutation_path = "/"

    def __init__(self, base_url: str, *, name: str, timeout_s: float = 2.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.name = name
        self.base_url = base_url.rstrip("/")
        self.origin = os.environ.get(ORIGIN_ENV) or None
        """The placement this process was started on, as its starter set it (None: it set none)."""
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout_s, transport=transport)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _read(self, path: str, params: Mapping[str, Any] | None = None) -> httpx.Response:
        """GET `path`, asked again when its answer is lost or the service is briefly unavailable."""
        return retry_read(lambda: self._http.get(path, params=params), (httpx.TransportError,),
                          again=lambda response: response.status_code in RETRY_STATUSES)

    def _body(self, payload: Mapping[str, Any] | bytes) -> dict[str, Any]:
        """The request body for a gateway payload: a mapping, or JSON bytes (subclasses validate it)."""
        return dict(json.loads(payload)) if isinstance(payload, bytes) else dict(payload)

    def apply(
        self,
        operation_id: str,
        idempotency_key: str,
        fencing_token: FencingToken,
        payload: Mapping[str, Any] | bytes,
    ) -> dict[str, Any]:
        """Send one mutation; return `{"status": "applied"|"replayed", "record": {...}}` or raise."""
        headers = {
            OPERATION_HEADER: operation_id,
            IDEMPOTENCY_HEADER: idempotency_key,
            FENCING_RUN_HEADER: fencing_token.run_id,
            FENCING_EPOCH_HEADER: str(fencing_token.epoch),
        }
        if fencing_token.capability:
            headers[CAPABILITY_HEADER] = fencing_token.capability
        if self.origin:
            headers[ORIGIN_HEADER] = self.origin
        body = self._body(payload)
        fault_points.reached(fault_points.BEFORE_SEND)
        try:
            response = self._http.post(self.mutation_path, json=body, headers=headers)
        except httpx.TimeoutException as exc:
            raise TargetUnavailableError(f"{self.name}: no answer in time for {operation_id}: {exc!r}") from exc
        except httpx.TransportError as exc:
            raise TargetUnavailableError(f"{self.name}: transport error for {operation_id}: {exc!r}") from exc
        if response.status_code in (200, 201):
            fault_points.reached(fault_points.AFTER_REPLY)  # the target committed; the caller has recorded nothing yet
            return dict(response.json())
        if response.status_code in (400, 403, 409, 422):
            data = _json_or_empty(response)
            reason = str(data.get("error", "invalid_request"))
            message = data.get("message") or data.get("detail") or reason
            raise TargetRejectedError(f"{self.name} refused {operation_id}: {message}", reason=reason, fenced=reason == "fenced")
        raise TargetUnavailableError(f"{self.name}: HTTP {response.status_code} for {operation_id}: {response.text[:200]}")

    def lookup(self, operation_id: str) -> OperationState:
        """The target's authoritative state of an operation (UNKNOWN if it cannot be asked)."""
        try:
            response = self._http.get(f"/operations/{operation_id}")
            response.raise_for_status()
            return OperationState(response.json()["state"])
        except (httpx.HTTPError, KeyError, ValueError):
            return OperationState.UNKNOWN

    def advance_fence(self, token: FencingToken) -> int:
        """Tell the target that `token.epoch` now rules the run; return its mark."""
        response = self._http.post("/fence", json=token.as_dict())
        response.raise_for_status()
        return int(response.json()["epoch"])

    def health(self) -> dict[str, Any]:
        response = self._http.get("/health")
        response.raise_for_status()
        return dict(response.json())


def _json_or_empty(response: httpx.Response) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}
