"""The simulation's check that every deployment was verified, from outside records only.

It reads the deploy service's own `deployments.jsonl` (each deployment it applied: service, version, artifact hash,
strategy) and the deploy verifier's own record of every verdict it gave (`verdicts.jsonl`, written by
`baton.agents.verifiers.check_deployment_spec` before it answers), never Baton's store. It is the live matrix's
`unverified_effect` (`baton.faults.oracles`) for the deploy service, with one difference: the verifier runs on the
worker, whose clock the simulation may skew by minutes, so a verdict's time is not compared with the service's; a
deployment is unverified when no verdict ever passed its exact spec.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from baton.sim.world import SimRecords

VERDICTS_FILE = "verifier/verdicts.jsonl"  # as baton.sim.world has the verifiers write it (the oracle keeps its own)
DEPLOYMENTS_FILE = "deploy/deployments.jsonl"
SPEC_FIELDS = ("service", "version", "artifact_hash", "strategy")
"""What a deployment is: the deploy service's request body, and what the verifier records of the spec it judged."""


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def deployed_only_verified(records: SimRecords) -> list[str]:
    """No deployment of a run was applied (the deploy service's record) whose exact spec no verdict of the deploy
    verifier ever passed (its own record)."""
    verdicts = _lines(records.root / VERDICTS_FILE)
    found = []
    for effect in _lines(records.root / DEPLOYMENTS_FILE):
        if effect.get("run_id") not in records.run_ids:
            continue
        spec = tuple(effect.get(name) for name in SPEC_FIELDS)
        judged = [v for v in verdicts if tuple(v.get(name) for name in SPEC_FIELDS) == spec]
        if any(v.get("result") == "PASS" for v in judged):
            continue
        said = ", ".join(f"{v.get('result')} ({v.get('detail')})" for v in judged) if judged else "never judged it"
        found.append(f"unverified_effect: deploy applied seq {effect.get('seq')} of {effect.get('run_id')} "
                     f"({effect.get('version')}, {str(effect.get('artifact_hash'))[:19]}..., {effect.get('strategy')}) "
                     f"at {effect.get('at')}; the deploy verifier {said}")
    return found


ORACLES = (("sec. 27 no deployment the verifier did not pass", deployed_only_verified),)
