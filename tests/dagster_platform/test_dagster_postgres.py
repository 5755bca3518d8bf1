"""The PostgreSQL storage block documented in dagster.yaml works against a real server."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from dagster import AssetKey, AssetObservation, DagsterInstance

from pipelines.bench_asset_writes import postgres_config



def documented_postgres_config() -> str:
    """dagster.yaml with its storage block swapped for the commented PostgreSQL one."""
    return postgres_config()


def test_documented_postgres_storage_writes_and_reads_events(tmp_path: Path, postgres_url: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "dagster.yaml").write_text(documented_postgres_config())
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    monkeypatch.setenv("DAGSTER_PG_URL", re.sub(r"^postgres(ql)?://", "postgresql+psycopg2://", postgres_url))
    with DagsterInstance.get() as instance:
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        instance.report_runless_asset_event(AssetObservation(
            asset_key=AssetKey("observations"), tags={"dagster/data_version": "sha256:" + "a" * 64}))
        record = instance.get_latest_data_version_record(AssetKey("observations"), is_source=True)
        assert record is not None
    assert not (tmp_path / "history").exists()  # nothing fell back to SQLite
