"""The simulation's own checks of the ten invariants of DESIGN.md, over raw records only.

Nothing here calls Baton's predicates. The oracles read:

* the targets' own record files (`deployments.jsonl`, `publications.jsonl`, the web application's
  `submissions.jsonl`; its drafts and sessions in `baton.sim.oracles_browser`);
* the network's log of every message and delivery (`baton.sim.network`);
* the lease row of every run as the simulation saw it after each write
  (`SimRecords.lease_history`, read with plain SQL);
* raw rows of the store (`runs`, `operations`, `blobs`, `checkpoints`) with plain SQL,
  decoding JSON themselves.

* for the catalog cases of sec. 27 (`baton.sim.catalog_faults`): the operator's and
  provider's own record of each change (written before the catalog call), the owner's
  record of what each run needs and where it may run (written at launch), and the model
  provider's bill.

Each function returns a list of violations (empty when the invariant held).
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from baton.sim import oracles_approval, oracles_browser, oracles_restore, oracles_verdicts
from baton.sim.faults import PLANTED_FILE
from baton.sim.network import Message
from baton.sim.oracles_coding import CODING_ORACLES
from baton.sim.scheduler import START
from baton.sim.world import ENDED, SimRecords

EFFECT_FILES = {"deploy": "deployments.jsonl", "corpus": "publications.jsonl", "webapp": "submissions.jsonl",
                "git": "pushes.jsonl"}
"""Each target's own record of its side effects (git: coding runs, see baton.sim.oracles_coding)."""
MUTATION_PATHS = {"deploy": "/deployments", "corpus": "/publications", "webapp": "/submissions", "git": "/pushes"}
RUN_TARGETS = {"deploy": "deploy", "coding": "git", "browser": "webapp"}
"""Where a verified run of a kind has its one side effect (any other kind: the corpus)."""
_BOOKKEEPING = frozenset({"seq", "operation_id", "idempotency_key", "run_id", "epoch", "at"})
OWN_RECORDS_I2 = "I2-own-records"
"""The prefix of invariant 2's internal consistency check (`no_operation_opened_below_the_epoch`)."""
_LEVELS = ("NONE", "OBSERVE", "PLAN", "VERIFY", "SANDBOX_MUTATE", "EXTERNAL_MUTATE")  # least to most


def _lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def effects_under(root: Path) -> dict[str, list[dict[str, Any]]]:
    """Each target's side effects as its own record file under `root/<target>/` holds them (one dict per line)."""
    return {target: _lines(root / target / name) for target, name in EFFECT_FILES.items()}


def effects_by_target(records: SimRecords) -> dict[str, list[dict[str, Any]]]:
    """Each target's side effects in a simulated world, from the targets' own record files."""
    return effects_under(records.root)


def _applies(records: SimRecords) -> list[Message]:
    return [m for m in records.network.messages if m.method == "POST" and m.path == MUTATION_PATHS.get(m.target)]


def run_statuses(records: SimRecords) -> list[tuple[str, str]]:
    """(run id, status) of every run: the store's `runs` rows, or what a system without that store reported."""
    if records.reported is not None:
        return sorted(records.reported.items())
    return [(str(r), str(s)) for r, s in records.store.raw("SELECT run_id, status FROM runs ORDER BY run_id")]


def _accepted(message: Message) -> list[tuple[float, int, int, int]]:
    return [d for d in message.deliveries if d[1] in (200, 201)]


def _elapsed(text: str) -> float:
    parsed = dt.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    return (parsed - START).total_seconds()


# 1 ------------------------------------------------------------------------------------------------------------


def no_double_commit(records: SimRecords) -> list[str]:
    """No idempotency key has more than one side effect in any target's own records, and no run has side effects
    under more than one key in a target (each run makes one logical mutation of its target: a second key for it
    is the same operation committed again, as a client that makes a fresh key per attempt does)."""
    found = []
    for target, effects in effects_by_target(records).items():
        for key, count in Counter(e["idempotency_key"] for e in effects).items():
            if count > 1:
                found.append(f"I1: {target} recorded {count} side effects for key {key}")
        keys: defaultdict[str, set[str]] = defaultdict(set)
        for effect in effects:
            if effect.get("run_id"):
                keys[str(effect["run_id"])].add(str(effect["idempotency_key"]))
        for run_id, run_keys in sorted(keys.items()):  # one logical operation per run and target, whatever its keys
            if len(run_keys) > 1:
                found.append(f"I1: {target} recorded side effects for {run_id} under {len(run_keys)} keys "
                             f"(one logical operation committed {len(run_keys)} times)")
    return found


# 2 ------------------------------------------------------------------------------------------------------------


