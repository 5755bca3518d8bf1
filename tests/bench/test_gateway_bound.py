"""`baton bench gateway-bound` at tiny size, on PostgreSQL: the replay redoes the gateway's work, the command runs.

No time is asserted. The bound means something only if the replayed
statements do what the gateway's did: every replayed operation must end
COMMITTED in the second database, and a replay missing statements is refused.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from baton.bench.gateway_bench import lease_bench_run
from baton.bench.gateway_bound import OWNER, RUN_ID, _recording, measure_gateway_bound, part_rows, ratio_rows, replay
from baton.bench.pg import fresh_database
from baton.cli import app


def test_tiny_bound_has_every_leg(tmp_path: Path, postgres_server_url: str) -> None:
    bound = measure_gateway_bound(postgres_server_url, 5, tmp_path, repeat=1)
    assert bound.statements_per_op == 2  # the claim and the outcome, one statement each
    for part in ("floor", "gateway", "statements", "signatures"):
        assert bound.median(part).wall_ms > 0
    assert len(part_rows(bound)[1]) == 5 and len(ratio_rows(bound)[1]) == 2


def test_a_replay_that_skips_the_outcomes_is_refused(tmp_path: Path, postgres_server_url: str) -> None:
    from baton.bench.gateway_bench import bench_authority, mutation, open_gateway

    recorded: list[tuple[str, tuple[object, ...]]] = []
    with fresh_database(postgres_server_url, prefix="gwbound_t") as db, bench_authority(db.url, tmp_path) as access:
        epoch = lease_bench_run(db.url, RUN_ID, OWNER)
        store, gateway, _, _, issue = open_gateway(db.url, RUN_ID, OWNER, access(OWNER, RUN_ID))
        try:
            with _recording(recorded):
                for n in range(3):
                    gateway.submit(mutation(RUN_ID, epoch, issue(f"k{n}"), f"k{n}", n, OWNER))
        finally:
            store.close()
    assert len(recorded) == 6
    claims_only = recorded[0::2]
    with fresh_database(postgres_server_url, prefix="gwreplay_t") as target:
        assert lease_bench_run(target.url, RUN_ID, OWNER) == epoch
        with pytest.raises(RuntimeError, match="did not redo the work"):
            replay(target.url, claims_only, 3, [])
    with fresh_database(postgres_server_url, prefix="gwreplay_t") as target:
        lease_bench_run(target.url, RUN_ID, OWNER)
        costs: list[object] = []
        replay(target.url, recorded, 3, costs)  # type: ignore[arg-type]
        assert len(costs) == 1


def test_the_command_writes_its_section_and_json(tmp_path: Path, postgres_server_url: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BATON_BENCH_DATABASE_URL", postgres_server_url)
    result = CliRunner().invoke(app, ["bench", "gateway-bound", "--ops", "3", "--repeat", "1", "--json",
                                      "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["statements_per_op"] == 2
    assert all(document[leg]["wall_ms"] > 0 for leg in ("floor", "statements", "signatures", "gateway"))
    text = (tmp_path / "benchmarks.md").read_text()
    assert "<!-- bench:gateway-bound:start -->" in text and "bound: statements + signatures" in text


def test_the_gateway_bound_is_skipped_not_failed_without_a_server(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import baton.bench.pg as pg
    from baton.bench import run_bounds

    for var in pg.ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(pg, "SCRIPT", tmp_path / "missing.sh")
    document = run_bounds.gateway(ops=1, repeat=1, out=tmp_path)
    assert "skipped" in document and not (tmp_path / "benchmarks.md").exists()
