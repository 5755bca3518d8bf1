"""`baton bench gateway --backend sqlite`: a short real round on a SQLite store (figures live in docs/benchmarks.md)."""

from __future__ import annotations

from pathlib import Path

from baton.bench.gateway_bench import run_sqlite_gateway_rounds


def test_a_short_sqlite_gateway_round_commits_and_refuses_every_stale_mutation(tmp_path: Path) -> None:
    (result,) = run_sqlite_gateway_rounds([1], duration_s=0.5, repeat=1, workdir=tmp_path, warmup=2)
    assert result.kind == "gateway" and result.ops > 0
    assert result.stale_accepted == result.stale_effects == result.stale_in_store == 0
    assert any("committed operations in the store = target effects" in check for check in result.checks)
