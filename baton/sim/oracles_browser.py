"""The simulation's checks of browser runs, from the web application's own records.

Like `baton.sim.oracles`, nothing here calls Baton's predicates. They read:

* the application's files under the world's root (`webapp/`): `submissions.jsonl`
  (every submission it accepted), `drafts.jsonl` (every version of every draft,
  with the run and epoch that wrote it) and `sessions.jsonl` (every session it
  issued, with its session id and CSRF token);
* the owner's intent for each browser run, written at launch
  (`baton.sim.browser_world.INTENT_FILE`);
* the network's log (when each submission was delivered, and the run's epoch in
  the lease row then) and raw store rows (`runs`, `blobs`, `checkpoints`).

The answer/author check of a submission is the live fault matrix's own reader
(`baton.faults.oracles_agents.submission_evidence`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from baton.faults.oracles_agents import submission_evidence
from baton.sim.world import SimRecords

APP_DIR = "webapp"
INTENT_FILE = "browser-intent.json"  # as baton.sim.browser_world writes it (not imported: the oracle keeps its own)


def _lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _browser_runs(records: SimRecords) -> list[tuple[str, str]]:
    return [(str(r[0]), str(r[1])) for r in records.store.raw(
        "SELECT run_id, status FROM runs WHERE kind = 'browser' ORDER BY run_id")]


def one_submission_per_verified_run(records: SimRecords) -> list[str]:
    """A verified browser run has exactly one submission in the app's records, none has more, and each one is
    of the answers its owner asked for, in a draft version the run wrote."""
    app = records.root / APP_DIR
    submissions = _lines(app / "submissions.jsonl")
    intents_path = records.root / INTENT_FILE
    intents = json.loads(intents_path.read_text()) if intents_path.exists() else {}
    found = []
    for run_id, status in _browser_runs(records):
        mine = [s for s in submissions if s.get("run_id") == run_id]
        if (status == "verified" and len(mine) != 1) or len(mine) > 1:
            found.append(f"browser: {run_id} ended {status} and the application recorded {len(mine)} submission(s) "
                         "for it")
        found += [f"browser: {run_id}: {evidence}" for evidence in submission_evidence(app, run_id,
                                                                                      intents.get(run_id, {}))]
    return found


def no_submission_at_a_stale_epoch(records: SimRecords) -> list[str]:
    """No submission the app accepted was sent at an epoch below the run's epoch when it arrived (the lease row
    then), nor below the epoch of anyone who had written the submitted draft version (the app's draft history)."""
    app = records.root / APP_DIR
    versions: dict[str, list[dict[str, Any]]] = {}
    for line in _lines(app / "drafts.jsonl"):
        versions.setdefault(str(line["draft_id"]), []).append(line)
    arrived = {m.operation_id: [d for d in m.deliveries if d[1] in (200, 201)] for m in records.network.messages
               if m.target == APP_DIR and m.method == "POST" and m.path == "/submissions"}
    found = []
    for submission in _lines(app / "submissions.jsonl"):
        epoch, run_id = int(submission["epoch"]), submission["run_id"]
        ruling = [d[2] for d in arrived.get(str(submission["operation_id"]), []) if d[2] > epoch]
        if ruling:
            found.append(f"browser: the application accepted submission seq {submission['seq']} of {run_id} at epoch "
                         f"{epoch} while the run was at epoch {max(ruling)}")
        written = [int((v.get("writer") or {}).get("epoch") or 0) for v in versions.get(str(submission["draft_id"]), [])
                   if int(v["version"]) <= int(submission["version"]) and (v.get("writer") or {}).get("run_id") == run_id]
        if written and max(written) > epoch:
            found.append(f"browser: submission seq {submission['seq']} of {run_id} at epoch {epoch} submitted draft "
                         f"{submission['draft_id']} v{submission['version']}, which epoch {max(written)} had written")
    return found


def no_session_secret_sealed(records: SimRecords) -> list[str]:
    """No session id or CSRF token the app issued is inside any stored blob or sealed checkpoint."""
    issued = {(key, str(line[key])) for line in _lines(records.root / APP_DIR / "sessions.jsonl")
              for key in ("session_id", "csrf_token") if line.get(key)}
    if not issued:
        return []
    stored = [bytes(row[0]) for row in records.store.raw("SELECT data FROM blobs")]
    stored += [str(row[0]).encode() for row in records.store.raw("SELECT body FROM checkpoints")]
    return [f"browser: a {key} the application issued is stored in a checkpoint or blob"
            for key, secret in sorted(issued) if any(secret.encode() in data for data in stored)]


ORACLES = (
    ("browser: one submission per verified run", one_submission_per_verified_run),
    ("browser: no submission at a stale epoch", no_submission_at_a_stale_epoch),
    ("browser: no session secret sealed", no_session_secret_sealed),
)
