"""The Dagster code location and instance configuration load."""

import shutil
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent


def test_definitions_load():
    import dagster

    from pipelines.definitions import defs

    assert isinstance(defs, dagster.Definitions)
    dagster.Definitions.validate_loadable(defs)
    defs.get_repository_def()


def test_workspace_points_at_definitions():
    workspace = yaml.safe_load((REPO_ROOT / "workspace.yaml").read_text())
    (entry,) = workspace["load_from"]
    assert entry["python_module"]["module_name"] == "pipelines.definitions"
    assert entry["python_module"]["attribute"] == "defs"


def test_instance_config_is_local_sqlite(tmp_path, monkeypatch):
    from dagster import DagsterInstance

    shutil.copy(REPO_ROOT / "dagster.yaml", tmp_path / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    with DagsterInstance.get() as instance:
        assert instance.get_ref().storage_data.class_name == "DagsterSqliteStorage"
        assert type(instance.run_storage).__name__ == "SqliteRunStorage"
        assert instance.get_settings("telemetry") == {"enabled": False}
        assert instance.get_runs() == []
    # The state lands under DAGSTER_HOME, nowhere else.
    assert (tmp_path / "history" / "runs.db").is_file()