def no_stale_epoch_accepted(records: SimRecords) -> list[str]:
    """No target accepted a mutation at an epoch below one it had already seen for the run: a fence it answered
    200, or an earlier mutation it accepted. Judged from outside: the network's log of what each target was sent
    and how it answered, in delivery order."""
    found = []
    highest: dict[tuple[str, str], int] = {}
    for message, delivery in _deliveries(records):
        key = (message.target, message.run_id)
        if message.path == "/fence" and delivery[1] == 200 and message.fence_epoch is not None:
            highest[key] = max(highest.get(key, 0), message.fence_epoch)
        elif message.path == MUTATION_PATHS.get(message.target) and delivery[1] in (200, 201):
            epoch = message.epoch or 0
            if epoch < highest.get(key, 0):
                found.append(f"I2: {message.target} accepted message {message.seq} of {message.run_id} at epoch "
                             f"{epoch} after seeing epoch {highest[key]}")
            highest[key] = max(highest.get(key, 0), epoch)
    return found


def no_operation_opened_below_the_epoch(records: SimRecords) -> list[str]:
    """Baton's own records agree with themselves: the store opened no operation (an `operations` row) at an epoch
    below the one its lease row held then (`SimRecords.lease_history`). Both sides are rows Baton wrote, so this
    is an internal consistency check, not an oracle from outside (`OWN_RECORDS`): with the store's epoch check
    off, the gateway's fast path writes the row before it refuses the request, and no target ever sees it."""
    found = []
    for op_id, run_id, epoch, created in records.store.raw(
            "SELECT operation_id, run_id, epoch, created_at FROM operations ORDER BY created_at"):
        at = _elapsed(created)
        current = _epoch_at(records, run_id, at)
        if current is not None and int(epoch) < current:
            found.append(f"{OWN_RECORDS_I2}: operation {op_id} of {run_id} opened at epoch {epoch} while the lease "
                         f"was at {current}")
    return found


def _deliveries(records: SimRecords) -> list[tuple[Message, tuple[float, int, int, int]]]:
    pairs = [(m, d) for m in records.network.messages for d in m.deliveries]
    return sorted(pairs, key=lambda pair: pair[1][3])


def _epoch_at(records: SimRecords, run_id: str, at: float) -> int | None:
    current = None
    for when, run, _owner, epoch in records.lease_history:
        if run == run_id and when <= at + 1e-6:
            current = epoch
    return current


# 3 ------------------------------------------------------------------------------------------------------------


def one_owner_per_epoch(records: SimRecords) -> list[str]:
    """Per run, epochs never decrease, and each epoch had at most one owner."""
    found = []
    last: dict[str, int] = {}
    owners: dict[tuple[str, int], set[str]] = defaultdict(set)
    for when, run_id, owner, epoch in records.lease_history:
        if epoch < last.get(run_id, 0):
            found.append(f"I3: {run_id} went from epoch {last[run_id]} back to {epoch} at t={when:.3f}")
        last[run_id] = max(last.get(run_id, 0), epoch)
        if owner is not None:
            owners[(run_id, epoch)].add(owner)
    for (run_id, epoch), names in sorted(owners.items()):
        if len(names) > 1:
            found.append(f"I3: {run_id} epoch {epoch} had owners {sorted(names)}")
    return found


# 4 ------------------------------------------------------------------------------------------------------------


def unknown_reconciled_before_retry(records: SimRecords) -> list[str]:
    """After a mutation whose answer never reached its sender, its target is asked before the key is sent again;
    and no run reports success without its side effect in the target's records."""
    found = []
    messages = records.network.messages
    applies = _applies(records)
    for sent in applies:
        if sent.answered:
            continue
        for later in applies:
            if later.seq <= sent.seq or later.key != sent.key or later.target != sent.target:
                continue
            asked = any(m.method == "GET" and m.target == sent.target and m.path == f"/operations/{sent.operation_id}"
                        and sent.seq < m.seq < later.seq for m in messages)
            if not asked:
                found.append(f"I4: key {sent.key} sent again (message {later.seq}) without asking {sent.target} about "
                             f"{sent.operation_id} (message {sent.seq}, unanswered)")
            break
    effects = effects_by_target(records)
    for run_id, status in run_statuses(records):
        if status != "verified":
            continue
        target = next((t for kind, t in RUN_TARGETS.items() if f"-{kind}-" in run_id), "corpus")
        mine = [e for e in effects[target] if e.get("run_id") == run_id]
        if len(mine) != 1:
            found.append(f"I4: {run_id} reported verified but {target} recorded {len(mine)} side effects for it")
    return found


# 5 ------------------------------------------------------------------------------------------------------------


def fenced_before_new_owner(records: SimRecords) -> list[str]:
    """A target accepts a mutation at epoch e only after it was fenced at e or above (the old epoch shut out)."""
    found = []
    fenced: dict[tuple[str, str], int] = {}
    for message, delivery in _deliveries(records):
        key = (message.target, message.run_id)
        if message.path == "/fence" and delivery[1] == 200 and message.fence_epoch is not None:
            fenced[key] = max(fenced.get(key, 0), message.fence_epoch)
        elif message.path == MUTATION_PATHS.get(message.target) and delivery[1] in (200, 201):
            if (message.epoch or 0) > fenced.get(key, 0):
                found.append(f"I5: {message.target} accepted epoch {message.epoch} of {message.run_id} "
                             f"before being fenced at it (fenced at {fenced.get(key, 0)})")
    return found


