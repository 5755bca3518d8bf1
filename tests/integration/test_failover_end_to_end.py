"""End to end: a worker is SIGKILLed mid-run and the run resumes on another worker, under each coordinator.

`local`: the fleet process hands off the run whose lease lapsed. `dagster`: the
fleet only kills and restarts workers; Dagster's lease-expiry sensor (on a real
webserver and daemon, temporary DAGSTER_HOME) launches `handoff_job`, seen
through GraphQL. Either way the deploy target's own records show exactly one
deployment for the run. The kill-to-resume time is printed (`-s`), not asserted:
docs/benchmarks.md reports it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from baton.platform_gql import daemons_healthy, runs, tags_of
from baton.platform_procs import ProcessSet
from baton.platform_up import PlatformConfig, prepare_dagster_home, service_specs

from .failover import kill_a_deploy_worker_and_follow, start_fleet, stop_fleet
from builders.live import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_local_coordinator_hands_off_the_run_of_a_killed_worker(tmp_path: Path) -> None:
    home = tmp_path / "baton"
    home.mkdir()
    fleet = start_fleet(home, "local", {"BATON_HOME": str(home), "BATON_DATABASE_URL": ""})
    try:
        result = kill_a_deploy_worker_and_follow(home, None)
    finally:
        stop_fleet(fleet)
    print(f"\nlocal coordinator: kill -> resumed {result.kill_to_resume_s}s ({result})")
    assert result.epoch_after > result.epoch_before
    assert result.final_status == "verified"
    assert result.effects_of_run == 1 and result.deploy_effects["duplicates"] == {}


def _dagster_failover(tmp_path: Path, database_url: str | None, dagster_pg_url: str | None) -> None:
    home, dagster_home = tmp_path / "baton", tmp_path / "dagster_home"
    home.mkdir()
    from baton.platform_up import free_port

    config = PlatformConfig(baton_home=home, dagster_home=dagster_home, database_url=database_url,
                            dagster_pg_url=dagster_pg_url, web_port=free_port(), dashboard=False, fleet=None)
    prepare_dagster_home(config)
    procs = ProcessSet(log_dir=dagster_home / "logs")
    web = f"http://127.0.0.1:{config.web_port}"
    try:
        for spec in service_specs(config):
            procs.start(spec)
        procs.wait_ready(240)
        wait_for(lambda: daemons_healthy(web), timeout_s=240, what="the Dagster daemon", poll_s=1.0)
        env = {"BATON_HOME": str(home), "BATON_DATABASE_URL": database_url or "", "DAGSTER_HOME": str(dagster_home)}
        fleet = start_fleet(home, "dagster", env)
        try:
            result = kill_a_deploy_worker_and_follow(home, database_url, resume_timeout_s=180)
            launched = wait_for(
                lambda: [r for r in runs(web, job_name="handoff_job") if result.run_id in tags_of(r).values()
                         and r["status"] == "SUCCESS"],
                timeout_s=120, what="a successful handoff_job run for the killed worker's run", poll_s=1.0)
        finally:
            stop_fleet(fleet)
    finally:
        procs.stop_all()
    job = launched[0]
    print(f"\ndagster coordinator: kill -> resumed {result.kill_to_resume_s}s ({result}); handoff_job runs {len(launched)}"
          f"; kill -> handoff_job created (sensor tick) {job['creationTime'] - result.killed_at_unix:.2f}s,"
          f" created -> started {job['startTime'] - job['creationTime']:.2f}s, handoff_job ran"
          f" {job['endTime'] - job['startTime']:.2f}s, its end -> resumed {result.resumed_at_unix - job['endTime']:.2f}s")
    assert len(launched) == 1
    assert result.epoch_after > result.epoch_before
    assert result.final_status == "verified"
    assert result.effects_of_run == 1 and result.deploy_effects["duplicates"] == {}


def test_dagster_lease_sensor_hands_off_the_run_of_a_killed_worker(tmp_path: Path) -> None:
    _dagster_failover(tmp_path, None, None)


def test_dagster_failover_with_both_stores_on_postgres(tmp_path: Path, postgres_url: str,
                                                       postgres_server_url: str) -> None:
    import pg  # tests/pg.py: a second database on the same server, for Dagster's own state

    name, dagster_url = pg.create_database(postgres_server_url)
    try:
        _dagster_failover(tmp_path, postgres_url, dagster_url.replace("postgresql://", "postgresql+psycopg2://", 1))
    finally:
        pg.drop_database(postgres_server_url, name)
