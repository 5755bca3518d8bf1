"""The `baton` command. Each sub-module registers its own commands on `app`."""

from __future__ import annotations

import importlib

import typer

app = typer.Typer(
    name="baton",
    help="Portable execution state and safe handoff for long-running agent runs.",
    no_args_is_help=True,
    add_completion=False,
)

# One line per command module; each module defines `register(app: typer.Typer) -> None`.
COMMAND_MODULES: tuple[str, ...] = (
    "baton.cli.schema_cmd",
    "baton.cli.demo_cmd",
    "baton.cli.checkpoint_cmd",
    "baton.cli.bench_cmd",
    "baton.cli.history_cmd",
    "baton.cli.fleet_cmd",
    "baton.cli.replay_cmd",
    "baton.cli.faults_cmd",
    "baton.cli.inspect_cmd",
    "baton.cli.catalog_cmd",
    "baton.cli.platform_cmd",
    "baton.cli.report_cmd",
    "baton.cli.sim_cmd",
    "baton.cli.recover_cmd",
    "baton.cli.experiment_cmd",
    "baton.cli.experiment_check_cmd",
)

for _name in COMMAND_MODULES:
    importlib.import_module(_name).register(app)