# 6 ------------------------------------------------------------------------------------------------------------


def evidence_bound_to_artifact(records: SimRecords) -> list[str]:
    """Every side effect carries a candidate whose exact bytes have passing verifier evidence."""
    blobs = _blobs(records)
    passed = {doc["candidate_hash"] for doc in blobs.values()
              if isinstance(doc, dict) and {"candidate_hash", "verifier_version", "result"} <= set(doc)
              and str(doc["result"]).lower() in ("pass", "passed")}
    found = []
    for target, effects in effects_by_target(records).items():
        for effect in effects:
            candidates = _candidates_for(blobs, effect)
            if not candidates:
                found.append(f"I6: {target} effect {effect['seq']} matches no candidate the run produced")
            elif not candidates & passed:
                found.append(f"I6: {target} effect {effect['seq']} was performed without passing evidence "
                             f"for its exact candidate ({sorted(candidates)[0]})")
    return found


def _blobs(records: SimRecords) -> dict[str, Any]:
    out: dict[str, Any] = {}
    stored = [bytes(data) for _digest, data in records.store.raw("SELECT digest, data FROM blobs")]
    for raw in (*stored, *records.documents):
        ref = "sha256:" + hashlib.sha256(raw).hexdigest()
        try:
            out[ref] = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            out[ref] = raw
    return out


def _candidates_for(blobs: dict[str, Any], effect: dict[str, Any]) -> set[str]:
    """Refs of stored documents whose fields are exactly the side effect's payload (the candidate it came from)."""
    fields = {k: v for k, v in effect.items() if k not in _BOOKKEEPING}
    found = {ref for ref, doc in blobs.items()
             if isinstance(doc, dict) and doc and all(fields.get(k) == v for k, v in doc.items())
             and set(fields) - set(doc) <= {"strategy"}}
    for name in ("report", "text", "content", "patch"):  # a publication (a push) carries the candidate's bytes itself
        if isinstance(fields.get(name), str):
            found.add("sha256:" + hashlib.sha256(fields[name].encode()).hexdigest())
    if isinstance(fields.get("submission_hash"), str):  # a submission names its draft snapshot's hash
        found.add(fields["submission_hash"])
    return found


# 7 ------------------------------------------------------------------------------------------------------------


def authority_within_bounds(records: SimRecords) -> list[str]:
    """Capabilities seen on the wire never exceed the run's authority or the sender's ceiling, and no
    credential the network carried is stored in a checkpoint or a blob."""
    from baton.placements import DEFAULT_PLACEMENTS

    ceilings = {p.name: p.authority_ceiling.value for p in DEFAULT_PLACEMENTS}
    found = []
    tokens = {m.capability for m in records.network.messages if m.capability}
    for message in records.network.messages:
        if not message.capability:
            continue
        level = str(_claims(message.capability).get("level", ""))
        placement = records.senders.get(message.sender)
        bound = records.launch_authority.get(message.run_id)
        if bound is not None and _rank(level) > _rank(bound.value):
            found.append(f"I7: message {message.seq} carried {level} above the run's {bound.value}")
        if placement is not None and _rank(level) > _rank(ceilings[placement]):
            found.append(f"I7: message {message.seq} carried {level} above {placement}'s ceiling")
    if tokens:
        stored = [bytes(row[0]) for row in records.store.raw("SELECT data FROM blobs")]
        stored += [str(row[0]).encode() for row in records.store.raw("SELECT body FROM checkpoints")]
        stored += list(records.documents)
        for token in tokens:
            secret = token.rsplit(".", 1)[-1].encode()
            if any(secret in data for data in stored):
                found.append("I7: a capability the network carried is stored in a checkpoint or blob")
    return found


def no_expired_capability_accepted(records: SimRecords) -> list[str]:
    """No target accepts a request whose capability had expired when it arrived: the expiry is read from the token
    (and from the grant inside it, if any) by plain base64, the arrival time from the network's delivery log."""
    found = []
    for message in records.network.messages:
        if not message.capability:
            continue
        claims = _claims(message.capability)
        expiries = [claims.get("exp")]
        if isinstance(claims.get("grant"), str):
            expiries.append(_claims(claims["grant"]).get("exp"))
        known = [float(e) for e in expiries if isinstance(e, (int, float))]
        if not known:
            continue
        expired_at = START + dt.timedelta(seconds=min(known) - START.timestamp())
        for at, status, _epoch, _order in _accepted(message):
            if START + dt.timedelta(seconds=at) > expired_at:
                found.append(f"expired_capability: {message.target} accepted message {message.seq} "
                             f"({message.method} {message.path}) at t={at:.3f}, its capability expired at "
                             f"t={(expired_at - START).total_seconds():.3f}")
    return found


