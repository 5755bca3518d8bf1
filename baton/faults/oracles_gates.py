"""Oracles for the gate's portability cases: the targets' origin and presented-capability logs against outside records.

Standard library only, like `baton.faults.oracles` (tests/faults/test_oracle_imports.py holds every
oracle module to it). The records are written by the case, never by Baton:

- the operator's inventory of its placements (`placement-inventory.json`: each placement's region,
  provider, hardware attestation and data scopes, as the operator keeps it), with the operator's
  later changes (`placement-changes.jsonl`, shared with the other placement oracles);
- the model provider's bill (`provider/bill.jsonl`: the release that served each call, as the
  provider records it while serving);
- the run owner's portability rule (`portability-rule.json`): the state is non-exportable and was
  created on a named placement (so it may only be worked on in that placement's region and
  provider), the work needs attested hardware, it needs a named data scope, or it must stay in the
  region (`same_region_as`) or with the provider (`same_provider_as`) of a named placement;
- the run owner's record of its release and the migrations off it it approved
  (`migration-approvals.json`: the release the run is pinned to, and each approval's from and to
  release and expiry).

Where an admitted mutation came from: the origin placement the target recorded (`origins.jsonl`, from the
header the process's starter had it send: the same for Baton and the controls), else the placement its
presented capability named (`presented.jsonl`).

Question:

- constraint_breach: a target admitted a mutation for the run from a placement that, by the
  operator's records at that time, lies outside the trust domain the run's non-exportable state
  was created in, has no hardware attestation although the owner required it, does not hold the
  data scope the owner required, or lies outside the region or provider the owner keeps the run to.
- foreign_release: a target admitted a mutation for the run from a placement that, by the
  operator's inventory, does not serve the release whose model output the mutation rests on (the
  provider's last call for the run before the target admitted it): the decision was made by a
  release the executing placement never ran and never re-made under the one it runs.
- unapproved_migration: the run left its pinned release without an approval of the owner's in
  force: the provider served one of its calls on another release, or a target admitted a mutation
  for it from a placement that (by the operator's inventory) does not serve the pinned release,
  while no approval of a migration from the pinned release to that release (to one that placement
  serves) had been given and not yet expired.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

INVENTORY_FILE = "placement-inventory.json"
RULE_FILE = "portability-rule.json"
APPROVALS_FILE = "migration-approvals.json"
PLACEMENT_CHANGES_FILE = "placement-changes.jsonl"
PRESENTED_FILE = "presented.jsonl"
ORIGINS_FILE = "origins.jsonl"
TARGETS = ("deploy", "corpus", "git", "webapp")

QUESTIONS: dict[str, str] = {
    "constraint_breach": "a target admitted a mutation from a placement the owner's portability rule excludes: "
                         "outside the non-exportable state's trust domain, unattested, without the data scope, or "
                         "outside the region or provider the owner keeps the run to "
                         "(target logs vs owner's rule and operator's inventory)",
    "foreign_release": "a target admitted a mutation from a placement that does not serve the release whose model "
                       "output it rests on (target logs vs provider's bill and operator's inventory)",
    "unapproved_migration": "the run was served by, or mutated from a placement serving only, another release than "
                            "its pinned one with no approval of that migration in force (provider's bill and target "
                            "logs vs owner's approvals and operator's inventory)",
}


def _lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def _when(text: object) -> dt.datetime:
    return dt.datetime.fromisoformat(str(text).replace("Z", "+00:00"))


def _facts(inventory: dict[str, Any], changes: list[dict[str, Any]], placement: str, at: dt.datetime) -> dict[str, Any]:
    """What the operator's records say of `placement` at `at`: its inventory entry and every change up to then."""
    facts = dict(inventory.get(placement) or {})
    for change in changes:
        if change.get("placement") == placement and _when(change["at"]) <= at:
            facts.update({k: v for k, v in change.items() if k not in ("placement", "at")})
    return facts


def _admitted(root: Path, run_id: str) -> list[tuple[str, dict[str, Any]]]:
    """Every target's admitted mutations for the run with the placement each came from: the origin the target
    recorded (`origins.jsonl`), else (no origin recorded for that operation) the placement its capability named."""
    admitted = []
    for target in TARGETS:
        directory = root / "home" / "targets" / target
        origins = [o for o in _lines(directory / ORIGINS_FILE) if o.get("run_id") == run_id and o.get("origin")]
        known = {str(o.get("operation_id")) for o in origins}
        lines = [{"at": o["at"], "operation_id": o.get("operation_id"), "placement": o["origin"]} for o in origins]
        lines += [line for line in _lines(directory / PRESENTED_FILE)
                  if line.get("run_id") == run_id and str(line.get("operation_id")) not in known]
        admitted += [(target, line) for line in sorted(lines, key=lambda line: _when(line["at"]))]
    return admitted


