"""An HTTP deploy service: the real target of the deploy agent.

Run: `python -m baton.targets.deploy_service --data DIR [--port P] [--ambiguous-rate F --seed S]`.
It binds 127.0.0.1 (port 0 = a free port) and writes the bound port to `DIR/port`.
In production DIR is `BATON_HOME/targets/deploy/`.

Endpoints:

- `POST /deployments` with the mutation headers (`X-Operation-Id`,
  `Idempotency-Key`, `X-Fencing-Run`, `X-Fencing-Epoch`) and a JSON body
  `{service, version, artifact_hash, strategy?}`: 201 with the new deployment,
  200 with the recorded one for a repeated key and body, 409 `fenced` for an
  epoch below the run's highest, 422 `payload_mismatch` for a repeated key with
  another body. With probability `--ambiguous-rate` (seeded by `--seed`) a
  fresh deployment is committed and fsynced, then the answer is held for
  `--ambiguous-delay-s`, past any sensible client timeout.
- `GET /operations/{operation_id}`: `{"state": "COMMITTED" | "NOT_COMMITTED"}`,
  from the service's own records (an unknown id is NOT_COMMITTED, and sealed).
- `GET /deployments`, `GET /health`, `POST /fence` (`{run_id, epoch}`).

Records (plain files in DIR, readable without Baton; see docs/targets.md):

- `deployments.jsonl`: one JSON object per committed deployment, written and
  fsynced before the reply: `seq`, `operation_id`, `idempotency_key`, `run_id`,
  `epoch`, `service`, `version`, `artifact_hash`, `strategy`, `at`.
- `requests.jsonl`, `sealed.jsonl`, `fences.sqlite3`: see `baton.targets.mutation_log`.

`count_side_effects(DIR)` counts deployments per idempotency key from
`deployments.jsonl` alone; more than one line for a key is a duplicate.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from baton.targets.capability_guard import TargetGuard, guard_from_arguments
from baton.checker import TargetEffect
from baton.targets.audit import count_by_key, effects_of
from baton.targets.http_client import MutationClient
from baton.targets.http_server import (
    PORT_FILE,
    Ambiguity,
    apply_mutation,
    install_common_routes,
    serve,
    service_arguments,
)
from baton.targets.mutation_log import MutationLog

DEPLOYMENTS_FILE = "deployments.jsonl"
SERVICE_NAME = "deploy"


class DeploymentBody(BaseModel):
    """What to deploy: a service, a version and the exact artifact hash of the build."""

    model_config = ConfigDict(extra="forbid")

    service: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    version: str = Field(min_length=1)
    artifact_hash: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    strategy: str = "rolling"


def create_app(
    data_dir: Path | str, *, ambiguous_rate: float = 0.0, seed: int = 0, ambiguous_delay_s: float = 5.0,
    guard: TargetGuard | None = None,
) -> FastAPI:
    """The deploy service over the records in `data_dir` (checking capabilities itself with `guard`)."""
    log = MutationLog(data_dir, DEPLOYMENTS_FILE)
    ambiguity = Ambiguity(ambiguous_rate, seed, ambiguous_delay_s)
    app = FastAPI(title="baton deploy service")
    install_common_routes(app, log, SERVICE_NAME)

    @app.post("/deployments", response_model=None)
    async def deploy(body: DeploymentBody, request: Request) -> JSONResponse:
        return await apply_mutation(log, request, body.model_dump(), ambiguity, guard)

    @app.get("/deployments")
    async def deployments() -> list[dict[str, Any]]:
        return log.effects()

    return app


class DeployClient(MutationClient):
    """The deploy service as a gateway `MutationTarget` (also `FenceAware`)."""

    mutation_path = "/deployments"

    def __init__(self, base_url: str, *, name: str = SERVICE_NAME, timeout_s: float = 2.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        super().__init__(base_url, name=name, timeout_s=timeout_s, transport=transport)

    def _body(self, payload: Mapping[str, Any] | bytes) -> dict[str, Any]:
        """Accept the payload as a mapping or as deployment spec bytes (canonical JSON)."""
        return DeploymentBody.model_validate(super()._body(payload)).model_dump()

    def deployments(self) -> list[dict[str, Any]]:
        """Every deployment, as the service reports it."""
        response = self._read("/deployments")
        response.raise_for_status()
        return list(response.json())


def count_side_effects(data_dir: Path | str) -> dict[str, Any]:
    """Deployments per idempotency key, read from `deployments.jsonl` only."""
    return count_by_key(Path(data_dir) / DEPLOYMENTS_FILE)


def read_effects(data_dir: Path | str) -> list[TargetEffect]:
    """The deployments as `TargetEffect`s for `baton.checker.check`."""
    return effects_of(Path(data_dir) / DEPLOYMENTS_FILE)


def main(argv: list[str] | None = None) -> None:
    """Serve the deploy service (see the module docstring for the options)."""
    args = service_arguments("Baton's HTTP deploy service").parse_args(argv)
    data_dir: Path = args.data
    data_dir.mkdir(parents=True, exist_ok=True)
    app = create_app(data_dir, ambiguous_rate=args.ambiguous_rate, seed=args.seed, ambiguous_delay_s=args.ambiguous_delay_s,
                     guard=guard_from_arguments(args, "deploy"))
    serve(app, args.host, args.port, args.port_file or data_dir / PORT_FILE)


if __name__ == "__main__":
    main()