def _claims(token: str) -> dict[str, Any]:
    try:
        part = token.split(".")[1]
        return dict(json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))))
    except (IndexError, ValueError):
        return {}


def _rank(level: str) -> int:
    return _LEVELS.index(level) if level in _LEVELS else len(_LEVELS)


# 8 ------------------------------------------------------------------------------------------------------------


def budget_never_decreases(records: SimRecords) -> list[str]:
    """Along each run's checkpoint chain, the budget used never goes down (through every handoff)."""
    blobs = _blobs(records)
    found = []
    for (run_id,) in records.store.raw("SELECT DISTINCT run_id FROM checkpoints ORDER BY run_id"):
        previous: dict[str, float] | None = None
        for seq, body in records.store.raw("SELECT seq, body FROM checkpoints WHERE run_id = ? ORDER BY seq", (run_id,)):
            used = _budget_used(body, blobs)
            if used is None:
                continue
            if previous is not None:
                for name, value in previous.items():
                    if used.get(name, 0.0) + 1e-12 < value:
                        found.append(f"I8: {run_id} checkpoint {seq}: {name} used went from {value} to {used.get(name)}")
            previous = used
    return found


def _budget_used(body: Any, blobs: dict[str, Any]) -> dict[str, float] | None:
    try:
        doc = json.loads(body) if isinstance(body, str) else body
    except ValueError:
        return None
    ref = _find_key(doc, "budget_ledger_ref")  # a delta row names it only where the ledger changed
    ledger = blobs.get(ref) if isinstance(ref, str) else ref if isinstance(ref, dict) else None
    if not isinstance(ledger, dict) or not isinstance(ledger.get("used"), dict):
        return None
    out = {}
    for name, value in ledger["used"].items():
        try:
            out[name] = float(value)
        except (TypeError, ValueError):
            continue
    return out


def _find_key(doc: Any, key: str) -> Any:
    if isinstance(doc, dict):
        if key in doc:
            return doc[key]
        for value in doc.values():
            hit = _find_key(value, key)
            if hit is not None:
                return hit
    return None


# 9 ------------------------------------------------------------------------------------------------------------


def no_stale_observation_used(records: SimRecords) -> list[str]:
    """A publication quotes no document version that was superseded when it was published, unless the corpus
    served that very version to someone within the document's freshness budget before the publication.

    Read from outside: the corpus's own version history (`documents.json`), its publications, the network's
    log of document reads and publications, and the budgets recorded in the stored observations.
    """
    history = _document_history(records.root / "corpus" / "documents.json")
    if not history:
        return []
    budgets = _freshness_budgets(_blobs(records))
    published = {m.operation_id: d[0] for m in _applies(records) if m.target == "corpus" for d in _accepted(m)}
    reads: defaultdict[str, list[float]] = defaultdict(list)
    for message in records.network.messages:
        if message.target == "corpus" and message.method == "GET" and message.path.startswith("/documents/"):
            reads[message.path.rsplit("/", 1)[-1]] += [d[0] for d in message.deliveries if d[1] == 200]
    found = []
    for effect in effects_by_target(records)["corpus"]:
        at = published.get(str(effect.get("operation_id")))
        report = str(effect.get("report", "")).lower()
        if at is None:
            continue
        for doc_id, versions in history.items():
            quoted = {v for v, _since, text in versions if _claim(text) in report}
            if not quoted or _version_at(versions, at) in quoted:
                continue
            budget = budgets.get(doc_id, 0.0)
            confirmed = [r for r in reads.get(doc_id, []) if at - budget <= r <= at and _version_at(versions, r) in quoted]
            if not confirmed:
                found.append(f"I9: {effect.get('run_id')} published v{sorted(quoted)} of {doc_id} at t={at:.3f}, "
                             f"v{_version_at(versions, at)} current, no read of it within its {budget:g}s budget")
    return found


_ENVIRONMENT = ("region", "provider", "runtime_image", "tool_versions")
"""The facts of a placement's environment identity in the operator's inventory and its record of changes."""


def _facts_at(inventory: dict[str, Any], changes: list[tuple[float, dict[str, Any]]], placement: str,
              at: float) -> dict[str, Any]:
    """A placement's facts at `at`: the operator's inventory, with its record of changes since applied."""
    facts = dict(inventory.get(placement) or {})
    facts.update({name: value for name, (value, _when) in _placement_facts(changes, placement, at).items()})
    return facts


def _environment(inventory: dict[str, Any], changes: list[tuple[float, dict[str, Any]]], placement: str,
                 at: float) -> tuple[str, ...]:
    facts = _facts_at(inventory, changes, placement, at)
    return tuple(json.dumps(facts.get(name), sort_keys=True) for name in _ENVIRONMENT)


