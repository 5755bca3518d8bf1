"""A git remote over HTTP: bare repositories the coding agent clones from and pushes to.

Run: `python -m baton.targets.git_remote_service --data DIR [--port P] [--repository NAME ...] [--trust jwks.json]`.
It binds 127.0.0.1 (port 0 = a free port) and writes the bound port to `DIR/port`.
In a fleet DIR is `BATON_HOME/targets/git/`.

Reading (plain git works too: the repositories are ordinary bare repositories):

- `GET /repositories/{name}`: `{name, path, branches: {branch: commit}}`; `path`
  is the bare repository on disk, which `git clone` reads directly.

Administration (the world changing under a run, and setting it up):

- `POST /admin/repositories` `{name, branch?}`: create `DIR/repos/<name>.git`
  holding the seed project (`baton.targets.git_remote_repo.SEED_PROJECT`);
  an existing repository is left alone;
- `POST /admin/repositories/{name}/commits` `{branch, path, text, message}`:
  an upstream commit of one file (the remote moves).

Pushing (the consequential side effect, through the gateway):

- `POST /pushes` with the mutation headers and `X-Baton-Capability`, body
  `{repository, branch, base_commit, patch, patch_hash, message}`. The remote
  decides itself, in this order, and writes what it decided to
  `requests.jsonl` before answering: the capability must fit (operation
  `push`, this run, epoch, idempotency key, the body's `patch_hash`, level
  EXTERNAL_MUTATE; 403 `capability:<reason>`); `patch_hash` must be the sha256
  of `patch` (422 `patch_hash_mismatch`); then the shared mutation rules
  (`sealed`, `fenced`, replay, `payload_mismatch`); then the branch must still
  be at `base_commit` (409 `stale_base`) and the patch must apply (422
  `patch_does_not_apply`). Only then is the commit created and the branch
  moved (compare-and-swap), and one line appended to `pushes.jsonl`.
- `GET /pushes`, `GET /operations/{id}`, `POST /fence`, `GET /health`.

Records in DIR: `repos/<name>.git` (the bare repositories), `pushes.jsonl`
(one line per applied push: `seq`, `operation_id`, `idempotency_key`,
`run_id`, `epoch`, `at`, the body fields and `outcome: {commit, tree,
previous}`), `origins.jsonl` (the origin placement of each push past the
fence, the capability check and the body's checks; `baton.targets.http_server`),
plus `requests.jsonl`, `sealed.jsonl` and `fences.sqlite3` (see
`baton.targets.mutation_log`). Each commit carries trailers naming the run,
epoch, operation id, idempotency key and patch hash.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from baton.ablation import Ablation, is_ablated
from baton.checker import TargetEffect
from baton.errors import CapabilityError, FencedTokenError, IdempotencyConflictError, PayloadMismatchError
from baton.targets.audit import count_by_key, effects_of
from baton.targets.capability_guard import TargetGuard, TargetPolicy, guard_from_arguments
from baton.targets.git_remote_repo import (
    BRANCH_NAME,
    REPO_NAME,
    GitError,
    StaleBaseError,
    apply_patch_commit,
    branch_head,
    commit_file,
    create_seed_repository,
    git,
)
from baton.targets.http_client import MutationClient
from baton.targets.http_server import (
    CAPABILITY_HEADER,
    PORT_FILE,
    BadHeadersError,
    install_common_routes,
    mutation_headers,
    origin_placement,
    record_origin,
    refusal,
    serve,
    service_arguments,
)
from baton.targets.mutation_log import EffectRefusedError, MutationLog, SealedOperationError
from baton.targets.service_process import ServiceProcess

PUSHES_FILE = "pushes.jsonl"
MODULE = "baton.targets.git_remote_service"
SERVICE_NAME = "git"
PUSH = "push"
REPOS_DIR = "repos"
PUSH_POLICY = TargetPolicy(PUSH, artifact_field="patch_hash")
"""What the remote demands of a push's capability: operation `push`, level EXTERNAL_MUTATE, the body's patch hash."""


class PushBody(BaseModel):
    """One push: a patch prepared against `base_commit` of `branch`, and its exact hash."""

    model_config = ConfigDict(extra="forbid")

    repository: str = Field(pattern=REPO_NAME.pattern)
    branch: str = Field(pattern=BRANCH_NAME.pattern)
    base_commit: str = Field(pattern=r"^[0-9a-f]{40}$")
    patch: str = Field(min_length=1)
    patch_hash: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    message: str = Field(min_length=1, max_length=500)


class RepositoryBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=REPO_NAME.pattern)
    branch: str = Field(default="main", pattern=BRANCH_NAME.pattern)


class UpstreamCommitBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    branch: str = Field(default="main", pattern=BRANCH_NAME.pattern)
    path: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_./-]+$")
    text: str
    message: str = Field(min_length=1)


def repository_path(data_dir: Path | str, name: str) -> Path:
    """Where the bare repository `name` lives under a remote's data directory."""
    if not REPO_NAME.match(name):
        raise ValueError(f"invalid repository name {name!r}")
    return Path(data_dir) / REPOS_DIR / f"{name}.git"


