"""freshness, budget-carry-over, authority-downgrade and secret-scan, through the agent SDK.

Each test drives a real run (store, blobs, checkpoints, resume by another
owner) with `builders.runtime`, and judges it by an oracle outside the code a
switch removes: the corpus service's own document history, the budget
charges read by plain SQL, the placement catalog's ceiling and the events
table, the bytes of the blob files on disk.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from decimal import Decimal
from pathlib import Path

import pytest

from baton.ablation import Ablation, ablation_env
from baton.errors import SecretInStateError
from baton.models import AuthorityLevel, BudgetLimits, BudgetUsage
from baton.placements import DEFAULT_PLACEMENTS, placement_named
from baton.runtime.errors import BudgetExhausted, ObservationNeedsRevalidation
from baton.runtime.services import RuntimeServices
from baton.store.blobs_sql import decode_body
from baton.store.checkpoints_sql import body_text
from baton.targets.corpus_service import CorpusClient
from baton.targets.service_process import ServiceProcess

from builders.runtime import MemoryTarget, adopt, launch, make_services

ON_OFF = pytest.mark.parametrize("ablated", [False, True], ids=["protection-on", "switched-off"])


def switched(ablation: Ablation, ablated: bool) -> AbstractContextManager[object]:
    return ablation_env(ablation.value) if ablated else nullcontext()


@pytest.fixture
def services(tmp_path: Path) -> Iterator[RuntimeServices]:
    made = make_services(tmp_path / "home", MemoryTarget())
    try:
        yield made
    finally:
        made.store.close()


# -- freshness --------------------------------------------------------------------------------------


def corpus_versions(data: Path, doc_id: str) -> list[dict[str, object]]:
    """Every version of a document, from the corpus's own documents.json (plain JSON)."""
    return list(json.loads((data / "documents.json").read_text(encoding="utf-8"))["documents"][doc_id])


@ON_OFF
def test_a_stale_observation_is_used_without_revalidation_only_when_freshness_is_off(
    services: RuntimeServices, tmp_path: Path, ablated: bool
) -> None:
    data = tmp_path / "corpus"
    with ServiceProcess.corpus(data) as corpus, CorpusClient(corpus.url, timeout_s=5.0) as client:
        launch(services)
        ctx = adopt(services)
        fetched = client.fetch("leases")
        # Observed two minutes ago with a one-minute budget: stale now.
        ctx.observe(fetched.source, {"doc_id": "leases"}, fetched.data, freshness_s=60,
                    observed_at=fetched.served_at - dt.timedelta(minutes=2))
        client.change_document("leases", "Leases are renewed by heartbeats; an expired lease is taken over.")
        with switched(Ablation.FRESHNESS, ablated):
            try:
                used = ctx.read(fetched.source, {"doc_id": "leases"})
            except ObservationNeedsRevalidation:
                used = None
    versions = corpus_versions(data, "leases")
    assert len(versions) == 2 and versions[-1]["content_hash"] != fetched.content_hash  # the ground moved
    if ablated:
        assert used is not None and used.content == fetched.data  # superseded text, used as if current
        assert str(versions[0]["text"]).encode("utf-8") == used.content
    else:
        assert used is None


# -- budget carry-over ------------------------------------------------------------------------------


def charged_model_calls(services: RuntimeServices, run_id: str = "run-1") -> int:
    """Model calls charged to the run, summed by plain SQL over the append-only charges."""
    rows = services.store.execute_raw("SELECT charge FROM budget_charges WHERE run_id = ?", (run_id,))
    return sum(int((json.loads(row[0]) if isinstance(row[0], str) else row[0]).get("model_calls", 0)) for row in rows)


@ON_OFF
def test_a_new_owner_overspends_only_when_the_budget_is_not_carried_over(services: RuntimeServices, ablated: bool) -> None:
    now = services.store.db_now()
    limits = BudgetLimits(model_spend_usd=Decimal("10"), model_calls=3, search_expansions=0, tool_calls=10,
                          browser_seconds=0, sandbox_seconds=0, verification_reserve_usd=Decimal("1"), retries=1,
                          deadline=now + dt.timedelta(hours=1))
    launch(services, limits=limits)
    first = adopt(services)
    first.charge(BudgetUsage(model_calls=3), "three model calls: the whole allowance")
    first.checkpoint()
    with switched(Ablation.BUDGET_CARRY_OVER, ablated):
        successor = adopt(services, owner="worker:b", placement="cloud-eu")
        try:
            successor.charge(BudgetUsage(model_calls=2), "two more model calls")
            refused = False
            successor.checkpoint()  # the first resumed transition: the reset goes unnoticed by the run itself
        except BudgetExhausted:
            refused = True
    charged = charged_model_calls(services)
    if ablated:
        assert not refused and charged == 5 > limits.model_calls  # spent past the limit
        assert successor.budget.used.model_calls == 2  # what the run believes it has spent
    else:
        assert refused and successor.budget.used.model_calls >= 3