def revalidated_after_environment_change(records: SimRecords) -> list[str]:
    """A publication made from an environment other than the one its quoted document version was read in (by the
    operator's inventory and record of changes: another region, provider, runtime image or tool versions) quotes
    no version that was superseded when it was published, unless that environment read the document since the
    run was reserved there (a run moved to another environment revalidates its observations, sec. 6).

    Read from outside: the corpus's version history, its publications, the network's log of document reads (who
    read which document when), the lease rows' history and the operator's own inventory."""
    from baton.sim.faults import INVENTORY_FILE

    history = _document_history(records.root / "corpus" / "documents.json")
    inventory_path = records.root / INVENTORY_FILE
    if not history or not inventory_path.exists():
        return []
    inventory = json.loads(inventory_path.read_text())
    changes = _operator_record(records)
    publications = {m.operation_id: m for m in _applies(records) if m.target == "corpus" and _accepted(m)}
    reads: defaultdict[str, list[tuple[float, str, str]]] = defaultdict(list)
    for message in records.network.messages:
        if message.target == "corpus" and message.method == "GET" and message.path.startswith("/documents/"):
            reads[message.path.rsplit("/", 1)[-1]] += [(d[0], records.senders.get(message.sender, ""), message.run_id)
                                                       for d in message.deliveries if d[1] == 200]
    found = []
    for effect in effects_by_target(records)["corpus"]:
        message = publications.get(str(effect.get("operation_id")))
        if message is None or message.epoch is None:
            continue
        at, placement, run_id = _accepted(message)[0][0], records.senders.get(message.sender), message.run_id
        began = _decided(records, run_id, message.epoch)
        if placement is None or began is None:
            continue
        here = _environment(inventory, changes, placement, began)
        report = str(effect.get("report", "")).lower()
        for doc_id, versions in history.items():
            quoted = {v for v, _since, text in versions if _claim(text) in report}
            if not quoted or _version_at(versions, at) in quoted:
                continue
            mine = [(r, where) for r, where, reader in reads.get(doc_id, []) if reader in ("", run_id)]
            if any(where == placement and r >= began for r, where in mine):
                continue  # read again here since the move: the freshness oracle (I9) judges it
            elsewhere = [(r, where) for r, where in mine if r <= began and _version_at(versions, r) in quoted
                         and _environment(inventory, changes, where, r) != here]
            if elsewhere:
                r, where = elsewhere[-1]
                found.append(f"environment: {run_id} published v{sorted(quoted)} of {doc_id} at t={at:.3f} from "
                             f"{placement} (epoch {message.epoch}, reserved t={began:.3f}), v{_version_at(versions, at)} "
                             f"current; it was read on {where} at t={r:.3f}, another environment, and not again since "
                             "the move")
    return found


def _document_history(path: Path) -> dict[str, list[tuple[int, float, str]]]:
    """doc id -> [(version, virtual time it became current, text)]; the initial version is current from the start."""
    if not path.exists():
        return {}
    documents = json.loads(path.read_text()).get("documents", {})
    return {doc_id: [(int(v["version"]), -1e9 if int(v["version"]) == 1 else _elapsed(v["changed_at"]), str(v["text"]))
                     for v in sorted(versions, key=lambda v: int(v["version"]))]
            for doc_id, versions in documents.items()}


def _version_at(versions: list[tuple[int, float, str]], at: float) -> int:
    return max((v for v, since, _text in versions if since <= at), default=1)


def _claim(text: str) -> str:
    """A document's first sentence as a report quotes it (lower case, no final stop)."""
    return text.split(". ", 1)[0].rstrip(".").lower()


def _freshness_budgets(blobs: dict[str, Any]) -> dict[str, float]:
    """doc id -> the largest freshness budget any stored observation of it carried (the oracle's lenient bound)."""
    budgets: dict[str, float] = {}
    for doc in blobs.values():
        if isinstance(doc, dict) and str(doc.get("source", "")).startswith("corpus://") and "freshness_budget_s" in doc:
            doc_id = str(doc["source"]).removeprefix("corpus://")
            budgets[doc_id] = max(budgets.get(doc_id, 0.0), float(doc["freshness_budget_s"]))
    return budgets


# 10 -----------------------------------------------------------------------------------------------------------


def every_run_ends(records: SimRecords) -> list[str]:
    """Once the faults stop, every run ends: verified, failed or escalated."""
    rows = run_statuses(records)
    found = [f"I10: {run_id} never ended (status {status})" for run_id, status in rows if status not in ENDED]
    if not records.settled and not found:
        found.append("I10: the world did not settle (a late message or an actor never finished)")
    return found


# sec. 27: a side effect the run's reported end hides -----------------------------------------------------------


def no_hidden_effect(records: SimRecords) -> list[str]:
    """No run reports failed while a target's own record file holds a side effect of it (the live matrix's
    `unknown_hidden`): a failure must not hide what a target did for the run. The status is the store's raw
    `runs.status`, or what a control reported."""
    statuses = dict(run_statuses(records))
    found: list[str] = []
    for target, lines in effects_by_target(records).items():
        for line in lines:
            run_id = str(line.get("run_id", ""))
            if statuses.get(run_id) == "failed":
                found.append(f"hidden: {run_id} reported failed, but {target} holds its effect "
                             f"{line.get('seq')} (key {line.get('idempotency_key')})")
    return found


