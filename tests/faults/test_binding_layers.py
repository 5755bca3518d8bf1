"""`replanned-after-verify`: the moved run verifies the re-planned spec before it deploys anything, with every
protection on and with either of its two layers left alone (the other switched off).

The companion of `test_ablations`: there `evidence-binding` (with `gate:runtime_changed` switched off with it)
lets the passing verdict on the first spec count for the re-planned one, and the deploy service applies 1.5.0,
which the deploy verifier never judged (oracle `unverified_effect`, from the deploy service's effect log and the
verifier's own record). Here the verifier's record shows the re-planned spec judged (FAIL: its canary failed)
before the only deployment, which is of the build it passed.
"""

from __future__ import annotations

import json
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest

from baton.ablation import ablation_env
from baton.faults.cases import CASES
from baton.faults.cases_binding import BINDING_COMPANIONS, REPLANNED_VERSION
from baton.faults.matrix import run_case
from baton.faults.oracles import CaseFiles, Question, unverified_effect

CASE = "replanned-after-verify"


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


@pytest.mark.parametrize("kept", [None, *sorted(BINDING_COMPANIONS)], ids=lambda k: f"only-{k}-on" if k else "all-on")
@pytest.mark.integration
@pytest.mark.slow
def test_the_layer_left_on_makes_the_run_verify_the_replanned_spec(kept: str | None, tmp_path: Path) -> None:
    off = BINDING_COMPANIONS[kept] if kept else ()
    with ablation_env(*off) if off else nullcontext():
        result = run_case(CASES[CASE], "baton", 0, tmp_path)
    assert result.error is None and result.violated == [], (result.answers, result.notes)
    assert result.status == "verified", result.notes
    targets = tmp_path / f"{CASE}-baton" / "home" / "targets"
    deployed = _lines(targets / "deploy" / "deployments.jsonl")
    assert [d["version"] for d in deployed] == ["1.4.2"], deployed
    verdicts = [(v["version"], v["result"]) for v in _lines(targets / "verifier" / "verdicts.jsonl")]
    assert verdicts == [("1.4.2", "PASS"), (REPLANNED_VERSION, "FAIL"), ("1.4.2", "PASS")], verdicts


def test_the_companions_name_each_other() -> None:
    assert CASES[CASE].companions == {"evidence-binding": ("gate:runtime_changed",),
                                      "gate:runtime_changed": ("evidence-binding",)}
    assert Question.UNVERIFIED_EFFECT.value == "unverified_effect"


RUN = "run-x"
SPEC = {"service": "checkout", "version": "1.5.0", "artifact_hash": "sha256:" + "c" * 64, "strategy": "rolling"}


def _files(root: Path, deployments: list[dict[str, Any]], verdicts: list[dict[str, Any]] | None) -> CaseFiles:
    root.mkdir(parents=True)
    (root / "reported.json").write_text(json.dumps({"run_id": RUN, "status": "verified"}))
    targets = root / "home" / "targets"
    (targets / "deploy").mkdir(parents=True)
    (targets / "deploy" / "deployments.jsonl").write_text(
        "".join(json.dumps({"run_id": RUN, "seq": n + 1, **d}) + "\n" for n, d in enumerate(deployments)))
    if verdicts is not None:
        (targets / "verifier").mkdir()
        (targets / "verifier" / "verdicts.jsonl").write_text("".join(json.dumps(v) + "\n" for v in verdicts))
    return CaseFiles(root)


def test_the_oracle_holds_each_deployment_to_a_passing_verdict_before_it(tmp_path: Path) -> None:
    effect = {**SPEC, "at": "2026-12-03T10:00:05.000000Z"}
    passed = {**SPEC, "result": "PASS", "at": "2026-12-03T10:00:01+00:00"}
    assert unverified_effect(_files(tmp_path / "clean", [effect], [passed])) == []
    never = unverified_effect(_files(tmp_path / "never", [effect], []))
    assert len(never) == 1 and "seq 1 (1.5.0" in never[0] and "never judged it" in never[0]
    failed = unverified_effect(_files(tmp_path / "failed", [effect], [{**passed, "result": "FAIL"}]))
    assert len(failed) == 1 and "judged it only FAIL" in failed[0]
    late = unverified_effect(_files(tmp_path / "late", [effect], [{**passed, "at": "2026-12-03T10:00:09+00:00"}]))
    assert len(late) == 1  # passed only after the deployment landed
    other = unverified_effect(_files(tmp_path / "other", [effect], [{**passed, "strategy": "canary"}]))
    assert len(other) == 1  # a verdict on another spec (same build, another strategy) does not count
    assert unverified_effect(_files(tmp_path / "unjudged", [effect], None)) == []  # no verifier record: not judged
