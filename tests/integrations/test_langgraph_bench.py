"""`baton bench langgraph` measures every system it lists, on both backends, at a tiny length."""

from __future__ import annotations

import pytest

from baton.bench import langgraph_bench


def test_every_system_is_measured(postgres_server_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("BATON_BENCH_DATABASE_URL", postgres_server_url)
    results, notes = langgraph_bench.run(steps=(3,), workdir=tmp_path)
    assert not notes
    assert {r.system.key for r in results} == {s.key for s in langgraph_bench.SYSTEMS}
    for result in results:
        assert result.allocated_bytes > 3 * 2048 and result.ms_per_step > 0, result
    section = langgraph_bench.markdown(results, notes, [], "baton bench langgraph --steps 3")
    assert "BatonSaver · SQLite (observations as evidence)" in section and "**Targets**" in section