# sec. 27: a credential in a document the run reads -------------------------------------------------------------


def no_secret_in_state(records: SimRecords) -> list[str]:
    """A credential the world planted (`planted-secrets.json`, written before the document changed) is nowhere in
    the store's raw rows (blobs, checkpoints, events) or in a control's transcript versions. Plain byte search; no
    detector of Baton's is asked."""
    path = records.root / PLANTED_FILE
    if not path.exists():
        return []
    planted = [str(secret).encode("utf-8") for secret in json.loads(path.read_text())]
    found: list[str] = []
    for table, query in (("blob", "SELECT digest, data FROM blobs"),
                         ("checkpoint", "SELECT checkpoint_id, body FROM checkpoints"),
                         ("event", "SELECT seq, body FROM events")):
        for key, data in records.store.raw(query):
            raw = bytes(data) if isinstance(data, (bytes, bytearray, memoryview)) else str(data).encode("utf-8")
            name = bytes(key).hex()[:16] if isinstance(key, (bytes, bytearray, memoryview)) else key
            found += [f"secret_in_state: planted credential {secret[:4].decode()}... is in {table} {name}"
                      for secret in planted if secret in raw]
    for index, raw in enumerate(records.documents):  # a control's transcript versions
        found += [f"secret_in_state: planted credential {secret[:4].decode()}... is in transcript version {index}"
                  for secret in planted if secret in raw]
    return found


# sec. 27: the catalog changed under the run ---------------------------------------------------------------------

_HOSTING = (("state_schema", "readable_schema_versions", "could read only schemas"),
            ("verifier_bundle", "verifiers", "hosted only verifiers"),
            ("tool_contract", "tools", "hosted only tools"))
"""(what the owner says the run needs, the placement fact the operator records, how to say it was missing)."""


def _operator_record(records: SimRecords) -> list[tuple[float, dict[str, Any]]]:
    from baton.sim.catalog_faults import OPERATOR_FILE

    return sorted(((_elapsed(line["at"]), line) for line in _lines(records.root / OPERATOR_FILE)), key=lambda x: x[0])


def _placement_facts(changes: list[tuple[float, dict[str, Any]]], placement: str, at: float) -> dict[str, Any]:
    """fact -> (value, since when) for `placement` at `at`, by the operator's record."""
    facts: dict[str, Any] = {}
    for when, line in changes:
        if when <= at and line.get("placement") == placement and isinstance(line.get("facts"), dict):
            facts.update({name: (value, when) for name, value in line["facts"].items()})
    return facts


def _withdrawn(changes: list[tuple[float, dict[str, Any]]], at: float) -> dict[str, float]:
    """release id -> since when it was withdrawn, for the releases withdrawn (and not published again) at `at`."""
    gone: dict[str, float] = {}
    for when, line in changes:
        if when <= at:
            for release_id in line.get("withdrawn", []):
                gone.setdefault(str(release_id), when)
            for release_id in (line.get("published") or {}).values():
                gone.pop(str(release_id), None)
    return gone


def _decided(records: SimRecords, run_id: str, epoch: int) -> float | None:
    """When the run was last reserved for a placement before `epoch` began: the move that led to it was decided
    by then (a launch's reservation is the first; a worker adopts a reservation at the next epoch)."""
    began = min((when for when, run, _owner, e in records.lease_history if run == run_id and e == epoch), default=None)
    if began is None:
        return None
    return max((when for when, run, owner, _e in records.lease_history
                if run == run_id and when <= began and str(owner).startswith("placement:")), default=began)


