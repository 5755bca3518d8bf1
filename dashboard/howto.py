"""What to run when a page has nothing to show (each page says it instead of failing)."""

FLEET = ("No runs in this store yet: start a fleet with `baton fleet --runs 10 --workers 3 --chaos` "
         "(or `make demo`, which also starts Dagster and this dashboard).")
METRICS = ("No metrics yet: materialize Dagster's `handoff_metrics` asset "
           "(`dagster asset materialize -m pipelines.definitions --select handoff_metrics`); under `make demo` "
           "the `metrics_refresh` schedule does it every minute.")
HISTORY = "Only one snapshot so far: the trend appears once `handoff_metrics` has been materialized again."
EXPERIMENT = ("No strategy experiment yet: run `baton experiment --runs 2000 --seed 7 --sweep`, or materialize "
              "Dagster's `experiment_comparison` asset.")
SWEEP = "This experiment ran without a sweep: run `baton experiment --runs 2000 --seed 7 --sweep` for the crossover."
FAULTS = ("No fault matrix yet: run `baton faults --json > $BATON_HOME/analytics/fault-matrix.json` "
          "(or point BATON_FAULT_MATRIX at a saved `baton faults --json` output).")