def constraint_breach(root: Path) -> list[str]:
    root = Path(root)
    rule: dict[str, Any] = _json(root / RULE_FILE) or {}
    if not rule:
        return []
    run_id = str((_json(root / "reported.json") or {}).get("run_id", ""))
    inventory: dict[str, Any] = _json(root / INVENTORY_FILE) or {}
    changes = _lines(root / PLACEMENT_CHANGES_FILE)
    origin = rule.get("non_exportable_from")
    domain = None
    if origin is not None:
        created = inventory.get(origin) or {}
        domain = (created.get("region"), created.get("provider"))
    evidence = []
    for target, line in _admitted(root, run_id):
        placement = str(line.get("placement"))
        facts = _facts(inventory, changes, placement, _when(line["at"]))
        where = (facts.get("region"), facts.get("provider"))
        said = f"{target} admitted {line.get('operation_id')} from {placement}"
        if domain is not None and where != domain:
            evidence.append(f"{said} ({where[0]}, {where[1]}); the run's state is non-exportable out of "
                            f"{origin}'s trust domain ({domain[0]}, {domain[1]})")
        if rule.get("requires_hardware_attestation") and facts.get("hardware_attested") is not True:
            evidence.append(f"{said}, which the operator lists as not hardware-attested; the owner requires "
                            "attested hardware")
        scope = rule.get("data_scope")
        if scope is not None and scope not in (facts.get("data_scopes") or []):
            evidence.append(f"{said}, which holds data scopes {facts.get('data_scopes') or []}; the owner "
                            f"requires {scope}")
        for key, fact in (("same_region_as", "region"), ("same_provider_as", "provider")):
            home = rule.get(key)
            kept = None if home is None else (inventory.get(str(home)) or {}).get(fact)
            if home is not None and facts.get(fact) != kept:
                evidence.append(f"{said} ({fact} {facts.get(fact)}); the owner keeps the run to the {fact} of "
                                f"{home} ({kept})")
    return evidence


def foreign_release(root: Path) -> list[str]:
    root = Path(root)
    inventory: dict[str, Any] = _json(root / INVENTORY_FILE) or {}
    if not inventory:
        return []
    run_id = str((_json(root / "reported.json") or {}).get("run_id", ""))
    bill = sorted((line for line in _lines(root / "provider" / "bill.jsonl") if line.get("account") == run_id),
                  key=lambda line: _when(line["at"]))
    evidence = []
    for target, line in _admitted(root, run_id):
        at = _when(line["at"])
        before = [call for call in bill if _when(call["at"]) <= at]
        served = (inventory.get(str(line.get("placement"))) or {}).get("releases")
        if not before or served is None:
            continue
        last = before[-1]
        if last.get("release_id") not in served:
            evidence.append(f"{target} admitted {line.get('operation_id')} from {line.get('placement')}, which serves "
                            f"releases {[str(r)[:19] for r in served]}; the run's last model call before it was "
                            f"{last.get('model')} ({str(last.get('release_id'))[:19]}) at {last.get('at')}")
    return evidence


def _approved(approvals: list[dict[str, Any]], pinned: str, to: set[str], at: dt.datetime) -> bool:
    """Whether an approval of a migration from `pinned` to one of `to` was in force at `at`."""
    return any(a.get("from_release_id") == pinned and a.get("to_release_id") in to and at < _when(a["expires_at"])
               for a in approvals)


def _lapsed(approvals: list[dict[str, Any]]) -> str:
    said = [f"{a.get('approval_id')} expired {a.get('expires_at')}" for a in approvals]
    return "; the owner's approvals: " + (", ".join(said) if said else "none")


def unapproved_migration(root: Path) -> list[str]:
    root = Path(root)
    record: dict[str, Any] = _json(root / APPROVALS_FILE) or {}
    pinned = record.get("pinned_release")
    if not pinned:
        return []
    approvals: list[dict[str, Any]] = list(record.get("approvals") or [])
    run_id = str((_json(root / "reported.json") or {}).get("run_id", ""))
    inventory: dict[str, Any] = _json(root / INVENTORY_FILE) or {}
    evidence = []
    for call in _lines(root / "provider" / "bill.jsonl"):
        release = str(call.get("release_id"))
        if call.get("account") == run_id and release != pinned and not _approved(approvals, pinned, {release},
                                                                                  _when(call["at"])):
            evidence.append(f"the provider served the run's call at {call.get('at')} on {call.get('model')} "
                            f"({release[:19]}), not its pinned release {str(pinned)[:19]}, with no approved "
                            f"migration in force{_lapsed(approvals)}")
    for target, line in _admitted(root, run_id):
        served = (inventory.get(str(line.get("placement"))) or {}).get("releases")
        if served is None or pinned in served:
            continue
        if not _approved(approvals, pinned, {str(r) for r in served}, _when(line["at"])):
            evidence.append(f"{target} admitted {line.get('operation_id')} at {line.get('at')} from "
                            f"{line.get('placement')}, which does not serve the run's pinned release "
                            f"{str(pinned)[:19]}, with no approved migration in force{_lapsed(approvals)}")
    return evidence


ORACLES = {"constraint_breach": constraint_breach, "foreign_release": foreign_release,
           "unapproved_migration": unapproved_migration}


def answer_gates(root: Path) -> dict[str, list[str]]:
    """Every gate-portability question for the run whose files are under `root` (question value -> evidence)."""
    return {name: oracle(Path(root)) for name, oracle in ORACLES.items()}