# -- authority downgrade ----------------------------------------------------------------------------


def sealed_authority(services: RuntimeServices, home: Path) -> str:
    """The authority level the run's newest checkpoint carries, read from the rows and blob files as plain JSON.

    A checkpoint row holds either its whole body or what changed from its parent (`{"set": .., "unset": ..}`).
    """
    fields: dict[str, object] = {}
    rows = services.store.execute_raw("SELECT checkpoint_id, body, packed FROM checkpoints WHERE run_id = ? ORDER BY seq",
                                      ("run-1",))
    for checkpoint_id, body, packed in rows:
        doc = json.loads(body_text(checkpoint_id, body, packed))  # a packed row (migration 8) unpacked
        if set(doc) == {"set", "unset"}:
            fields.update(doc["set"])
            for name in doc["unset"]:
                fields.pop(name, None)
        else:
            fields = doc
    ref = str(fields["authority_context_ref"]).removeprefix("sha256:")
    path = home / "blobs" / ref[:2] / ref[2:]
    if path.exists():  # a large blob lives in a file
        raw = path.read_bytes()
    else:  # a small one in the store's blob table, keyed by its raw digest
        data, codec = services.store.execute_raw("SELECT data, codec FROM blobs WHERE digest = ?",
                                                 (bytes.fromhex(ref),))[0]
        raw = decode_body("sha256:" + ref, int(codec), bytes(data))  # the row may keep its body compressed
    return str(json.loads(raw)["level"])


@ON_OFF
def test_a_move_to_a_sandbox_placement_keeps_full_authority_only_without_the_downgrade(
    services: RuntimeServices, tmp_path: Path, ablated: bool
) -> None:
    sandbox = placement_named(DEFAULT_PLACEMENTS, "browser-pool-eu")
    assert sandbox.authority_ceiling is AuthorityLevel.SANDBOX_MUTATE  # the catalog's ceiling, the oracle
    launch(services)
    adopt(services).checkpoint()
    assert sealed_authority(services, tmp_path / "home") == AuthorityLevel.EXTERNAL_MUTATE.value
    with switched(Ablation.AUTHORITY_DOWNGRADE, ablated):
        adopt(services, owner="worker:b", placement=sandbox.name).checkpoint()
    carried = AuthorityLevel(sealed_authority(services, tmp_path / "home"))
    assert sandbox.authority_ceiling.allows(carried) is not ablated


# -- secret scan ------------------------------------------------------------------------------------

SECRET = "hunter2-correct-horse"


def blob_files_holding(root: Path, needle: bytes) -> list[Path]:
    """Files on disk whose raw bytes contain `needle`, and the SQLite store if one of its blob rows
    holds it once decoded (a row may keep its body compressed at rest)."""
    found = [path for path in root.rglob("*") if path.is_file() and needle in path.read_bytes()]
    database = root / "baton.db"
    if database.exists() and database not in found:
        conn = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
        try:
            rows = conn.execute("SELECT digest, data, codec FROM blobs").fetchall()
        finally:
            conn.close()
        if any(needle in decode_body("sha256:" + bytes(digest).hex(), int(codec), bytes(data))
               for digest, data, codec in rows):
            found.append(database)
    return found


@ON_OFF
def test_a_password_reaches_portable_state_only_without_the_secret_scan(
    services: RuntimeServices, tmp_path: Path, ablated: bool
) -> None:
    launch(services)
    ctx = adopt(services)
    ctx.remember("note", f"the db password = '{SECRET}'")
    with switched(Ablation.SECRET_SCAN, ablated):
        try:
            ctx.checkpoint()
            sealed = True
        except SecretInStateError:
            sealed = False
    leaked = blob_files_holding(tmp_path / "home", SECRET.encode("utf-8"))
    if ablated:
        assert sealed and leaked
    else:
        assert not sealed and leaked == []