def _branches(bare: Path) -> dict[str, str]:
    out = git(["for-each-ref", "--format=%(refname:short) %(objectname)", "refs/heads"], git_dir=bare)
    return dict(line.split(" ", 1) for line in out.decode().splitlines() if line.strip())


def _trailers(message: str, run_id: str, epoch: int, operation_id: str, key: str, patch_hash: str) -> str:
    return (f"{message.strip()}\n\nBaton-Run: {run_id}\nBaton-Epoch: {epoch}\nBaton-Operation-Id: {operation_id}\n"
            f"Baton-Idempotency-Key: {key}\nBaton-Patch-Hash: {patch_hash}\n")


def create_app(data_dir: Path | str, *, guard: TargetGuard | None = None, repositories: tuple[str, ...] = ()) -> FastAPI:
    """The git remote over the records in `data_dir` (checking capabilities itself with `guard`)."""
    data_dir = Path(data_dir)
    log = MutationLog(data_dir, PUSHES_FILE)
    for name in repositories:
        if not repository_path(data_dir, name).exists():
            create_seed_repository(repository_path(data_dir, name))
    app = FastAPI(title="baton git remote")
    install_common_routes(app, log, SERVICE_NAME)

    @app.post("/admin/repositories")
    def create_repository(body: RepositoryBody) -> dict[str, Any]:
        bare = repository_path(data_dir, body.name)
        if not bare.exists():
            create_seed_repository(bare, branch=body.branch)
        return {"name": body.name, "path": str(bare.resolve()), "branches": _branches(bare)}

    @app.get("/repositories/{name}", response_model=None)
    def repository(name: str) -> dict[str, Any] | JSONResponse:
        if not REPO_NAME.match(name) or not repository_path(data_dir, name).exists():
            return refusal(404, "unknown_repository", f"no repository {name!r}")
        bare = repository_path(data_dir, name)
        return {"name": name, "path": str(bare.resolve()), "branches": _branches(bare)}

    @app.post("/admin/repositories/{name}/commits", response_model=None)
    def upstream_commit(name: str, body: UpstreamCommitBody) -> dict[str, Any] | JSONResponse:
        if not REPO_NAME.match(name) or not repository_path(data_dir, name).exists():
            return refusal(404, "unknown_repository", f"no repository {name!r}")
        # update-ref's compare-and-swap orders this against a concurrent push: one of them is refused.
        commit = commit_file(repository_path(data_dir, name), body.branch, body.path, body.text, body.message)
        return {"name": name, "branch": body.branch, "commit": commit}

    @app.post("/pushes", response_model=None)
    def push(body: PushBody, request: Request) -> JSONResponse:
        try:
            operation_id, key, token = mutation_headers(request)
            origin = origin_placement(request)
        except BadHeadersError as exc:
            return refusal(400, "bad_headers", str(exc))
        payload = body.model_dump()
        stale = log.refuse_if_fenced(operation_id, key, token)
        if stale is not None:
            return refusal(409, "fenced", str(stale), run_id=token.run_id, epoch=token.epoch,
                           highest_epoch=stale.highest_seen)
        if guard is not None and not is_ablated(Ablation.CAPABILITY_CHECK):
            try:
                guard.admit(request.headers.get(CAPABILITY_HEADER), run_id=token.run_id, epoch=token.epoch,
                            idempotency_key=key, payload=payload)
            except CapabilityError as exc:
                log.refuse(operation_id, key, token, f"capability:{exc.reason}", str(exc))
                return refusal(403, f"capability:{exc.reason}", str(exc))
        actual = "sha256:" + hashlib.sha256(body.patch.encode("utf-8")).hexdigest()
        if actual != body.patch_hash:
            log.refuse(operation_id, key, token, "patch_hash_mismatch", f"the patch hashes to {actual}")
            return refusal(422, "patch_hash_mismatch", f"patch_hash {body.patch_hash} is not the patch's hash {actual}")
        bare = repository_path(data_dir, body.repository)
        if not bare.exists():
            log.refuse(operation_id, key, token, "unknown_repository", body.repository)
            return refusal(422, "unknown_repository", f"no repository {body.repository!r}")
        record_origin(log.directory, operation_id, token, origin)

        def perform() -> Mapping[str, Any]:
            message = _trailers(body.message, token.run_id, token.epoch, operation_id, key, body.patch_hash)
            try:
                applied = apply_patch_commit(bare, body.branch, body.base_commit, body.patch.encode("utf-8"), message)
            except StaleBaseError as exc:
                raise EffectRefusedError(str(exc), reason="stale_base") from None
            except GitError as exc:
                raise EffectRefusedError(str(exc), reason="patch_does_not_apply") from None
            return {"commit": applied.commit, "tree": applied.tree, "previous": applied.previous}

        try:
            applied = log.apply(operation_id, key, token, payload, perform=perform)
        except FencedTokenError as exc:
            return refusal(409, "fenced", str(exc), run_id=token.run_id, epoch=token.epoch,
                           highest_epoch=exc.highest_seen)
        except SealedOperationError as exc:
            return refusal(409, "sealed", str(exc))
        except PayloadMismatchError as exc:
            return refusal(422, "payload_mismatch", str(exc), recorded_operation_id=exc.operation_id)
        except IdempotencyConflictError as exc:
            return refusal(422, "operation_id_reused", str(exc))
        except EffectRefusedError as exc:
            return refusal(409 if exc.reason == "stale_base" else 422, exc.reason, str(exc))
        status = "replayed" if applied.replayed else "applied"
        return JSONResponse(status_code=200 if applied.replayed else 201, content={"status": status, "record": applied.record})

    @app.get("/pushes")
    def pushes() -> list[dict[str, Any]]:
        return log.effects()

    return app


