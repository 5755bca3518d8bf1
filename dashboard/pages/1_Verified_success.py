"""Verified success with versus without handoff, by agent kind and migration class, with 95% intervals."""

from __future__ import annotations

import datetime as dt

import streamlit as st

from baton.metrics.experiment_outcomes import success_cells
from baton.metrics.figures import verified_success_figure
from dashboard import data, howto
from dashboard.filters import sidebar, store_runs

st.set_page_config(page_title="Baton: verified success", layout="wide")
st.title("Verified success with and without handoff")

view = data.store_view()
snapshot = data.snapshot()
result = data.experiment()
runs = data.experiment_runs() if result else []
strategies = [row["strategy"] for row in result.summary] if result else []
filters = sidebar([r["kind"] for r in view["runs"]] + [r["agent_kind"] for r in runs],
                  [r["reason"] for r in view["requests"]] + [r["reason"] for r in runs],
                  [r["migration_class"] for r in view["requests"]] + [r["migration_class"] for r in runs])
now = dt.datetime.now(dt.UTC)

st.subheader("Live fleet")
if filters.active and view["runs"]:
    kept = store_runs(view, filters, now)
    live = data.runs_snapshot([r["run"] for r in kept]).success
    st.caption(f"Recomputed now over the {len(kept)} of {len(view['runs'])} store runs that pass the filters "
               f"({filters.describe()}).")
else:
    live = snapshot.success if snapshot else []
if snapshot is None and not (filters.active and view["runs"]):
    st.info(howto.METRICS)
elif not live:
    st.info("No finished run matches. " + howto.FLEET if view["runs"] else "No run has finished yet. " + howto.FLEET)
else:
    if snapshot is not None and not filters.active:
        st.caption(f"Finished runs of Baton's store, measured {snapshot.measured_at}; bars are Wilson 95% intervals.")
    st.plotly_chart(verified_success_figure(live), width="stretch", key="live_success")
    st.dataframe(live, width="stretch", hide_index=True)

st.subheader("Simulated experiment")
if result is None:
    st.info(howto.EXPERIMENT)
else:
    strategy = st.selectbox("strategy", strategies, index=strategies.index("baton") if "baton" in strategies else 0,
                            key="success_strategy")
    kept_runs = [r for r in runs if r["strategy"] == strategy
                 and filters.keep(r, kind="agent_kind", reason="reason", migration_class="migration_class")]
    cells = success_cells(kept_runs)
    st.caption(f"`{result.meta.get('command', 'baton experiment')}` (experiment {result.meta.get('experiment_id')}): "
               f"{len(kept_runs)} runs of one strategy, those that moved at least once (by the class of their first "
               "move) against those that never moved.")
    if filters.window != "all time":
        st.caption("The time window cannot apply to this chart: simulated runs have no wall-clock time.")
    if cells:
        st.plotly_chart(verified_success_figure(cells), width="stretch", key="experiment_success")
    else:
        st.info("No simulated run of this strategy matches the filters.")
