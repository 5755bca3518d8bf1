"""`baton bench dagster`: the --ticks-only passthrough, the --storage choice and the PostgreSQL instance config.

Nothing here asserts a time. The passthrough test runs the real command at a
tiny size: the Dagster half must have skipped the catch-up, GraphQL and the
daemon, and still measured every tick and the archive step.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from baton.bench.dagster_bench import JSON_NAME, PROJECT_ROOT, Options, postgres_dagster_yaml, psycopg2_url
from baton.cli import app


@pytest.mark.integration
def test_ticks_only_is_passed_through_to_the_dagster_half(tmp_path: Path) -> None:
    out = tmp_path / "docs"
    outcome = CliRunner().invoke(app, ["bench", "dagster", "--runs", "12", "--samples", "1", "--keep-finished", "2",
                                       "--ticks-only", "--out", str(out), "--workdir", str(tmp_path), "--json"])
    assert outcome.exit_code == 0, outcome.output
    document = json.loads((out / JSON_NAME).read_text())
    (result,) = document["results"]
    assert "--ticks-only" in result["command"] and document["options"]["ticks_only"] is True
    assert result["ticks_only"] is True and result["storage"] == "sqlite" == result["dagster_storage"]
    assert result["catch_up"]["skipped"].startswith("fast-forward") and result["catch_up"]["partitions"] == 12
    assert "graphql" not in result and "daemon_ticks" not in result and "reverification_job" not in result
    assert all(t["idle"]["n"] == t["change"]["n"] == 1 for t in result["ticks"].values())
    assert result["archive"]["partitions_before"] == 13  # one run seeded by the change round
    markdown = (out / "benchmarks.md").read_text()
    assert "--ticks-only" in markdown and "@12 sqlite" in markdown


@pytest.mark.parametrize("args, message", [
    (["--storage", "mysql"], "--storage takes"),
    (["--storage", "sqlite,sqlite"], "each once"),
    (["--daemon-ticks", "-1"], "--daemon-ticks"),
    (["--catch-up-budget", "0"], "--catch-up-budget must be positive"),
    (["--seeded-home", "/nonexistent/home"], "holds no baton.db"),
    (["--runs", "10,20", "--seeded-home", "."], "holds no baton.db"),
])
def test_bad_storage_and_daemon_options_are_refused_clearly(args: list[str], message: str) -> None:
    outcome = CliRunner().invoke(app, ["bench", "dagster", *args])
    assert outcome.exit_code != 0
    assert message in outcome.output


def test_options_refuse_an_empty_storage_list() -> None:
    with pytest.raises(ValueError, match="--storage takes"):
        Options(storages=())


def test_postgres_config_is_the_block_dagster_yaml_documents() -> None:
    documented = (PROJECT_ROOT / "dagster.yaml").read_text()
    config = yaml.safe_load(postgres_dagster_yaml(documented))
    assert config["storage"] == {"postgres": {"postgres_url": {"env": "DAGSTER_PG_URL"}}}
    rest = yaml.safe_load(documented)
    del rest["storage"]
    assert {k: v for k, v in config.items() if k != "storage"} == rest  # everything else as the file has it


def test_a_dagster_yaml_without_the_documented_block_is_refused() -> None:
    from baton.bench.dagster_bench import DagsterBenchError

    with pytest.raises(DagsterBenchError, match="BEGIN postgres storage"):
        postgres_dagster_yaml("storage:\n  sqlite:\n    base_dir: x\n")


@pytest.mark.parametrize("url", ["postgresql://u:p@127.0.0.1:5432/db", "postgres://u:p@127.0.0.1:5432/db",
                                 "postgresql+psycopg://u:p@127.0.0.1:5432/db"])
def test_the_dagster_url_uses_the_psycopg2_scheme(url: str) -> None:
    assert psycopg2_url(url) == "postgresql+psycopg2://u:p@127.0.0.1:5432/db"


def test_a_seeded_home_goes_with_one_size(tmp_path: Path) -> None:
    (tmp_path / "baton.db").write_bytes(b"")
    with pytest.raises(ValueError, match="exactly one --runs size"):
        Options(sizes=(10, 20), seeded_home=tmp_path)


@pytest.mark.integration
def test_slow_queries_are_passed_through_and_time_every_partitions_stale_status(tmp_path: Path) -> None:
    out = tmp_path / "docs"
    outcome = CliRunner().invoke(app, ["bench", "dagster", "--runs", "12", "--samples", "1", "--keep-finished", "2",
                                       "--daemon-ticks", "0", "--slow-queries", "--out", str(out),
                                       "--workdir", str(tmp_path), "--json"])
    assert outcome.exit_code == 0, outcome.output
    document = json.loads((out / JSON_NAME).read_text())
    (result,) = document["results"]
    assert "--slow-queries" in result["command"] and document["options"]["slow_queries"] is True
    assert "stale_status_all_partitions" in result["graphql"]
