"""One live case under Baton and both transcript-only controls, on SQLite and on PostgreSQL.

`killed-awaiting-reply`: the deploy service commits and holds its answer, the
worker is SIGKILLed waiting for it, the run moves. Baton reconciles the
operation against the target and ends verified with one deployment; the naive
control issues the call again under a fresh key (two deployments in the
target's own file, and a reported failure while the target holds them); the
competent control's derived key makes the target replay (one deployment), but the target's
request log shows the committed key sent again without asking first.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from baton.faults.matrix import run_matrix
from baton.faults.oracles import Question

CASE = "killed-awaiting-reply"


def test_baton_is_clean_and_the_naive_control_is_caught(tmp_path: Path) -> None:
    report = run_matrix(0, cases=[CASE], root=tmp_path)
    by_strategy = {result.strategy: result for result in report.results}
    baton, naive, competent = by_strategy["baton"], by_strategy["naive"], by_strategy["competent"]
    assert baton.error is None and baton.violated == [] and baton.status == "verified", baton
    assert {Question.DUPLICATE, Question.UNKNOWN_HIDDEN} <= set(naive.violated), naive
    assert "2 effects" in naive.answers[Question.DUPLICATE][0]
    assert competent.error is None and competent.violated == [Question.UNRECONCILED_RETRY], competent
    assert report.baton_violations == 0 and report.blind_controls == []


@pytest.mark.postgres
def test_baton_runs_the_case_on_postgres(tmp_path: Path, postgres_server_url: str) -> None:
    report = run_matrix(0, cases=[CASE], strategies=("baton",), root=tmp_path, store_url=postgres_server_url)
    (result,) = report.results
    assert report.store == "postgresql"
    assert result.error is None and result.violated == [] and result.status == "verified", result
