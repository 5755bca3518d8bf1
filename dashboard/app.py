"""The ops dashboard: handoff quality (sec. 25) and verified success with and without handoff.

It reads the DuckDB file that Dagster's `handoff_metrics` asset writes every minute
(BATON_HOME/analytics/metrics.duckdb, read-only) and the run table of Baton's store. All
computation lives in `baton.metrics`; this page only lays it out. `baton platform` starts it with
`streamlit run dashboard/app.py`.
"""

from __future__ import annotations

from collections import Counter

import streamlit as st

from baton.metrics.export import analytics_path
from baton.metrics.figures import verified_success_figure
from baton.metrics.read import metric_text, read_snapshot
from baton.store.factory import baton_home, database_url, open_store

st.set_page_config(page_title="Baton ops", layout="wide")
st.title("Baton: handoff quality")

home = baton_home()
snapshot = read_snapshot(analytics_path(home))
if snapshot is None:
    st.info(f"No metrics yet: Dagster's handoff_metrics asset writes {analytics_path(home)} every minute "
            "(schedule metrics_refresh); runs below come straight from Baton's store.")
else:
    st.caption(f"Metrics measured {snapshot.measured_at} from Baton's event log and the targets' own records "
               f"({snapshot.path}).")
    columns = st.columns(4)
    for index, row in enumerate(snapshot.metrics):
        headline, detail = metric_text(row)
        columns[index % 4].metric(row["name"], headline, help=detail)
        columns[index % 4].caption(detail)
    st.subheader("Verified success with and without handoff")
    if snapshot.success:
        st.plotly_chart(verified_success_figure(snapshot.success), width="stretch")
    else:
        st.write("No run has finished yet.")
    st.subheader("Strategies")
    st.write("The strategy experiment (safe handoff against restart, retry, waiting and coarse checkpoints) "
             "has not run on this platform: no comparison is shown until `baton experiment` writes one.")

store = open_store(database_url(), home)
try:
    runs = store.list_runs()
finally:
    store.close()
st.subheader("Runs")
counts = Counter(run.status for run in runs)
for column, status in zip(st.columns(4), ("active", "verified", "failed", "escalated"), strict=True):
    column.metric(status, counts.get(status, 0))
st.dataframe(
    [{"run": run.run_id, "kind": run.kind, "status": run.status, "placement": run.placement,
      "updated": run.updated_at.isoformat(timespec="seconds")}
     for run in sorted(runs, key=lambda r: r.updated_at, reverse=True)[:200]],
    width="stretch",
)
if st.button("Refresh"):
    st.rerun()
