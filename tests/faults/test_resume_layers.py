"""Each gate reason that only shapes the resume, and the resume's own check behind it, holds alone.

The companion of `test_ablations`: there each of the pair, switched off with the other as companion
(`FaultCase.companions`, baton/faults/cases_resume.py), lets the fault through to an outside oracle
(`stale_evidence` in `corpus-changed`, `unknown_hidden` in `killed-awaiting-reply`). Here the layer
left on holds, judged from the targets' own records. One live run per assertion.

The third pair, `gate:checkpoint_not_resumable` and `resume-terminal-guard`, is caught by nothing: with
both off the moved terminal run is resumed, and every agent's loop (and the executor after it) stops at
the terminal boundary at once. The last test records that run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from baton.ablation import ablation_env
from baton.faults.cases import CASES, CHANGED_TEXT, FaultCase
from baton.faults.cases_resume import (
    ENVIRONMENT_COMPANIONS, OPEN_OPERATION_COMPANIONS, TERMINAL_COMPANIONS, terminal_checkpoint_moved,
)
from baton.faults.matrix import isolated_companions, run_case
from baton.faults.oracles import CaseFiles


def _run(case: FaultCase, off: tuple[str, ...], root: Path) -> CaseFiles:
    with ablation_env(*off):
        result = run_case(case, "baton", 0, root)
    assert result.error is None and result.violated == [], (result.answers, result.notes)
    assert "handoff to cloud-eu: committed" in result.notes, result.notes
    return CaseFiles(root / f"{case.case_id}-baton")


def test_each_layer_ablated_switches_its_partner_off_and_nothing_else() -> None:
    for case_id, pairs in (("corpus-changed", ENVIRONMENT_COMPANIONS), ("killed-awaiting-reply", OPEN_OPERATION_COMPANIONS),
                           ("ended-run-moved-to-unfit", TERMINAL_COMPANIONS)):
        for name, partner in pairs.items():
            assert isolated_companions(CASES[case_id], (name,)) == partner
    assert isolated_companions(CASES["killed-awaiting-reply"], ("idempotency",)) == ("reconcile-before-retry",)


@pytest.mark.parametrize("kept", sorted(ENVIRONMENT_COMPANIONS))
def test_either_environment_layer_alone_revalidates_the_moved_report(kept: str, tmp_path: Path) -> None:
    """The report published after the move quotes the rewritten document (the corpus's own history and log)."""
    files = _run(CASES["corpus-changed"], ENVIRONMENT_COMPANIONS[kept], tmp_path)
    [publication] = files.effects["corpus"]
    assert CHANGED_TEXT.split(". ", 1)[0][1:] in str(publication["report"])


@pytest.mark.parametrize("kept", sorted(OPEN_OPERATION_COMPANIONS))
def test_either_open_operation_layer_alone_settles_the_deployment(kept: str, tmp_path: Path) -> None:
    """The committed deployment is settled before the agent runs: verified, one effect (the deploy service's file)."""
    files = _run(CASES["killed-awaiting-reply"], OPEN_OPERATION_COMPANIONS[kept], tmp_path)
    assert files.reported.get("status") == "verified"
    assert len(files.effects["deploy"]) == 1


@pytest.mark.parametrize("kept", sorted(TERMINAL_COMPANIONS))
def test_either_terminal_layer_alone_records_the_end_of_the_moved_run(kept: str, tmp_path: Path) -> None:
    """The ended run is reported verified, with its one deployment (the deploy service's file), whichever layer
    stands: the gate keeps it where it is, or the adopting worker records its end before weighing the placement."""
    case = CASES["ended-run-moved-to-unfit"]
    with ablation_env(*TERMINAL_COMPANIONS[kept]):
        result = run_case(case, "baton", 0, tmp_path)
    assert result.error is None and result.violated == [], (result.answers, result.notes)
    moved = "handoff to cloud-eu: committed" in result.notes
    assert moved == (kept == "resume-terminal-guard"), result.notes  # the gate, standing, refuses the move
    files = CaseFiles(tmp_path / f"{case.case_id}-baton")
    assert files.reported.get("status") == "verified"
    assert len(files.effects["deploy"]) == 1


TERMINAL_MOVED = FaultCase("terminal-checkpoint-moved", "an ended run, its worker held before recording the end, "
                           "is moved", "deploy", terminal_checkpoint_moved)


def test_a_moved_terminal_run_does_nothing_even_with_both_terminal_layers_off(tmp_path: Path) -> None:
    """Onto a placement that can still host it, the moved ended run does nothing more: the new owner's agent loop ends
    at the terminal boundary at once (`ended-run-moved-to-unfit` is the move onto one that cannot, where it never
    reports its end)."""
    files = _run(TERMINAL_MOVED, ("gate:checkpoint_not_resumable", "resume-terminal-guard"), tmp_path)
    assert files.reported.get("status") == "verified"
    assert [r["result"] for r in files.requests["deploy"] if r["result"] != "fence_advanced"] == ["applied"]
    assert max(int(r["epoch"]) for r in files.requests["deploy"]) > 2  # moved: the new owner's epochs were fenced
