"""`baton report`: figures only from runs that happened, a ledger that refuses unread sources."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import pytest

from baton.report.claims import ClaimsError, Verdict
from baton.report.generate import write_report
from baton.report.json_path import PathNotFound, select
from baton.report.ledger import LedgerError, parse_sources
from baton.report.plan import load_plan

REPO = Path(__file__).resolve().parents[2]

SOURCE = """
[[sources]]
id = "s1"
title = "A source"
identity = "example/repo README.md"
url = "https://example.org/readme"
reading_status = "full text"
access_date = 2026-12-02
bears_on = ["K1"]
shows = "what it shows"
limits = "its limits"
"""


def _json_command(document: dict[str, object]) -> str:
    return json.dumps([sys.executable, "-c", f"import json; print(json.dumps({document!r}))"])


def _evidence(folder: Path, *, command: str, artifact: str | None = None, support: str, qualify: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    experiments = f"""
[[experiments]]
id = "e1"
title = "an experiment run now"
kind = "run"
command = {command}
seed = 7
[experiments.figures]
violations = "result.violations"
control = "result.control"
"""
    if artifact:
        experiments += f"""
[[experiments]]
id = "e2"
title = "an earlier run"
kind = "artifact"
artifact = "{artifact}"
command = ["baton", "bench", "x"]
[experiments.figures]
ratio = "rows[name=a].ratio"
"""
    (folder / "experiments.toml").write_text(experiments)
    (folder / "claims.toml").write_text(f"""
