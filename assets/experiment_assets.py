"""The latest strategy experiment (sec. 26) as a Dagster asset: a small `baton experiment` into DuckDB."""

from dagster import AssetExecutionContext, Config, MaterializeResult, MetadataValue, asset

from baton.experiment.results import experiment_path, write_experiment
from baton.experiment.run import run_experiment
from baton.metrics.links import dashboard_url
from pipelines.resources import BatonResource


class ExperimentConfig(Config):
    """A small experiment by default, so a materialization takes seconds."""

    runs: int = 500
    seed: int = 7
    sweep: bool = True


@asset(group_name="ops", description="Baton's safe handoff against eight simpler strategies on one seeded workload "
                                     "(baton experiment), written to BATON_HOME/analytics/experiment.duckdb. "
                                     "Shown on the dashboard's Strategies page.")
def experiment_comparison(context: AssetExecutionContext, config: ExperimentConfig,
                          baton: BatonResource) -> MaterializeResult:
    path = experiment_path(baton.home_path())
    command = f"baton experiment --runs {config.runs} --seed {config.seed}" + (" --sweep" if config.sweep else "")
    done = run_experiment(config.runs, config.seed, sweep=config.sweep, command=command)
    counts = write_experiment(done.result, path)
    context.log.info(f"wrote {path}: {counts}")
    return MaterializeResult(metadata={"path": MetadataValue.path(str(path)), "command": command,
                                       "dashboard": MetadataValue.url(dashboard_url("Strategies")),
                                       **{f"rows/{table}": n for table, n in counts.items()}})
