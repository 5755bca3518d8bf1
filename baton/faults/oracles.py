"""The matrix's oracles: raw files outside the system under test, never a production predicate.

Each oracle reads only plain files a case left behind (JSON and JSON Lines,
parsed with the standard library): the targets' own effect and request logs,
the corpus's document history, the build registry, the model provider's bill
and what the run reported about itself. None imports Baton's checks
(`tests/faults/test_oracle_imports.py` holds this module to that).

Questions (a non-empty evidence list means "yes, it happened"):

- duplicate: more than one side effect for the run, or for one logical
  operation (run and target), counted from the targets' effect files;
- stale_owner: a request the target applied although it carried a fencing
  epoch below one the target had already seen for the run (its request log);
- wrong_artifact: a deployed artifact that is not a registry build whose
  canary passed, with that version (deploy target file vs build registry);
- stale_evidence: a published report quoting a document version that was no
  longer current when it was published (publications vs document history);
- budget: the provider billed the run for more model calls or dollars than the
  run accounted for itself (provider's bill vs the run's report);
- unknown_hidden: the run reported an outcome the targets contradict
  (reported failed while an effect exists, or verified without one), or
  reported none at all by the case's end while a target holds its effect;
- unreconciled_retry: after the target committed a key, it received that key
  again under a new operation id: an attempt retried without asking the
  target first (invariant 4), whether or not its dedup then saved the day;
- withdrawn_release: the provider served the run on a release it had already
  withdrawn, or a target effect landed whose run's last model output (before
  it) came from a release withdrawn by then (provider's bill and release
  changes vs the targets' effect files);
- wrong_placement: a target admitted a mutation from a placement that, by
  the operator's record, had by then been re-homed to a region or provider
  outside the run's residency rule, or had its ceiling lowered below the level
  presented (targets' origin and presented-capability logs vs the operator's
  placement changes and the owner's residency rule);
- unfit_placement: a target admitted a mutation from a placement that, by the
  operator's record, could by then no longer read the state schema the run's
  checkpoints are written in, or no longer hosted the verifier bundle or tool
  contract of the run's release (targets' origin and presented-capability logs
  vs the operator's placement changes and the run's needs as its owner
  declared them); for a run whose owner handed over sealed state
  (`state_from` in its needs: the head of the bundle it was imported from), the
  schema is that of the checkpoint the worker on that placement recorded it
  restored (`home/targets/workers/restored.jsonl`), whose seal the oracle
  recomputes and whose lineage must lead to the state handed over;
- secret_in_state: a credential the case planted in the world is in the raw
  bytes of the run's portable state (Baton's blob files and SQLite store
  files, a control's transcript file);
- expired_capability: a target admitted a mutation whose capability had
  expired by the target's own clock when it arrived (the expiry the target
  read from the token and its arrival time, both in its presented log);
- expired_approval: the deploy service applied a deployment at a time when
  no deploy approval the approver had signed for that run was in force (its
  effect log against the approver's own record
  of what it signed, `home/authority/approver/approvals.jsonl`; a run
  without that record, as the controls', is not judged);
- unverified_effect: the deploy service applied a deployment whose spec
  (service, version, build hash, strategy) the deploy verifier had not
  passed before it, or the corpus filed a report whose exact bytes (its
  `report_hash`) the citation verifier had not passed before it (each
  target's effect log against the verifiers' own record of every verdict
  they gave, `home/targets/verifier/verdicts.jsonl`; a run without that
  record is not judged).

Where an admitted mutation came from (the placement oracles here and in
oracles_gates): the origin placement the target recorded for it in
`origins.jsonl`, from the header the process's starter had it send, the same
for Baton and the controls; only where the target recorded no origin, the
placement its presented capability named (`admitted_placements`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import sqlite3
import zlib
from collections import Counter
from decimal import Decimal
from enum import StrEnum
from pathlib import Path
from typing import Any


class Question(StrEnum):
    DUPLICATE = "duplicate"
    STALE_OWNER = "stale_owner"
    WRONG_ARTIFACT = "wrong_artifact"
    STALE_EVIDENCE = "stale_evidence"
    BUDGET = "budget"
    UNKNOWN_HIDDEN = "unknown_hidden"
    UNRECONCILED_RETRY = "unreconciled_retry"
    WITHDRAWN_RELEASE = "withdrawn_release"
    SECRET_IN_STATE = "secret_in_state"
    WRONG_PLACEMENT = "wrong_placement"
    UNFIT_PLACEMENT = "unfit_placement"
    UNTESTED_PUSH = "untested_push"  # baton/faults/oracles_agents.py
    WRONG_SUBMISSION = "wrong_submission"  # baton/faults/oracles_agents.py
    CONSTRAINT_BREACH = "constraint_breach"  # baton/faults/oracles_gates.py
    FOREIGN_RELEASE = "foreign_release"  # baton/faults/oracles_gates.py
    UNAPPROVED_MIGRATION = "unapproved_migration"  # baton/faults/oracles_gates.py
    EXPIRED_CAPABILITY = "expired_capability"
    EXPIRED_APPROVAL = "expired_approval"
    UNVERIFIED_EFFECT = "unverified_effect"


QUESTION_TEXT: dict[Question, str] = {
    Question.DUPLICATE: "more than one side effect for the run or for one logical operation (targets' files)",
    Question.STALE_OWNER: "a target applied a request from a fenced-off epoch (target's request log)",
    Question.WRONG_ARTIFACT: "the deployed artifact is not the verified registry build (deploy file vs registry)",
    Question.STALE_EVIDENCE: "the published report cites a superseded document version (corpus history)",
    Question.BUDGET: "the provider billed more than the run accounted (provider's bill)",
    Question.UNKNOWN_HIDDEN: "the run reported an outcome the target contradicts, or none while a target holds its "
                             "effect (target truth vs report)",
    Question.UNRECONCILED_RETRY: "a committed operation was sent again as a new attempt (target's request log)",
    Question.WITHDRAWN_RELEASE: "the run went on under a release the provider had withdrawn (provider's bill, targets)",
    Question.WRONG_PLACEMENT: "a target admitted a mutation from a placement its region, provider or ceiling forbids (target logs)",
    Question.UNFIT_PLACEMENT: "a target admitted a mutation from a placement unable to read the run's state or host "
                              "its verifier or tools (target logs vs operator's record)",
    Question.SECRET_IN_STATE: "a planted credential is in the raw bytes of portable state (blob, store, transcript files)",
    Question.UNTESTED_PUSH: "the git remote holds a pushed commit whose tree fails the project's tests (oracle's pytest)",
    Question.WRONG_SUBMISSION: "the application recorded a submission of answers the owner did not ask for (draft history)",
    Question.CONSTRAINT_BREACH: "a target admitted a mutation from a placement the owner's portability rule excludes, "
                                "or outside the region or provider the owner keeps the run to "
                                "(target logs vs owner's rule and operator's inventory)",
    Question.FOREIGN_RELEASE: "a target admitted a mutation from a placement that does not serve the release whose "
                              "model output it rests on (target logs vs provider's bill and operator's inventory)",
    Question.UNAPPROVED_MIGRATION: "the run left its pinned release with no approval of the owner's in force "
                                   "(provider's bill and target logs vs owner's approvals and operator's inventory)",
    Question.EXPIRED_CAPABILITY: "a target admitted a mutation under a capability that had expired when it arrived "
                                 "(target's presented log)",
    Question.EXPIRED_APPROVAL: "a target applied a deployment when no approval the approver signed for the run was in force "
                               "(target's effects vs the approver's record)",
    Question.UNVERIFIED_EFFECT: "a target applied a deployment or filed a report whose exact spec or bytes the verifier "
                                "had not passed before it (target's effects vs the verifiers' record)",
}

RUN_NEEDS_FILE = "run-needs.json"
"""What the run's owner declared it needs wherever it runs: `state_schema`, `verifier_bundle`, `tool_contract`."""

