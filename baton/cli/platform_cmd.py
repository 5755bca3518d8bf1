"""`baton platform`: Dagster (webserver and daemon), the dashboard and a live fleet, until Ctrl-C."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import typer

from baton.ablation import exit_if_ablated
from baton.chromium import CHROMIUM_PATH
from baton.models import RunKind
from baton.placements import DEFAULT_PLACEMENTS
from baton.platform_up import FleetArgs, default_config, free_port, port_free, run_platform
from baton.runtime.fleet_plan import workers_for_kind


def _port(requested: int, what: str) -> int:
    if requested == 0:
        return free_port()
    if port_free(requested):
        return requested
    chosen = free_port()
    typer.echo(f"port {requested} ({what}) is in use; using {chosen}")
    return chosen


def register(app: typer.Typer) -> None:
    @app.command("platform")
    def platform(
        web_port: int = typer.Option(3000, "--web-port", help="Dagster webserver port (0: any free port)."),
        dashboard_port: int = typer.Option(8501, "--dashboard-port", help="Dashboard port (0: any free port)."),
        baton_home: Path = typer.Option(None, "--baton-home", help="BATON_HOME (default: $BATON_HOME or ./.baton)."),
        dagster_home: Path = typer.Option(None, "--dagster-home",
                                          help="DAGSTER_HOME (default: $DAGSTER_HOME or ./.dagster_home)."),
        fleet: bool = typer.Option(True, "--fleet/--no-fleet", help="Run a live fleet with chaos."),
        dashboard: bool = typer.Option(True, "--dashboard/--no-dashboard", help="Start the Streamlit dashboard."),
        runs: int = typer.Option(40, "--runs", min=1, help="Fleet runs, launched one every --launch-interval seconds."),
        workers: int = typer.Option(3, "--workers", min=1, help="Fleet worker processes."),
        seed: int = typer.Option(1, "--seed", help="Seed of the chaos schedule."),
        coordinator: str = typer.Option("dagster", "--coordinator",
                                        help="Who reacts to lost workers and identity changes: dagster or local."),
        launch_interval: float = typer.Option(6.0, "--launch-interval", min=0.1, help="Seconds between run launches."),
        chaos_window: float = typer.Option(240.0, "--chaos-window", min=1.0, help="Seconds over which chaos fires."),
        ready_timeout: float = typer.Option(180.0, "--ready-timeout", help="Seconds to wait for the services."),
        browser: bool | None = typer.Option(
            None, "--browser/--no-browser",
            help=f"Every third fleet run a browser run (default: on when {CHROMIUM_PATH} is installed)."),
    ) -> None:
        """Start the platform, print its URLs and what to look at; Ctrl-C stops every process it started."""
        exit_if_ablated("baton platform")
        if coordinator not in ("dagster", "local"):
            raise typer.BadParameter("--coordinator is dagster or local")
        pool_workers = workers_for_kind(DEFAULT_PLACEMENTS, RunKind.BROWSER)
        missing = (f"{CHROMIUM_PATH} is missing (apt-get install chromium)" if not CHROMIUM_PATH.exists()
                   else "no placement hosts browser runs" if pool_workers is None
                   else f"it needs --workers {pool_workers} or more (a worker on a browser pool)"
                   if workers < pool_workers else None)
        if browser is None:
            browser = fleet and missing is None
            if fleet and missing is not None:
                typer.echo(f"no browser runs in the fleet: {missing}")
        elif browser and missing is not None:
            raise typer.BadParameter(f"--browser: {missing}")
        config = default_config()
        config = dataclasses.replace(
            config,
            baton_home=(baton_home or config.baton_home).resolve(),
            dagster_home=(dagster_home or config.dagster_home).resolve(),
            web_port=_port(web_port, "Dagster"),
            dashboard_port=_port(dashboard_port, "dashboard") if dashboard else dashboard_port,
            dashboard=dashboard,
            fleet=FleetArgs(runs=runs, workers=workers, seed=seed, coordinator=coordinator,
                            launch_interval_s=launch_interval, chaos_window_s=chaos_window, browser=browser)
            if fleet else None,
            ready_timeout_s=ready_timeout,
        )
        raise typer.Exit(code=run_platform(config, lambda line: typer.echo(line)))
