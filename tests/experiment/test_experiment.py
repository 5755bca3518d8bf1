"""The strategy experiment: determinism, one shared schedule, the oracle, the file, and the evidence's direction."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest
from typer.testing import CliRunner

from baton.cli import app
from baton.experiment.calibration import CalibrationError, load_calibration
from baton.experiment.engine import run_strategy
from baton.experiment.oracle import EvidenceSource, TargetLedger
from baton.experiment.run import run_experiment
from baton.experiment.strategies import BY_ID, STRATEGIES
from baton.experiment.sweep import FAULT_RATES, RUN_LENGTHS, sweep_cells
from baton.experiment.workload import Parameters, generate
from baton.metrics.definitions import handoff_metrics
from baton.metrics.load import load_event_log

REPO = Path(__file__).resolve().parents[2]
STRATEGY_IDS = ["baton", "naive", "competent", "restart", "restart_last_step", "retry_same_placement",
                "wait_same_pool", "coarse_checkpoints", "human_assisted"]


@pytest.fixture(scope="module")
def show(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    """`baton experiment --runs 2000 --seed 7 --json`, run once through the CLI."""
    out = tmp_path_factory.mktemp("experiment") / "experiment.duckdb"
    result = CliRunner().invoke(app, ["experiment", "--runs", "2000", "--seed", "7", "--json", "--out", str(out)])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), out


def _stable(summary: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in row.items() if k != "experiment_id"} for row in summary]


def test_the_same_seed_gives_the_same_results() -> None:
    first, second = run_experiment(300, 11), run_experiment(300, 11)
    assert _stable(list(first.result.summary)) == _stable(list(second.result.summary))
    assert first.fingerprint == second.fingerprint
    other = run_experiment(300, 12)
    assert other.fingerprint != first.fingerprint


def test_every_strategy_replays_the_same_workload_and_fault_schedule() -> None:
    params, cal = Parameters(), load_calibration()
    w = generate(5, 200, params)
    before = w.fingerprint()
    runs = [run_strategy(s, w, params, cal, seed=5, with_metrics=False) for s in STRATEGIES]
    assert w.fingerprint() == before == generate(5, 200, params).fingerprint()
    assert [r.strategy.id for r in runs] == STRATEGY_IDS
    # Before its first recovery every strategy has done the same thing, so the first fault of the
    # schedule strikes the same runs under every strategy.
    struck = [r.faults > 0 for r in runs]
    assert struck[0].any() and all(np.array_equal(struck[0], other) for other in struck[1:])


def test_the_oracle_catches_a_broken_strategy() -> None:
    params, cal = Parameters(consequential_share=1.0, fault_rate=0.05), load_calibration()
    w = generate(3, 300, params)
    honest = run_strategy(BY_ID["baton"], w, params, cal, seed=3, with_metrics=False)
    broken = run_strategy(replace(BY_ID["baton"], id="baton_without_reconcile", protocol="naive"), w, params, cal,
                          seed=3, with_metrics=False)
    assert honest.duplicates.sum() == 0 and honest.stale.sum() == 0
    assert broken.duplicates.sum() > 0 and broken.stale.sum() > 0
    assert broken.verified.sum() < broken.reported_verified.sum()   # it reports success the oracle refuses


def test_the_target_ledger_dedupes_by_key_only() -> None:
    ledger, source = TargetLedger(), EvidenceSource()
    assert ledger.request(1, "deploy", "k1") and not ledger.request(1, "deploy", "k1")
    assert ledger.duplicates(1) == 0
    ledger.request(1, "deploy", "k2")
    assert ledger.duplicates(1) == 1 and ledger.committed(1, "k2") and not ledger.committed(2, "k2")
    source.change(4)
    assert source.stale(4, 0) and not source.stale(4, 1) and not source.stale(4, None)


def test_show_2000_runs_seed_7(show: tuple[dict[str, Any], Path]) -> None:
    data, _ = show
    rows = {row["strategy"]: row for row in data["summary"]}
    assert sorted(rows) == sorted(STRATEGY_IDS)
    assert rows["baton"]["duplicate_effects"] == 0 and rows["baton"]["stale_evidence_accepted"] == 0
    assert rows["naive"]["duplicate_effects"] > 0 and rows["naive"]["stale_evidence_accepted"] > 0
    for row in rows.values():
        assert row["runs"] == 2000
        assert row["success_low"] - 1e-9 <= row["success_rate"] <= row["success_high"] + 1e-9


def test_the_file_holds_the_contract_tables_and_the_metric_definitions(show: tuple[dict[str, Any], Path]) -> None:
    data, path = show
    names = {m.name for m in handoff_metrics(load_event_log([]))}
    assert len(names) == 12
    with duckdb.connect(str(path), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM run_outcomes").fetchone() == (2000 * 9,)
        assert con.execute("SELECT count(*) FROM sweep_cells").fetchone() == (0,)
        meta = json.loads(con.execute("SELECT parameters_json FROM experiment_meta").fetchone()[0])
        for strategy in STRATEGY_IDS:
            got = {r[0] for r in con.execute("SELECT name FROM experiment_metrics WHERE strategy = ? AND name "
                                             "NOT LIKE 'verified success%'", [strategy]).fetchall()}
            assert got == names, strategy
        baton_dups = con.execute("SELECT value FROM experiment_metrics WHERE strategy = 'baton' AND name = "
                                 "'duplicate-side-effect incidents'").fetchone()
        naive_dups = con.execute("SELECT value FROM experiment_metrics WHERE strategy = 'naive' AND name = "
                                 "'duplicate-side-effect incidents'").fetchone()
    assert baton_dups == (0.0,) and naive_dups is not None and naive_dups[0] > 0
    assert meta["calibration"]["sources"]["benchmarks-checkpoint.json"]["commit"]


def _matrix_counts() -> dict[str, dict[str, int]]:
    """Violations per strategy in the committed SQLite fault matrix, the one that runs all three strategies."""
    text = (REPO / "docs" / "fault-matrix.md").read_text(encoding="utf-8")
    section = text.split("\n## Matrix on sqlite", 1)[1].split("\n## ", 1)[0]
    first = section.split("\nViolations:", 1)[1]
    counts = {s: {"duplicate": 0, "stale_evidence": 0} for s in ("baton", "naive", "competent")}
    for strategy, kind in re.findall(r"^- [\w-]+ / (\w+) / (\w+):", first, flags=re.M):
        if kind in counts[strategy]:
            counts[strategy][kind] += 1
    return counts


def test_the_experiment_and_the_fault_matrix_agree_on_direction(show: tuple[dict[str, Any], Path]) -> None:
    data, _ = show
    rows = {row["strategy"]: row for row in data["summary"]}
    matrix = _matrix_counts()
    measure = {"duplicate": "duplicate_effects", "stale_evidence": "stale_evidence_accepted"}
    assert matrix["naive"]["duplicate"] > 0 and matrix["competent"]["stale_evidence"] > 0
    for kind, column in measure.items():
        for low, high in (("baton", "competent"), ("competent", "naive"), ("baton", "naive")):
            live = np.sign(matrix[high][kind] - matrix[low][kind])
            simulated = np.sign(rows[high][column] - rows[low][column])
            assert live == simulated, (kind, low, high, matrix, rows[low][column], rows[high][column])


def test_the_sweep_names_one_winner_per_cell() -> None:
    rows = sweep_cells("t", 1, 60, Parameters(), load_calibration())
    assert len(rows) == len(RUN_LENGTHS) * len(FAULT_RATES) * len(STRATEGIES)
    for length in RUN_LENGTHS:
        for rate in FAULT_RATES:
            cell = [r for r in rows if r["run_length"] == length and r["fault_rate"] == rate]
            assert sum(r["winner"] for r in cell) == 1
            winner = next(r for r in cell if r["winner"])
            assert winner["duplicate_effects"] == 0


def test_bad_input_gets_a_specific_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["experiment", "--runs", "0", "--out", str(tmp_path / "x.duckdb")])
    assert result.exit_code == 2 and "at least 1" in result.output
    with pytest.raises(ValueError, match="fault_rate"):
        generate(1, 10, Parameters(fault_rate=1.5))
    with pytest.raises(CalibrationError, match="benchmarks-checkpoint.json is missing"):
        load_calibration(tmp_path)


def test_calibration_reads_a_repeated_checkpoint_run_from_its_chosen_legs(tmp_path: Path) -> None:
    """`bench checkpoint --repeat 3` keeps all three repetitions of a leg; only the chosen one has step times."""
    from baton.experiment.calibration import CHECKPOINT_FILE, GATEWAY_FILE, HANDOFF_FILE

    docs = Path(__file__).resolve().parents[2] / "docs"
    for name in (HANDOFF_FILE, GATEWAY_FILE):
        (tmp_path / name).write_text((docs / name).read_text())
    checkpoint = json.loads((docs / CHECKPOINT_FILE).read_text())
    sdk = [leg for leg in checkpoint["legs"] if leg["system"] == "baton-sdk-sqlite"]
    repeated = []
    for leg in sdk:
        others = [{k: v for k, v in leg.items() if k != "step_ms"} | {"repetition": r, "chosen": False} for r in (1, 2)]
        repeated += [others[0], leg, others[1]]  # the chosen leg is neither first nor last
    checkpoint["legs"] = repeated
    (tmp_path / CHECKPOINT_FILE).write_text(json.dumps(checkpoint))
    calibrated = load_calibration(tmp_path)
    longest = max(sdk, key=lambda leg: leg["steps"])
    assert list(calibrated.seal_ms) == [float(ms) for ms in longest["step_ms"]]