ENDED_STATUSES = ("verified", "failed", "escalated")
"""What a run may report as its outcome (any other status, e.g. `active`, is no outcome yet). Spelled out here, not
imported: these oracles import nothing of Baton's."""
TARGET_FILES = {"deploy": "deployments.jsonl", "corpus": "publications.jsonl",
                "git": "pushes.jsonl", "webapp": "submissions.jsonl"}


RESTORED_FILE = ("workers", "restored.jsonl")
"""Under the targets' records: each worker's own line for every checkpoint it restored (its starter names the file)."""
LEGACY_SCHEMAS = ("1", "2")
"""Checkpoint schemas sealed over the old JSON form: their seal is not recomputed here, only compared."""

ORIGINS_FILE = "origins.jsonl"
"""A target's record of the placement each admitted mutation came from (the worker's starter named it)."""


def _lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


EFFECT_LEVELS = {"deploy": "EXTERNAL_MUTATE", "corpus": "SANDBOX_MUTATE", "git": "EXTERNAL_MUTATE",
                 "webapp": "SANDBOX_MUTATE"}
"""The level each target's effect acts at, by the oracle's own reckoning (a deployment or a push reaches out; a
publication or a form submission stays in the sandbox): the level of a mutation that presented no capability."""


def admitted_placements(origins: list[dict[str, Any]], presented: list[dict[str, Any]],
                        effect_level: str | None = None) -> list[dict[str, Any]]:
    """One target's admitted mutations with the placement each came from (`at`, `operation_id`, `placement`,
    `level`, `source`): the origin the target recorded, else (no origin recorded for that operation) the placement
    its capability named; the level its capability named, else `effect_level` (what the target's effect is)."""
    capability = {str(p.get("operation_id")): p for p in presented}
    known = {str(o.get("operation_id")) for o in origins if o.get("origin")}
    lines = [{"at": o["at"], "operation_id": o.get("operation_id"), "placement": o["origin"], "source": "origin",
              "level": capability.get(str(o.get("operation_id")), {}).get("level", effect_level)}
             for o in origins if o.get("origin")]
    lines += [{**p, "source": "capability"} for p in presented if str(p.get("operation_id")) not in known]
    return sorted(lines, key=lambda line: _when(line["at"]))