class GitRemoteClient(MutationClient):
    """The git remote as a gateway `MutationTarget` (also `FenceAware`), plus its reads and admin calls."""

    mutation_path = "/pushes"

    def __init__(self, base_url: str, *, name: str = SERVICE_NAME, timeout_s: float = 5.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        super().__init__(base_url, name=name, timeout_s=timeout_s, transport=transport)

    def _body(self, payload: Mapping[str, Any] | bytes) -> dict[str, Any]:
        return PushBody.model_validate(super()._body(payload)).model_dump()

    def repository(self, name: str) -> dict[str, Any]:
        """`{name, path, branches}` of one repository (KeyError if the remote has none by that name)."""
        response = self._read(f"/repositories/{name}")
        if response.status_code == 404:
            raise KeyError(f"the git remote has no repository {name!r}")
        response.raise_for_status()
        return dict(response.json())

    def head(self, name: str, branch: str) -> str | None:
        """The commit `branch` of repository `name` is at (None: no such branch)."""
        return self.repository(name)["branches"].get(branch)

    def pushes(self) -> list[dict[str, Any]]:
        """Every applied push, as the remote reports it."""
        response = self._read("/pushes")
        response.raise_for_status()
        return list(response.json())

    def create_repository(self, name: str, branch: str = "main") -> dict[str, Any]:
        """Create (or find) repository `name` holding the seed project (administration, not for agents)."""
        response = self._http.post("/admin/repositories", json={"name": name, "branch": branch})
        response.raise_for_status()
        return dict(response.json())

    def commit_upstream(self, name: str, path: str, text: str, message: str, *, branch: str = "main") -> str:
        """Move the remote: commit one file on `branch` (administration, not for agents)."""
        response = self._http.post(f"/admin/repositories/{name}/commits",
                                   json={"branch": branch, "path": path, "text": text, "message": message})
        response.raise_for_status()
        return str(response.json()["commit"])


def git_remote_process(
    data_dir: Path | str, *, guard: Sequence[str] = (), repositories: Sequence[str] = ()
) -> ServiceProcess:
    """A (not yet started) git remote service; `guard` from `PUSH_POLICY.arguments(trust)` makes it check capabilities."""
    args = [item for name in repositories for item in ("--repository", name)]
    return ServiceProcess(MODULE, data_dir, [*args, *guard])


def remote_head(data_dir: Path | str, repository: str, branch: str) -> str | None:
    """The branch head read with plain git from the bare repository (no service involved)."""
    return branch_head(repository_path(data_dir, repository), branch)


def count_side_effects(data_dir: Path | str) -> dict[str, Any]:
    """Pushes per idempotency key, read from `pushes.jsonl` only."""
    return count_by_key(Path(data_dir) / PUSHES_FILE)


def read_effects(data_dir: Path | str) -> list[TargetEffect]:
    """The pushes as `TargetEffect`s for `baton.checker.check`."""
    return effects_of(Path(data_dir) / PUSHES_FILE)


def main(argv: list[str] | None = None) -> None:
    """Serve the git remote (see the module docstring for the options)."""
    parser = service_arguments("Baton's git remote")
    parser.add_argument("--repository", action="append", default=[], help="seed repository to create at start")
    args = parser.parse_args(argv)
    data_dir: Path = args.data
    data_dir.mkdir(parents=True, exist_ok=True)
    app = create_app(data_dir, guard=guard_from_arguments(args, PUSH), repositories=tuple(args.repository))
    serve(app, args.host, args.port, args.port_file or data_dir / PORT_FILE)


if __name__ == "__main__":
    main()