def moved_onto_a_changed_catalog(records: SimRecords) -> list[str]:
    """No target accepted a mutation from an owner moved (reserved), by the operator's and provider's record,
    on a placement outside the run's regions or providers, with a ceiling below the level presented, unable to
    read the run's state schema, lacking its verifier bundle or tool contract, or on a release withdrawn by then
    (the release the provider's bill last served the run before the mutation)."""
    from baton.sim.catalog_faults import BILL_FILE, OWNER_FILE

    changes = _operator_record(records)
    if not changes:
        return []
    owners = json.loads((records.root / OWNER_FILE).read_text()) if (records.root / OWNER_FILE).exists() else {}
    bill = sorted(((_elapsed(line["at"]), line) for line in _lines(records.root / BILL_FILE)), key=lambda x: x[0])
    found = []
    for message in _applies(records):
        placement, needs = records.senders.get(message.sender), owners.get(message.run_id)
        accepted = _accepted(message)
        if placement is None or needs is None or not accepted or message.epoch is None:
            continue
        began = _decided(records, message.run_id, message.epoch)
        if began is None:
            continue
        what = (f"{message.target} accepted message {message.seq} of {message.run_id} from {placement} "
                f"(epoch {message.epoch}, reserved t={began:.3f})")
        facts = _placement_facts(changes, placement, began)
        for name, allowed in (("region", needs.get("regions")), ("provider", needs.get("providers"))):
            if name in facts and allowed and facts[name][0] not in allowed:
                found.append(f"wrong_placement: {what}, whose {name} was {facts[name][0]} since "
                             f"t={facts[name][1]:.3f}; the run may run only in {allowed}")
        level = str(_claims(message.capability or "").get("level", ""))
        ceiling = facts.get("authority_ceiling")
        if ceiling is not None and level and _rank(level) > _rank(str(ceiling[0])):
            found.append(f"wrong_placement: {what} at {level}, its ceiling lowered to {ceiling[0]} at t={ceiling[1]:.3f}")
        for need, fact, missing in _HOSTING:
            hosted = facts.get(fact)
            if hosted is not None and needs.get(need) not in hosted[0]:
                found.append(f"unfit_placement: {what}, which {missing} {hosted[0]} since t={hosted[1]:.3f}; "
                             f"the run needs {need} {needs.get(need)}")
        served = [line for when, line in bill if line.get("account") == message.run_id and when <= accepted[0][0]]
        gone = _withdrawn(changes, began)
        release = str(served[-1].get("release_id")) if served else ""
        if release in gone:
            found.append(f"withdrawn_release: {what}, resting on model output of release {release[:19]}, "
                         f"withdrawn at t={gone[release]:.3f}, before the move")
    return found


STATE_LEFT_DOMAIN = "state_left_domain"
"""The owner's rule broken by its run's state leaving the trust domain it was created in: named apart from the
placement rules (`owner_rule`) because it is a harm of its own. A run kept on an unattested source breaks the
attestation rule where it stands; only a move takes its state out of its domain."""


def owner_rule_kept(records: SimRecords) -> list[str]:
    """No target accepted a mutation of a run from an owner moved (reserved), by the operator's inventory and its
    record of changes, onto a placement that breaks the rule the run's owner set before launching it (its own
    record, `baton.sim.faults.OWNER_RULES_FILE`): another region or provider than the one it keeps the run to,
    without attested hardware, or without the data scope (`owner_rule`), or out of the trust domain its state was
    created in (`STATE_LEFT_DOMAIN`)."""
    from baton.sim.faults import INVENTORY_FILE, OWNER_RULES_FILE

    rules_path, inventory_path = records.root / OWNER_RULES_FILE, records.root / INVENTORY_FILE
    if not rules_path.exists() or not inventory_path.exists():
        return []
    rules, inventory = json.loads(rules_path.read_text()), json.loads(inventory_path.read_text())
    changes = _operator_record(records)
    found = []
    for message in _applies(records):
        placement, rule = records.senders.get(message.sender), rules.get(message.run_id)
        if placement is None or not rule or not _accepted(message) or message.epoch is None:
            continue
        began = _decided(records, message.run_id, message.epoch)
        if began is None:
            continue
        facts = _facts_at(inventory, changes, placement, began)
        said = (f"{message.target} accepted message {message.seq} of {message.run_id} from {placement} "
                f"(epoch {message.epoch}, reserved t={began:.3f})")
        for key in ("region", "provider"):
            kept = rule.get(f"same_{key}")
            if kept is not None and facts.get(key) != kept:
                found.append(f"owner_rule: {said}, in {key} {facts.get(key)}; the owner keeps the run in {kept}")
        domain = rule.get("trust_domain")
        if domain is not None and [facts.get("region"), facts.get("provider")] != list(domain):
            found.append(f"{STATE_LEFT_DOMAIN}: {said}, in ({facts.get('region')}, {facts.get('provider')}); the run's "
                         f"state may not leave ({domain[0]}, {domain[1]})")
        if rule.get("attested_hardware") and facts.get("hardware_attested") is not True:
            found.append(f"owner_rule: {said}, which the operator lists as not hardware-attested; the owner "
                         "requires attested hardware")
        scope = rule.get("data_scope")
        if scope is not None and scope not in (facts.get("data_scopes") or []):
            found.append(f"owner_rule: {said}, which holds data scopes {facts.get('data_scopes') or []}; the owner "
                         f"requires {scope}")
    return found