[[claims]]
id = "K1"
claim = "the claim"
where = "sec. 4"
experiment = "e1"
support = [{support}]
qualify = [{qualify}]
qualification = "holds only in part"
concern = "c"
priority = "high"
response = "r"
sources = ["s1"]
""")
    (folder / "sources.toml").write_text(SOURCE)
    (folder / "context.toml").write_text('[[limits]]\nwhat = "No network."\neffect = "e"\n')
    return folder


def _spec(tmp_path: Path) -> Path:
    spec = tmp_path / "chapter.txt"
    spec.write_text("the chapter text\n")
    return spec


def test_an_experiment_that_did_not_run_prints_unrun_and_no_figure(tmp_path: Path) -> None:
    command = json.dumps(["baton", "no-such-experiment", "--json"])
    evidence = _evidence(tmp_path / "ev", command=command, support='{ figure = "violations", op = "==", value = 0 }')
    out = tmp_path / "report.md"
    findings = write_report(repo=REPO, spec=_spec(tmp_path), out=out, evidence=evidence, today=dt.date(2026, 12, 2))
    assert [f.verdict for f in findings] == [Verdict.UNRESOLVED]
    text = out.read_text()
    row = next(line for line in text.splitlines() if line.startswith("| K1 |"))
    assert "UNRUN" in row and "violations =" not in row
    assert "no change proposed until `e1` runs" in text
    assert "| K1 | the claim | unresolved | defer |" in text


def test_a_run_experiment_is_judged_on_its_own_output(tmp_path: Path) -> None:
    command = _json_command({"result": {"violations": 0, "control": 5}})
    evidence = _evidence(tmp_path / "ev", command=command,
                         support='{ figure = "violations", op = "==", value = 0 }, '
                                 '{ figure = "control", op = ">", against = "violations" }')
    out = tmp_path / "report.md"
    findings = write_report(repo=REPO, spec=_spec(tmp_path), out=out, evidence=evidence)
    assert findings[0].verdict is Verdict.SUPPORTING
    assert "violations = 0" in out.read_text() and "run while generating this report (exit 0)" in out.read_text()

    contradicted = _evidence(tmp_path / "ev2", command=_json_command({"result": {"violations": 3, "control": 5}}),
                             support='{ figure = "violations", op = "==", value = 0 }')
    assert write_report(repo=REPO, spec=_spec(tmp_path), out=out, evidence=contradicted)[0].verdict \
        is Verdict.CONTRADICTING

    qualified = _evidence(tmp_path / "ev3", command=_json_command({"result": {"violations": 0, "control": 0}}),
                          support='{ figure = "violations", op = "==", value = 0 }',
                          qualify='{ figure = "control", op = "==", value = 0 }')
    finding = write_report(repo=REPO, spec=_spec(tmp_path), out=out, evidence=qualified)[0]
    assert finding.verdict is Verdict.QUALIFYING and finding.explanation == "holds only in part"


def test_a_figure_the_run_did_not_produce_leaves_the_claim_unresolved(tmp_path: Path) -> None:
    evidence = _evidence(tmp_path / "ev", command=_json_command({"result": {"violations": 0}}),
                         support='{ figure = "control", op = ">", value = 0 }')
    finding = write_report(repo=REPO, spec=_spec(tmp_path), out=tmp_path / "r.md", evidence=evidence)[0]
    assert finding.verdict is Verdict.UNRESOLVED and "produced no figure 'control'" in finding.explanation


def test_artifacts_are_named_by_their_commit_and_refused_when_uncommitted(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "result.json").write_text(json.dumps({"rows": [{"name": "a", "ratio": 0.5}]}))
    evidence = _evidence(repo / "ev", command=_json_command({"result": {"violations": 0, "control": 1}}),
                         artifact="result.json", support='{ figure = "violations", op = "==", value = 0 }')
    from baton.report.experiments import run_experiment

    plan = load_plan(evidence)
    assert not run_experiment(plan.experiment("e2"), repo=repo).ran
    git = ["git", "-C", str(repo), "-c", "user.email=t@example.org", "-c", "user.name=t"]
    subprocess.run([*git, "add", "result.json"], check=True)
    subprocess.run([*git, "commit", "-qm", "result"], check=True)
    result = run_experiment(plan.experiment("e2"), repo=repo)
    commit = subprocess.run([*git, "log", "-1", "--format=%h"], capture_output=True, text=True).stdout.strip()
    assert result.ran and result.figure("ratio") == 0.5 and commit in result.provenance


@pytest.mark.parametrize("missing", ["access_date", "reading_status"])
def test_the_ledger_refuses_an_entry_without_access_date_or_reading_status(missing: str) -> None:
    text = "\n".join(line for line in SOURCE.splitlines() if not line.startswith(missing))
    with pytest.raises(LedgerError, match=f"has no {missing}"):
        parse_sources(text)


def test_the_ledger_refuses_an_unknown_reading_status_and_a_relative_url() -> None:
    with pytest.raises(LedgerError, match="reading_status"):
        parse_sources(SOURCE.replace('"full text"', '"skimmed"'))
    with pytest.raises(LedgerError, match="url"):
        parse_sources(SOURCE.replace("https://example.org/readme", "example.org/readme"))


def test_dangling_references_are_refused(tmp_path: Path) -> None:
    evidence = _evidence(tmp_path / "ev", command=_json_command({}), support='{ figure = "nope", op = "==", value = 0 }')
    with pytest.raises(ClaimsError, match="checks 'nope'"):
        load_plan(evidence)
    evidence = _evidence(tmp_path / "ev2", command=_json_command({}),
                         support='{ figure = "violations", op = "==", value = 0 }')
    (evidence / "claims.toml").write_text((evidence / "claims.toml").read_text().replace('["s1"]', '["ghost"]'))
    with pytest.raises(ClaimsError, match="ghost"):
        load_plan(evidence)


def test_the_shipped_plan_is_consistent() -> None:
    plan = load_plan(REPO / "docs" / "evidence")
    assert len(plan.claims) >= 9 and plan.sources and plan.limits and plan.opportunities


def test_json_path_selects_by_field_index_and_conditions() -> None:
    document = {"levels": [{"n": 1, "k": "a", "v": 10}, {"n": 8, "k": "a", "v": 80}], "x": [[1, 2]]}
    assert select(document, "levels[n=8].v") == 80
    assert select(document, "levels[n=1,k=a].v") == 10
    assert select(document, "x[0][1]") == 2
    with pytest.raises(PathNotFound, match="0 items"):
        select(document, "levels[n=3].v")


def test_the_command_refuses_a_missing_chapter_with_a_clear_error(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-c", "from baton.cli import app; app()", "report", "--spec", str(tmp_path / "absent.txt"),
         "--out", str(tmp_path / "r.md"), "--repo", str(REPO)],
        capture_output=True, text=True, check=False)
    assert completed.returncode == 2
    assert "the chapter to audit is not at" in completed.stderr
    assert not (tmp_path / "r.md").exists()
