"""The simulation's checks of coding runs, from the git remote's own records (`root/git/`).

They read the remote's `pushes.jsonl` through the live fault matrix's reader
(`baton.faults.oracles_agents.pushes_of`), the bare repository with plain git
in a scratch index of their own, the network's log (the capability each
accepted push carried, i.e. the exact artifact hash the authority granted
after approval) and the sim's own lease observations per delivery. Nothing
here calls the remote's or the gateway's checks:

- at most one push per coding run in the remote's records;
- no push applied at an epoch below the run's lease epoch when it was delivered;
- a run the store says is verified: the remote applied exactly one push for it,
  the bytes the remote recorded hash to the artifact the capability granted,
  the branch head (plain git) is that push's commit, its parent is the push's
  base, its tree is the base with that patch applied (the oracle applies it
  itself), and the project's tests pass on it (the live oracle's own pytest).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from pathlib import Path

from baton.faults.oracles_agents import pushes_of, untested_pushes
from baton.sim.world import SimRecords

GIT = "git"
PUSHES_PATH = "/pushes"


def _remote(records: SimRecords) -> Path:
    return records.root / GIT


def _coding_runs(records: SimRecords) -> list[tuple[str, str]]:
    return [(str(run_id), str(status)) for run_id, status in records.store.raw(
        "SELECT run_id, status FROM runs WHERE kind = 'coding' ORDER BY run_id")]


def _git(bare: Path, *args: str, env: dict[str, str] | None = None) -> str | None:
    """One plain git command in `bare`, without the user's configuration; its output, or None if it failed."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    clean.update({"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}, **(env or {}))
    done = subprocess.run(["git", f"--git-dir={bare}", *args], capture_output=True, env=clean, check=False)
    return done.stdout.decode().strip() if done.returncode == 0 else None


def _tree_with(bare: Path, base: str, patch: str) -> str | None:
    """The tree `patch` makes of `base`, applied by the oracle itself in a scratch index (None if it does not)."""
    with tempfile.TemporaryDirectory(prefix="oracle-tree-") as scratch:
        index = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
        patch_file = Path(scratch) / "approved.patch"
        patch_file.write_text(patch, encoding="utf-8")
        if _git(bare, "read-tree", base, env=index) is None or \
                _git(bare, "apply", "--cached", str(patch_file), env=index) is None:
            return None
        return _git(bare, "write-tree", env=index)


def one_push_per_coding_run(records: SimRecords) -> list[str]:
    """At most one applied push per coding run in the remote's own records."""
    found = []
    for run_id, _status in _coding_runs(records):
        pushes = pushes_of(_remote(records), run_id)
        if len(pushes) > 1:
            found.append(f"coding: the git remote applied {len(pushes)} pushes for {run_id} "
                         f"(seqs {[p.get('seq') for p in pushes]})")
    return found


def no_push_at_a_stale_epoch(records: SimRecords) -> list[str]:
    """No push the remote recorded carries an epoch below the run's lease epoch when its request was delivered."""
    delivered = {m.operation_id: m for m in records.network.messages if m.target == GIT and m.path == PUSHES_PATH}
    found = []
    for run_id, _status in _coding_runs(records):
        for push in pushes_of(_remote(records), run_id):
            message = delivered.get(str(push.get("operation_id")))
            applied = [d for d in (message.deliveries if message else []) if d[1] == 201]
            if message is None or not applied:
                found.append(f"coding: push seq {push.get('seq')} of {run_id} was never delivered as applied")
                continue
            lease_epoch = applied[0][2]
            if int(push.get("epoch", -1)) < lease_epoch:
                found.append(f"coding: the remote applied push seq {push.get('seq')} of {run_id} at epoch "
                             f"{push.get('epoch')} while the run's lease was at epoch {lease_epoch}")
    return found


def verified_run_holds_the_approved_patch(records: SimRecords) -> list[str]:
    """A verified coding run's branch holds exactly the patch the capability granted, and its tests pass."""
    from baton.sim.oracles import _claims  # the sim oracles' own token reader (imported late: they import this)

    remote = _remote(records)
    found = []
    for run_id, status in _coding_runs(records):
        if status != "verified":
            continue
        pushes = pushes_of(remote, run_id)
        if len(pushes) != 1:
            found.append(f"coding: {run_id} is verified but the remote applied {len(pushes)} pushes for it")
            continue
        push = pushes[0]
        patch, outcome = str(push.get("patch", "")), dict(push.get("outcome") or {})
        granted = {str(_claims(m.capability).get("artifact")) for m in records.network.messages
                   if m.target == GIT and m.path == PUSHES_PATH and m.run_id == run_id and m.capability}
        digest = "sha256:" + hashlib.sha256(patch.encode("utf-8")).hexdigest()
        if digest not in granted:
            found.append(f"coding: {run_id}'s pushed patch hashes to {digest[:19]}, not to the granted {sorted(granted)}")
        bare = remote / "repos" / f"{push.get('repository')}.git"
        head = _git(bare, "rev-parse", "--verify", "-q", f"refs/heads/{push.get('branch')}") or ""
        commit, base = str(outcome.get("commit", "")), str(push.get("base_commit", ""))
        if head != commit:
            found.append(f"coding: {run_id}'s branch {push.get('branch')} is at {head[:12]}, not at its push {commit[:12]}")
            continue
        if _git(bare, "rev-parse", f"{commit}^") != base:
            found.append(f"coding: {run_id}'s pushed commit {commit[:12]} does not sit on the push's base {base[:12]}")
        tree = _tree_with(bare, base, patch)
        if tree is None or _git(bare, "rev-parse", f"{commit}^{{tree}}") != tree:
            found.append(f"coding: {run_id}'s pushed commit {commit[:12]} is not its base with exactly the patch")
        found += [f"coding: {run_id}: {evidence}" for evidence in untested_pushes(remote, run_id)]
    return found


CODING_ORACLES = (
    ("coding: one push per run", one_push_per_coding_run),
    ("coding: no push at a stale epoch", no_push_at_a_stale_epoch),
    ("coding: a verified run holds the approved patch", verified_run_holds_the_approved_patch),
)