def migration_approved(records: SimRecords) -> list[str]:
    """The provider served no model call of a run on another release than the one its owner pinned it to, unless
    an approval in the owner's own record of a migration from the pinned release to that one was in force then
    (the provider's bill against the owner's record, `baton.sim.faults.APPROVALS_FILE`)."""
    from baton.sim.catalog_faults import BILL_FILE
    from baton.sim.faults import APPROVALS_FILE

    path = records.root / APPROVALS_FILE
    if not path.exists():
        return []
    owner = json.loads(path.read_text())
    pinned, approvals = str(owner.get("pinned_release")), list(owner.get("approvals") or [])
    found = []
    for line in _lines(records.root / BILL_FILE):
        release, at = str(line.get("release_id", "")), dt.datetime.fromisoformat(str(line["at"]))
        if line.get("account") not in records.run_ids or not release or release == pinned:
            continue
        if any(a.get("from_release_id") == pinned and a.get("to_release_id") == release
               and at < dt.datetime.fromisoformat(str(a.get("expires_at"))) for a in approvals):
            continue
        found.append(f"unapproved_migration: the provider served {line.get('account')} a call on release "
                     f"{release[:19]} at {line['at']}; its owner pinned {pinned[:19]} and approved no migration "
                     f"then in force (approvals expiring {[a.get('expires_at') for a in approvals]})")
    return found


# budget travels with the run: what it accounted for against the provider's own bill ---------------------------------


def _accounted_calls(records: SimRecords, run_id: str, blobs: dict[str, Any]) -> float | None:
    """The model calls a run accounted for: a control's final report, else the ledger of Baton's latest checkpoint
    that names one (what moves with the run)."""
    if records.reported_budget is not None:
        return records.reported_budget.get(run_id)
    for (body,) in records.store.raw("SELECT body FROM checkpoints WHERE run_id = ? ORDER BY seq DESC", (run_id,)):
        used = _budget_used(body, blobs)
        if used is not None:
            return used.get("model_calls", 0.0)
    return None


def billed_within_accounted(records: SimRecords) -> list[str]:
    """The provider's bill (its own record, written as it serves a call) holds no more model calls for an ended run
    than the run accounted for.

    The live fault matrix asks the same of its provider (`baton.faults.oracles`: budget). Baton missed it on 24 of
    10,000 seeds until a stranded run's escalation sealed the store's ledger (`baton.handoff.escalation`), and on
    none since (docs/simulation.md); it was reported beside the invariants until then, and counts in `ok` now."""
    from baton.sim.catalog_faults import BILL_FILE

    bill = Counter(str(line.get("account")) for line in _lines(records.root / BILL_FILE))
    blobs = _blobs(records) if records.reported_budget is None else {}
    found = []
    for run_id, status in run_statuses(records):
        if status not in ENDED:
            continue
        accounted = _accounted_calls(records, run_id, blobs)
        if bill[run_id] > (accounted or 0.0):
            found.append(f"bill: the provider billed {run_id} for {bill[run_id]} model call(s); the run accounted "
                         f"{accounted if accounted is not None else 'none'}")
    return found


ORACLES: tuple[tuple[str, Callable[[SimRecords], list[str]]], ...] = (
    ("1 no double commit", no_double_commit),
    ("2 no stale epoch accepted (the targets' view)", no_stale_epoch_accepted),
    ("2 (Baton's own records) no operation opened below the lease's epoch", no_operation_opened_below_the_epoch),
    ("3 one owner per epoch", one_owner_per_epoch),
    ("4 unknown reconciled before retry", unknown_reconciled_before_retry),
    ("5 fenced before a new owner", fenced_before_new_owner),
    ("6 evidence bound to the artifact", evidence_bound_to_artifact),
    ("7 authority within bounds", authority_within_bounds),
    ("8 budget never decreases", budget_never_decreases),
    ("9 no stale observation used", no_stale_observation_used),
    ("10 every run ends", every_run_ends),
    ("sec. 27 moved onto a changed catalog", moved_onto_a_changed_catalog),
    ("sec. 27 no credential in portable state", no_secret_in_state),
    ("sec. 27 no effect hidden by a failed run", no_hidden_effect),
    ("sec. 27 no expired capability accepted", no_expired_capability_accepted),
    ("sec. 27 the owner's rule kept", owner_rule_kept),
    ("sec. 27 observations revalidated after an environment change", revalidated_after_environment_change),
    ("sec. 27 no migration without the owner's approval", migration_approved),
    ("budget travels: the provider billed no more than the run accounted", billed_within_accounted),
    *CODING_ORACLES,
    *oracles_browser.ORACLES,
    *oracles_approval.ORACLES,
    *oracles_verdicts.ORACLES,
    *oracles_restore.ORACLES,
)

OWN_RECORDS: frozenset[str] = frozenset({OWN_RECORDS_I2})
"""The checks of `ORACLES` (by the prefix of what they report) that judge Baton only from rows Baton wrote itself:
internal consistency checks. They count in `ok` like every other, but they are not oracles from outside, so an
ablation is attributed only by the others (`outside_of`, `baton.sim.runner.attribute`)."""


def outside_of(violations: list[str]) -> frozenset[str]:
    """The prefixes (`I2`, `owner_rule`...) of the violations found by an oracle from outside (not `OWN_RECORDS`)."""
    return frozenset(v.split(":", 1)[0] for v in violations) - OWN_RECORDS


def check(records: SimRecords) -> list[str]:
    """Every violation any oracle finds, in oracle order."""
    return [violation for _name, oracle in ORACLES for violation in oracle(records)]
