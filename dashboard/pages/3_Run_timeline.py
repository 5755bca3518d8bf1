"""One run's handoff timeline from Baton's event log, linked to that run's partition in the Dagster UI."""

from __future__ import annotations

import datetime as dt

import streamlit as st

from baton.metrics.figures import timeline_figure
from baton.metrics.links import dagster_partition_url
from baton.metrics.links import dagster_url
from dashboard import data, howto
from dashboard.filters import store_runs, store_sidebar

st.set_page_config(page_title="Baton: run timeline", layout="wide")
st.title("Per-run handoff timeline")

view = data.store_view()
filters = store_sidebar(view)
if not view["runs"]:
    st.info(howto.FLEET)
    st.stop()

now = dt.datetime.now(dt.UTC)
kinds = {r["run"]: r["kind"] for r in view["runs"]}
candidates = [r["run"] for r in sorted(store_runs(view, filters, now), key=lambda r: r["updated"], reverse=True)]
handed = {r["run_id"] for r in view["requests"]}
candidates.sort(key=lambda run: run not in handed)  # runs that moved first
if not candidates:
    st.info("No run matches the filters.")
    st.stop()
run_id = st.selectbox("run", candidates, key="timeline_run",
                      format_func=lambda run: f"{run} ({kinds.get(run, '?')})")
entries = data.timeline(str(run_id))
requests = [r for r in view["requests"] if r["run_id"] == run_id]
link = dagster_partition_url(dagster_url(), str(run_id))
st.markdown(f"Lineage of this run in Dagster: [{run_id} partition of `checkpoints`]({link})")
columns = st.columns(3)
columns[0].metric("events", len(entries))
columns[1].metric("handoff requests", len(requests))
columns[2].metric("committed", sum(1 for r in requests if r["outcome"] == "committed"))
st.plotly_chart(timeline_figure(entries), width="stretch", key="timeline")
st.dataframe(entries, width="stretch", hide_index=True)
