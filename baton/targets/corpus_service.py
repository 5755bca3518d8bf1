"""A document corpus over HTTP: the real source and publishing target of the research agent.

Run: `python -m baton.targets.corpus_service --data DIR [--port P] [--seed S] [--drift-every-s F]`.
It binds 127.0.0.1 (port 0 = a free port) and writes the bound port to `DIR/port`.
In production DIR is `BATON_HOME/targets/corpus/`.

Reading:

- `GET /documents`: `[{id, version, content_hash}]`;
- `GET /documents/{id}[?version=N]`: `{id, version, text, content_hash, changed_at, cause, served_at}`;
  `content_hash` is the sha256 ref of the UTF-8 text, `served_at` the UTC time of the answer.

Changing (documents change under running research runs):

- `POST /admin/documents/{id}` `{text}`: records a new version (same text: no change);
- with `--drift-every-s F > 0`, every F seconds one document, chosen by the
  seeded generator, gains a note and a new version.

Publishing (a consequential side effect, through the gateway):

- `POST /publications` with the mutation headers (`X-Operation-Id`,
  `Idempotency-Key`, `X-Fencing-Run`, `X-Fencing-Epoch`) and body
  `{run_id, report_hash, report}`: 201 stored, 200 replayed, 409 `fenced`,
  422 `payload_mismatch`, `run_mismatch` (body run differs from the fencing
  run) or `report_hash_mismatch` (the hash is not the report's sha256).
- `GET /publications`, `GET /operations/{id}`, `POST /fence`, `GET /health`.

Records in DIR: `documents.json` (every version, see
`baton.targets.corpus_documents`), `publications.jsonl` (one line per stored
publication: `seq`, `operation_id`, `idempotency_key`, `run_id`, `epoch`,
`report_hash`, `report`, `at`), plus `requests.jsonl`, `sealed.jsonl` and
`fences.sqlite3` (see `baton.targets.mutation_log`).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import random
import re
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from baton.targets.capability_guard import TargetGuard, guard_from_arguments
from baton.checker import TargetEffect
from baton.errors import BatonError, IntegrityError
from baton.identity import sha256_ref
from baton.models import Observation, SourceAuthority
from baton.targets.audit import count_by_key, effects_of
from baton.targets.corpus_documents import DOC_ID_PATTERN, DocumentStore
from baton.durable_files import utc_now_text
from baton.targets.http_client import MutationClient
from baton.targets.http_server import (
    FENCING_RUN_HEADER,
    PORT_FILE,
    Ambiguity,
    apply_mutation,
    install_common_routes,
    refusal,
    serve,
    service_arguments,
)
from baton.targets.mutation_log import MutationLog

PUBLICATIONS_FILE = "publications.jsonl"
SERVICE_NAME = "corpus"
SOURCE_PREFIX = "corpus://"


class DocumentNotFoundError(BatonError, KeyError):
    """The corpus holds no such document (or no such version of it)."""


class ChangeBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1)


class PublicationBody(BaseModel):
    """A finished report, identified by the sha256 ref of its UTF-8 text."""

    model_config = ConfigDict(extra="forbid")

    run_id: str = Field(min_length=1)
    report_hash: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    report: str


def create_app(
    data_dir: Path | str,
    *,
    seed: int = 0,
    drift_every_s: float = 0.0,
    ambiguous_rate: float = 0.0,
    ambiguous_delay_s: float = 5.0,
    guard: TargetGuard | None = None,
) -> FastAPI:
    """The corpus service over the records in `data_dir` (checking capabilities itself with `guard`)."""
    log = MutationLog(data_dir, PUBLICATIONS_FILE)  # first: it locks the directory
    documents = DocumentStore(data_dir)
    ambiguity = Ambiguity(ambiguous_rate, seed, ambiguous_delay_s)
    drift_rng = random.Random(f"drift-{seed}")

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        task = asyncio.create_task(_drift(documents, drift_rng, drift_every_s)) if drift_every_s > 0 else None
        try:
            yield
        finally:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    app = FastAPI(title="baton corpus service", lifespan=lifespan)
    install_common_routes(app, log, SERVICE_NAME)

    @app.get("/documents")
    async def list_documents() -> list[dict[str, Any]]:
        latest = [documents.get(doc_id) for doc_id in documents.ids()]
        return [{"id": doc.doc_id, "version": doc.version, "content_hash": doc.content_hash} for doc in latest if doc]

    @app.get("/documents/{doc_id}", response_model=None)
    async def read_document(doc_id: str, version: int | None = None) -> dict[str, Any] | JSONResponse:
        doc = documents.get(doc_id, version)
        if doc is None:
            return refusal(404, "not_found", f"no document {doc_id!r}" + ("" if version is None else f" at version {version}"))
        return {**doc.as_json(), "served_at": utc_now_text()}

    @app.post("/admin/documents/{doc_id}", response_model=None)
    async def change_document(doc_id: str, body: ChangeBody) -> dict[str, Any] | JSONResponse:
        if not re.fullmatch(DOC_ID_PATTERN, doc_id):
            return refusal(422, "bad_document_id", f"document ids match {DOC_ID_PATTERN}")
        doc, changed = documents.change(doc_id, body.text, "admin")
        return {**doc.as_json(), "changed": changed}

    @app.post("/publications", response_model=None)
    async def publish(body: PublicationBody, request: Request) -> JSONResponse:
        if body.report_hash != sha256_ref(body.report.encode("utf-8")):
            return refusal(422, "report_hash_mismatch", "report_hash is not the sha256 of the report's UTF-8 text")
        run_header = request.headers.get(FENCING_RUN_HEADER, "")
        if run_header and run_header != body.run_id:
            return refusal(422, "run_mismatch", f"body names run {body.run_id!r}, the fencing token {run_header!r}")
        return await apply_mutation(log, request, {"report_hash": body.report_hash, "report": body.report}, ambiguity,
                                    guard)

    @app.get("/publications")
    async def publications() -> list[dict[str, Any]]:
        return log.effects()

    return app


async def _drift(documents: DocumentStore, rng: random.Random, every_s: float) -> None:
    while True:
        await asyncio.sleep(every_s)
        documents.drift(rng)


@dataclass(frozen=True)
class FetchedDocument:
    """A document as served, its bytes checked against the served content hash."""

    doc_id: str
    data: bytes
    version: int
    content_hash: str
    served_at: dt.datetime

    @property
    def source(self) -> str:
        return SOURCE_PREFIX + self.doc_id

    def observation(
        self, freshness_budget_s: float, authority: SourceAuthority = SourceAuthority.AUTHORITATIVE
    ) -> Observation:
        """This fetch as an Observation: source, query, time served and content hash."""
        return Observation(
            source=self.source,
            query={"doc_id": self.doc_id},
            observed_at=self.served_at,
            content_ref=self.content_hash,
            freshness_budget_s=freshness_budget_s,
            authority=authority,
        )


class CorpusClient(MutationClient):
    """Reads documents, changes them (admin) and publishes reports as a `MutationTarget`."""

    mutation_path = "/publications"

    def __init__(self, base_url: str, *, name: str = SERVICE_NAME, timeout_s: float = 2.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        super().__init__(base_url, name=name, timeout_s=timeout_s, transport=transport)

    def _body(self, payload: Mapping[str, Any] | bytes) -> dict[str, Any]:
        return PublicationBody.model_validate(super()._body(payload)).model_dump()

    def fetch(self, doc_id: str, version: int | None = None) -> FetchedDocument:
        """The latest (or given) version; IntegrityError if the text does not match its hash."""
        params = {} if version is None else {"version": version}
        response = self._read(f"/documents/{doc_id}", params)
        if response.status_code == 404:
            raise DocumentNotFoundError(f"{self.name}: {response.json().get('message', doc_id)}")
        response.raise_for_status()
        body = response.json()
        data = str(body["text"]).encode("utf-8")
        if sha256_ref(data) != body["content_hash"]:
            raise IntegrityError(f"{self.name}: document {doc_id} v{body['version']} does not match its content hash")
        served_at = dt.datetime.fromisoformat(str(body["served_at"]).replace("Z", "+00:00"))
        return FetchedDocument(doc_id, data, int(body["version"]), str(body["content_hash"]), served_at)

    def list_documents(self) -> list[dict[str, Any]]:
        response = self._read("/documents")
        response.raise_for_status()
        return list(response.json())

    def change_document(self, doc_id: str, text: str) -> dict[str, Any]:
        """Record a new version of a document (what chaos and tests use to move the ground)."""
        response = self._http.post(f"/admin/documents/{doc_id}", json={"text": text})
        response.raise_for_status()
        return dict(response.json())

    def publications(self) -> list[dict[str, Any]]:
        response = self._read("/publications")
        response.raise_for_status()
        return list(response.json())


def publication_payload(run_id: str, report: str | bytes) -> dict[str, str]:
    """The gateway payload that publishes `report` for `run_id`."""
    text = report.decode("utf-8") if isinstance(report, bytes) else report
    return {"run_id": run_id, "report_hash": sha256_ref(text.encode("utf-8")), "report": text}


def count_side_effects(data_dir: Path | str) -> dict[str, Any]:
    """Publications per idempotency key, read from `publications.jsonl` only."""
    return count_by_key(Path(data_dir) / PUBLICATIONS_FILE)


def read_effects(data_dir: Path | str) -> list[TargetEffect]:
    """The publications as `TargetEffect`s for `baton.checker.check`."""
    return effects_of(Path(data_dir) / PUBLICATIONS_FILE)


def main(argv: list[str] | None = None) -> None:
    """Serve the corpus (see the module docstring for the options)."""
    parser = service_arguments("Baton's HTTP document corpus")
    parser.add_argument("--drift-every-s", type=float, default=0.0, help="change a seeded-random document this often")
    args = parser.parse_args(argv)
    data_dir: Path = args.data
    data_dir.mkdir(parents=True, exist_ok=True)
    app = create_app(
        data_dir,
        seed=args.seed,
        drift_every_s=args.drift_every_s,
        ambiguous_rate=args.ambiguous_rate,
        ambiguous_delay_s=args.ambiguous_delay_s,
        guard=guard_from_arguments(args, "publish"),
    )
    serve(app, args.host, args.port, args.port_file or data_dir / PORT_FILE)


if __name__ == "__main__":
    main()