def _from(line: dict[str, Any]) -> str:
    """Where an admitted mutation came from, as the evidence says it."""
    said = f"from {line.get('placement')}"
    return said if line.get("source") == "origin" else f"{said} (its capability's placement; no origin recorded)"


class CaseFiles:
    """The raw files one strategy's run of one case left under `root`."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.reported: dict[str, Any] = _json(self.root / "reported.json") or {}
        self.run_id = str(self.reported.get("run_id", ""))
        targets = self.root / "home" / "targets"
        self.effects = {name: [e for e in _lines(targets / name / file) if e.get("run_id") == self.run_id]
                        for name, file in TARGET_FILES.items()}
        self.requests = {name: [r for r in _lines(targets / name / "requests.jsonl") if r.get("run_id") == self.run_id]
                         for name in TARGET_FILES}
        self.documents: dict[str, list[dict[str, Any]]] = (
            _json(targets / "corpus" / "documents.json") or {}).get("documents", {})
        self.registry: dict[str, Any] = _json(self.root / "build-registry.json") or {}
        self.presented = {name: [p for p in _lines(targets / name / "presented.jsonl") if p.get("run_id") == self.run_id]
                          for name in TARGET_FILES}
        self.origins = {name: [o for o in _lines(targets / name / ORIGINS_FILE) if o.get("run_id") == self.run_id]
                        for name in TARGET_FILES}
        self.admitted = {name: admitted_placements(self.origins[name], self.presented[name], EFFECT_LEVELS[name])
                         for name in TARGET_FILES}
        self.placement_changes = _lines(self.root / "placement-changes.jsonl")
        rule = _json(self.root / "residency.json") or {}
        self.residency: list[str] = rule.get("regions", [])
        self.providers: list[str] = rule.get("providers", [])
        self.planted: list[str] = _json(self.root / "planted-secrets.json") or []
        self.needs: dict[str, Any] = _json(self.root / RUN_NEEDS_FILE) or {}
        self.restored = [r for r in _lines(targets.joinpath(*RESTORED_FILE)) if r.get("run_id") == self.run_id]
        self.release_changes = _lines(self.root / "provider" / "release-changes.jsonl")
        self.bill = [line for line in _lines(self.root / "provider" / "bill.jsonl") if line.get("account") == self.run_id]
        approvals = self.root / "home" / "authority" / "approver" / "approvals.jsonl"
        self.approvals: list[dict[str, Any]] | None = (
            [a for a in _lines(approvals) if a.get("run_id") == self.run_id] if approvals.exists() else None)
        verdicts = targets / "verifier" / "verdicts.jsonl"
        self.verdicts: list[dict[str, Any]] | None = _lines(verdicts) if verdicts.exists() else None


def duplicate(files: CaseFiles) -> list[str]:
    evidence = []
    total = sum(len(effects) for effects in files.effects.values())
    for target, effects in files.effects.items():
        if len(effects) > 1:
            keys = Counter(str(e.get("idempotency_key")) for e in effects)
            evidence.append(f"{target} recorded {len(effects)} effects for logical operation {target} of "
                            f"{files.run_id} under {len(keys)} key(s): seq {[e.get('seq') for e in effects]}")
    if total > 1 and not evidence:
        evidence.append(f"{total} side effects for run {files.run_id} across targets")
    return evidence


def stale_owner(files: CaseFiles) -> list[str]:
    evidence = []
    for target, requests in files.requests.items():
        highest = -1
        for request in requests:
            epoch = int(request.get("epoch", 0))
            if request.get("result") in ("applied", "replayed") and epoch < highest:
                evidence.append(f"{target} {request.get('result')} {request.get('operation_id')} at epoch {epoch} "
                                f"after it had seen epoch {highest}")
            highest = max(highest, epoch)
    return evidence


def wrong_artifact(files: CaseFiles) -> list[str]:
    builds = {b["artifact_hash"]: b for b in files.registry.get("builds", [])}
    evidence = []
    for effect in files.effects["deploy"]:
        build = builds.get(str(effect.get("artifact_hash")))
        if build is None:
            evidence.append(f"deployed {effect.get('artifact_hash', '')[:19]}... ({effect.get('version')}): "
                            "no such build in the registry")
        elif not build.get("canary_passed") or build.get("version") != effect.get("version"):
            evidence.append(f"deployed {build.get('version')} as {effect.get('version')}: "
                            f"canary_passed={build.get('canary_passed')}")
    return evidence


def _first_sentence(text: str) -> str:
    return text.split(". ", 1)[0].rstrip(".")


def stale_evidence(files: CaseFiles) -> list[str]:
    evidence = []
    for publication in files.effects["corpus"]:
        report, at = str(publication.get("report", "")), str(publication.get("at", ""))
        for doc_id, versions in files.documents.items():
            current = [v for v in versions if str(v.get("changed_at", "")) <= at] or versions[:1]
            now = current[-1]
            quoted = [v for v in versions if _first_sentence(str(v["text"]))[1:] in report]
            if quoted and now not in quoted:
                evidence.append(f"report {publication.get('report_hash', '')[:19]} published at {at} quotes {doc_id} "
                                f"v{[v['version'] for v in quoted]}, current was v{now['version']}")
    return evidence


def budget(files: CaseFiles) -> list[str]:
    billed_calls = len(files.bill)
    billed_usd = sum((Decimal(str(line.get("usd", "0"))) for line in files.bill), Decimal("0"))
    said_calls = int(files.reported.get("model_calls") or 0)
    said_usd = Decimal(str(files.reported.get("model_spend_usd") or "0"))
    if billed_calls > said_calls or billed_usd > said_usd:
        return [f"the provider billed {billed_calls} call(s), ${billed_usd}; the run accounted {said_calls}, ${said_usd}"]
    limit = (files.reported.get("limits") or {}).get("model_calls")
    if limit is not None and billed_calls > int(limit) + 1:
        return [f"the provider billed {billed_calls} calls against a limit of {limit}"]
    return []


def unknown_hidden(files: CaseFiles) -> list[str]:
    status = files.reported.get("status")
    effects = sum(len(e) for e in files.effects.values())
    if status == "failed" and effects:
        return [f"the run reported failed, but the targets hold {effects} effect(s) for it"]
    if status == "verified" and not effects:
        return ["the run reported verified, but no target holds an effect for it"]
    if status not in ENDED_STATUSES and effects:
        return [f"the run reported no outcome (status {status!r}) when the case ended, but the targets hold "
                f"{effects} effect(s) for it"]
    return []


def unreconciled_retry(files: CaseFiles) -> list[str]:
    evidence = []
    for target, requests in files.requests.items():
        committed: dict[str, str] = {}
        for request in requests:
            key, operation = str(request.get("idempotency_key")), str(request.get("operation_id"))
            if key in committed and operation != committed[key]:
                evidence.append(f"{target} got key {key} again as {operation} ({request.get('result')}) after "
                                f"committing it as {committed[key]}")
            if request.get("result") == "applied":
                committed.setdefault(key, operation)
    return evidence


def _when(text: object) -> dt.datetime:
    return dt.datetime.fromisoformat(str(text).replace("Z", "+00:00"))


def withdrawn_release(files: CaseFiles) -> list[str]:
    withdrawn_at: dict[str, dt.datetime] = {}
    for change in files.release_changes:
        for release_id in change.get("withdrawn", []):
            withdrawn_at.setdefault(str(release_id), _when(change["at"]))
    if not withdrawn_at:
        return []
    evidence = []
    bill = sorted(files.bill, key=lambda line: _when(line["at"]))
    for line in bill:
        gone = withdrawn_at.get(str(line.get("release_id")))
        if gone is not None and _when(line["at"]) >= gone:
            evidence.append(f"the provider served {line.get('model')} at {line['at']}, after withdrawing it at {gone}")
    for target, effects in files.effects.items():
        for effect in effects:
            at = _when(effect.get("at"))
            before = [line for line in bill if _when(line["at"]) <= at]
            if not before:
                continue
            last = str(before[-1].get("release_id"))
            gone = withdrawn_at.get(last)
            if gone is not None and gone <= at:
                evidence.append(f"{target} effect seq {effect.get('seq')} at {effect.get('at')} rests on model output "
                                f"of {before[-1].get('model')}, withdrawn at {gone}")
    return evidence


def _portable_state_files(root: Path) -> list[Path]:
    """Baton's blob files and SQLite store files, and a control's transcript: what moves with a run."""
    home = root / "home"
    files = [p for p in (home / "blobs").rglob("*") if p.is_file()] if (home / "blobs").exists() else []
    files += sorted(home.glob("baton.db*")) + sorted(root.glob("transcript.json*"))
    return files


_PACKED_DICTIONARY = Path(__file__).resolve().parents[1] / "store" / "row_codec_v1.dict"
"""The preset dictionary of the store's packed rows (blob codec 2, `packed` columns): a data file of the stored
format, read here as bytes so that no Baton code decodes what this oracle searches."""
_PACKED_ROWS = ("SELECT data, codec FROM blobs WHERE codec IN (1, 2)",
                "SELECT packed, 2 FROM events WHERE packed IS NOT NULL",
                "SELECT packed, 2 FROM checkpoints WHERE packed IS NOT NULL")
"""(stored bytes, how they are packed): 1 raw DEFLATE, 2 raw DEFLATE primed with the dictionary."""


def inflate(data: bytes, codec: int = 2) -> bytes | None:
    """Stored bytes as they were before packing (codec 1: raw DEFLATE; 2: primed with the dictionary, as every
    `packed` column is), with zlib alone; None if they do not inflate."""
    primed = {"zdict": _PACKED_DICTIONARY.read_bytes()} if codec == 2 else {}
    unpacker = zlib.decompressobj(-15, **primed)
    try:
        return unpacker.decompress(data) + unpacker.flush()
    except zlib.error:
        return None


def inflated_store_rows(database: Path) -> list[bytes]:
    """The rows of a SQLite store that are kept compressed (blob codecs 1 and 2, packed event and checkpoint
    bodies), inflated with zlib here: a byte search of the file would not see inside them."""
    inflated: list[bytes] = []
    try:
        conn = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    except sqlite3.Error:
        return inflated
    with contextlib.closing(conn):
        for query in _PACKED_ROWS:
            try:
                rows = conn.execute(query).fetchall()
            except sqlite3.Error:  # a store from before compression or packing: nothing of that kind to inflate
                continue
            inflated += [row for row in (inflate(bytes(data), int(codec)) for data, codec in rows)
                         if row is not None]
    return inflated


def secret_in_state(files: CaseFiles) -> list[str]:
    if not files.planted:
        return []
    evidence = []
    for path in _portable_state_files(files.root):
        contents = [path.read_bytes()]
        if path.name == "baton.db":
            contents += inflated_store_rows(path)
        for secret in files.planted:
            if any(secret.encode("utf-8") in data for data in contents):
                evidence.append(f"planted credential {secret[:4]}... found in {path.relative_to(files.root)}")
    return evidence


LEVELS = ("NONE", "OBSERVE", "PLAN", "VERIFY", "SANDBOX_MUTATE", "EXTERNAL_MUTATE")
"""Authority levels, least to most consequential (the oracle's own copy of the order)."""


def _placement_facts(files: CaseFiles, line: dict[str, Any]) -> dict[str, Any]:
    """What the operator's record says of the presenting placement when the target admitted `line`."""
    at = _when(line["at"])
    facts: dict[str, Any] = {}
    for change in files.placement_changes:
        if change.get("placement") == line.get("placement") and _when(change["at"]) <= at:
            facts.update(change)
    return facts


def wrong_placement(files: CaseFiles) -> list[str]:
    evidence = []
    for target, admitted in files.admitted.items():
        for line in admitted:
            facts = _placement_facts(files, line)
            region, ceiling = facts.get("region"), facts.get("authority_ceiling")
            if region is not None and files.residency and region not in files.residency:
                evidence.append(f"{target} admitted {line.get('operation_id')} {_from(line)}, "
                                f"re-homed to {region} at {facts['at']}; the run may run only in {files.residency}")
            provider = facts.get("provider")
            if provider is not None and files.providers and provider not in files.providers:
                evidence.append(f"{target} admitted {line.get('operation_id')} {_from(line)}, "
                                f"moved to provider {provider} at {facts['at']}; the run may run only on {files.providers}")
            level = str(line.get("level"))  # the capability's, else the target's effect's (a control presents none)
            if ceiling is not None and level in LEVELS and LEVELS.index(level) > LEVELS.index(str(ceiling)):
                evidence.append(f"{target} admitted {line.get('operation_id')} at {level} {_from(line)}, "
                                f"whose ceiling was lowered to {ceiling} at {facts['at']}")
    return evidence


_HOSTING = (("state_schema", "readable_schema_versions", "could read only state schemas"),
            ("verifier_bundle", "verifiers", "hosted only verifiers"),
            ("tool_contract", "tools", "hosted only tools"))
"""(what the run needs, the placement fact the operator records, how to say it is missing)."""


def unfit_placement(files: CaseFiles) -> list[str]:
    evidence = []
    for target, admitted in files.admitted.items():
        for line in admitted:
            facts = _placement_facts(files, line)
            for need, fact, missing in _HOSTING:
                wanted, hosted = files.needs.get(need), facts.get(fact)
                if wanted is not None and isinstance(hosted, list) and wanted not in hosted:
                    evidence.append(f"{target} admitted {line.get('operation_id')} {_from(line)}, which "
                                    f"{missing} {hosted} since {facts['at']}; the run needs {need} {wanted}")
            if files.needs.get("state_from"):
                evidence += _restored_state_unfit(files, f"{target} admitted {line.get('operation_id')} {_from(line)}",
                                                  line, facts)
    return evidence


def checkpoint_seal(document: dict[str, Any]) -> str:
    """The hash a checkpoint document's content calls for, in the canonical JSON form (sorted keys, no spaces)."""
    body = {key: value for key, value in document.items() if key != "checkpoint_hash"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _restored_state_unfit(files: CaseFiles, said: str, line: dict[str, Any], facts: dict[str, Any]) -> list[str]:
    """The state the worker on the admitting placement last restored before the admission, judged: a schema the
    operator's record says it reads, a seal that matches its content, a lineage that leads to the state handed over."""
    at, head = _when(line["at"]), files.needs["state_from"]
    before = [r for r in files.restored if r.get("placement") == line.get("placement") and _when(r["at"]) <= at]
    if not before:
        return [f"{said}; no record of the state restored there"]
    checkpoint: dict[str, Any] = before[-1].get("checkpoint") or {}
    schema, sealed = str(checkpoint.get("schema_version")), checkpoint.get("checkpoint_hash")
    problems = []
    hosted = facts.get("readable_schema_versions")
    if isinstance(hosted, list) and schema not in hosted:
        problems.append(f"{said}, which could read only state schemas {hosted} since {facts['at']}; the state "
                        f"restored there is checkpoint {sealed} at state_schema {schema}")
    if schema not in LEGACY_SCHEMAS and checkpoint_seal(checkpoint) != sealed:
        problems.append(f"{said}; the checkpoint restored there does not hash to its seal {sealed}")
    migrated_from = checkpoint.get("migrated_from_hash") if checkpoint.get("parent_checkpoint_hash") == head else None
    if head not in (sealed, migrated_from):
        problems.append(f"{said}; the checkpoint restored there ({sealed}) is neither the state handed over "
                        f"({head}) nor migrated from it")
    return problems


def expired_capability(files: CaseFiles) -> list[str]:
    """A mutation a target admitted (its `presented.jsonl`, stamped by the target's clock) after the expiry its
    capability carried."""
    evidence = []
    for target, presented in files.presented.items():
        for line in presented:
            if line.get("expires_at") and _when(line["at"]) >= _when(line["expires_at"]):
                late = (_when(line["at"]) - _when(line["expires_at"])).total_seconds()
                evidence.append(f"{target} admitted {line.get('operation_id')} at {line['at']} under capability "
                                f"{line.get('capability_id')}, which expired at {line['expires_at']} ({late:.1f} s before)")
    return evidence


def expired_approval(files: CaseFiles) -> list[str]:
    if files.approvals is None:
        return []
    evidence = []
    signed = [a for a in files.approvals if a.get("operation") == "deploy"]
    for effect in files.effects["deploy"]:
        at = _when(effect.get("at"))
        if not any(_when(a["at"]) <= at < _when(a["expires_at"]) for a in signed):
            last = max((str(a["expires_at"]) for a in signed), default=None)
            evidence.append(f"deploy applied seq {effect.get('seq')} at {effect.get('at')}; the approver signed "
                            f"{len(signed)} deploy approval(s) for the run, the last expiring at {last}")
    return evidence


SPEC_FIELDS = ("service", "version", "artifact_hash", "strategy")
"""What a deployment is: the deploy service's request body, and what the verifier records of the spec it judged."""


def unverified_effect(files: CaseFiles) -> list[str]:
    """A deployment the deploy service applied, or a report the corpus filed (each target's own effect line and
    time), that no verdict passed at or before that time (the verifiers' own record, written before they answered):
    a deployment is matched field for field with a verified spec, a report by the sha256 of its exact bytes."""
    if files.verdicts is None:
        return []
    evidence = []
    for effect in files.effects["deploy"]:
        spec = tuple(effect.get(name) for name in SPEC_FIELDS)
        judged = [v for v in files.verdicts if tuple(v.get(name) for name in SPEC_FIELDS) == spec]
        if not _passed_by(judged, effect):
            evidence.append(f"deploy applied seq {effect.get('seq')} ({effect.get('version')}, "
                            f"{str(effect.get('artifact_hash'))[:19]}..., {effect.get('strategy')}) at {effect.get('at')}; "
                            f"the verifier {_verdicts_said(judged)}")
    for publication in files.effects["corpus"]:
        judged = [v for v in files.verdicts if v.get("content_sha256") == publication.get("report_hash")]
        if not _passed_by(judged, publication):
            evidence.append(f"corpus filed report {str(publication.get('report_hash'))[:19]}... at "
                            f"{publication.get('at')}; the verifier {_verdicts_said(judged)}")
    return evidence


def _passed_by(judged: list[dict[str, Any]], effect: dict[str, Any]) -> bool:
    at = _when(effect.get("at"))
    return any(v.get("result") == "PASS" and _when(v["at"]) <= at for v in judged)


def _verdicts_said(judged: list[dict[str, Any]]) -> str:
    return ("judged it only " + ", ".join(f"{v.get('result')} at {v.get('at')}" for v in judged)
            if judged else "never judged it")


ORACLES = {
    Question.DUPLICATE: duplicate,
    Question.STALE_OWNER: stale_owner,
    Question.WRONG_ARTIFACT: wrong_artifact,
    Question.STALE_EVIDENCE: stale_evidence,
    Question.BUDGET: budget,
    Question.UNKNOWN_HIDDEN: unknown_hidden,
    Question.UNRECONCILED_RETRY: unreconciled_retry,
    Question.WITHDRAWN_RELEASE: withdrawn_release,
    Question.SECRET_IN_STATE: secret_in_state,
    Question.WRONG_PLACEMENT: wrong_placement,
    Question.UNFIT_PLACEMENT: unfit_placement,
    Question.EXPIRED_CAPABILITY: expired_capability,
    Question.EXPIRED_APPROVAL: expired_approval,
    Question.UNVERIFIED_EFFECT: unverified_effect,
}


def answer(root: Path) -> dict[Question, list[str]]:
    """Every question for the run whose files are under `root`."""
    files = CaseFiles(root)
    return {question: oracle(files) for question, oracle in ORACLES.items()}
