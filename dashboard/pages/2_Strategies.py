"""The strategy comparison (sec. 26): success against cost, duplicate effects and stale evidence, the sweep."""

from __future__ import annotations

import json

import streamlit as st

from baton.experiment.strategies import ORDER
from baton.metrics.experiment_outcomes import filtered_sweep, simpler_wins, strategy_figures
from baton.metrics.figures import crossover_figure, safety_figure, success_cost_figure, winner_map_figure
from dashboard import data, howto
from dashboard.filters import sidebar

st.set_page_config(page_title="Baton: strategies", layout="wide")
st.title("Safe handoff against simpler strategies")

result = data.experiment()
if result is None:
    st.info(howto.EXPERIMENT)
    st.stop()

meta = result.meta
st.caption(f"`{meta.get('command')}`: seed {meta.get('seed')}, {meta.get('runs')} runs per strategy, "
           f"{meta.get('seconds', 0):.1f} s, commit {str(meta.get('git_commit') or '')[:12]} ({result.path}).")
summary = result.summary
if not summary:
    st.info("The experiment file holds no strategy rows. " + howto.EXPERIMENT)
    st.stop()
runs = data.experiment_runs()
groups = data.experiment_sweep_groups()
everything = runs + (groups or [])
filters = sidebar([r["agent_kind"] for r in everything], [r["reason"] for r in everything],
                  [r["migration_class"] for r in everything])
if filters.window != "all time":
    st.caption("The time window cannot apply to this page: the experiment's runs are simulated and have no "
               "wall-clock time. Agent kind, reason and migration class apply to every chart and table on it "
               "(to the sweep's only in a file that keeps its runs' kind, reason and class).")
if filters.kinds or filters.reasons or filters.classes:
    summary = strategy_figures(
        [r for r in runs if filters.keep(r, kind="agent_kind", reason="reason", migration_class="migration_class")],
        summary)
    st.caption(f"Recomputed over the runs that pass the filters ({sum(row['runs'] for row in summary)} runs "
               "across strategies); a run's reason is the first fault it recovered from, its migration class that "
               "of its first move (\"none\": it never moved; \"unknown\": a file written before runs carried it).")
    unknown = [row["strategy"] for row in summary if row["interventions"] is None]
    if unknown:
        st.caption(f"Interventions unknown for {', '.join(unknown)}: the file was written before runs carried them "
                   "and the stored totals do not confirm rebuilding them from each run's faults; re-run `baton "
                   "experiment` to filter them.")
left, right = st.columns(2)
left.subheader("Success against cost")
left.plotly_chart(success_cost_figure(summary), width="stretch", key="success_cost")
right.subheader("Duplicate effects and stale evidence")
right.plotly_chart(safety_figure(summary), width="stretch", key="safety")
st.dataframe(summary, width="stretch", hide_index=True)

st.subheader("Where each strategy wins: the sweep over run length and fault rate")
sweep = result.sweep
if not sweep:
    st.info(howto.SWEEP)
    st.stop()
if (filters.kinds or filters.reasons or filters.classes) and groups is None:
    st.caption(f"The filters ({filters.describe()}) cannot apply to the crossover plot, the winner map or the "
               "sentence under them: this file's sweep was written before it kept each run's agent kind, reason and "
               "migration class (unknown here; only per-cell totals exist). They show every run of each cell; "
               "re-run `baton experiment --sweep` to filter them.")
elif filters.kinds or filters.reasons or filters.classes:
    kept = [g for g in groups if filters.keep(g, kind="agent_kind", reason="reason", migration_class="migration_class")]
    sweep = filtered_sweep(kept, sweep, ORDER)
    st.caption(f"The crossover plot, the winner map and the sentence under them are recomputed over the sweep's "
               f"runs that pass the filters ({sum(g['runs'] for g in kept)} of {sum(g['runs'] for g in groups)} "
               "runs across cells and strategies); each cell's winner is picked again among them by the same rule.")
strategies = list(dict.fromkeys(c["strategy"] for c in sweep))
lengths = sorted({c["run_length"] for c in sweep})
length = st.selectbox("run length (steps)", lengths, index=len(lengths) - 1, key="sweep_length")
picked = st.multiselect("strategies", strategies, default=strategies, key="sweep_strategies")
left, right = st.columns(2)
left.plotly_chart(crossover_figure(sweep, picked, int(length)), width="stretch", key="crossover")
right.plotly_chart(winner_map_figure(sweep), width="stretch", key="winners")
others = simpler_wins(sweep)
cells = {(c["run_length"], c["fault_rate"]) for c in sweep}
if others:
    st.markdown(f"A simpler strategy wins {len(others)} of {len(cells)} cells: " + "; ".join(
        f"{c['strategy']} at length {c['run_length']}, fault rate {c['fault_rate']:g}"
        + (f" ({c['cheaper_by']:.1%} cheaper per verified run than baton)" if c["cheaper_by"] is not None else "")
        for c in others) + ". Winner: " + str(json.loads(meta.get("parameters_json") or "{}")
                                               .get("sweep", {}).get("winner", "as the experiment defines it")) + ".")
else:
    baton = sum(1 for c in sweep if c["winner"] and c["strategy"] == "baton")
    st.markdown(f"Baton's safe handoff wins all {len(cells)} cells of this sweep." if baton == len(cells) else
                f"Baton's safe handoff wins {baton} of {len(cells)} cells of this sweep.")
unwon = len(cells) - sum(1 for c in sweep if c["winner"])
if unwon:
    st.markdown(f"No strategy wins {unwon} of {len(cells)} cells: none has a verified run there without a duplicate "
                "effect or stale evidence.")
