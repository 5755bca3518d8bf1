"""A browser run outlives a lost answer: page loads are loaded again, a lost save is read back before it is redone.

Each test finds, in the fault-free world of seed 0, the message a browser run sends for one step, loses it
(the request, or only its answer: the application acted) and judges by the application's own records.
"""

from __future__ import annotations

import re

import pytest

from baton.models import RunKind
from baton.sim.faults import Fault, FaultPlan
from baton.sim.oracles import effects_by_target
from baton.sim.runner import config_for
from baton.sim.world import SimRecords, run_world

BROWSER = (RunKind.BROWSER,)


def _first_message(method: str, path: str) -> int:
    seqs: list[int] = []

    def look(records: SimRecords) -> None:
        seqs.extend(m.seq for m in records.network.messages if m.method == method and re.fullmatch(path, m.path))

    run_world(config_for(0, 0, plan=FaultPlan(), kinds=BROWSER), before_check=look)
    assert seqs, f"a browser run sends {method} {path}"
    return seqs[0]


def _run_with(fault: Fault) -> tuple[dict[str, str], list[str], list[dict[str, object]]]:
    submissions: list[dict[str, object]] = []

    def look(records: SimRecords) -> None:
        submissions.extend(effects_by_target(records)["webapp"])

    outcome = run_world(config_for(0, 0, plan=FaultPlan((fault,)), kinds=BROWSER), before_check=look)
    assert fault in outcome.fired
    return outcome.statuses, outcome.violations, submissions


@pytest.mark.parametrize("kind", ["drop_request", "drop_response"])
def test_a_lost_page_save_is_read_back_then_redone_only_if_missing(kind: str) -> None:
    statuses, violations, submissions = _run_with(Fault(kind, _first_message("POST", r"/drafts/[^/]+/page/1")))
    assert statuses == {"sim0-browser-0": "verified"} and violations == []
    assert len(submissions) == 1


@pytest.mark.parametrize("kind", ["drop_request", "drop_response"])
def test_a_lost_new_draft_answer_starts_another_draft(kind: str) -> None:
    statuses, violations, submissions = _run_with(Fault(kind, _first_message("POST", r"/drafts")))
    assert statuses == {"sim0-browser-0": "verified"} and violations == []
    assert len(submissions) == 1  # an orphan draft, never submitted


@pytest.mark.parametrize("path", [r"/login", r"/drafts/[^/]+/page/2"])
def test_a_lost_page_load_is_loaded_again(path: str) -> None:
    statuses, violations, submissions = _run_with(Fault("drop_request", _first_message("GET", path)))
    assert statuses == {"sim0-browser-0": "verified"} and violations == [] and len(submissions) == 1


def test_a_lost_draft_read_is_asked_again() -> None:
    statuses, violations, submissions = _run_with(Fault("drop_request", _first_message("GET", r"/api/drafts/[^/]+")))
    assert statuses == {"sim0-browser-0": "verified"} and violations == [] and len(submissions) == 1
