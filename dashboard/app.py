"""The ops dashboard (placeholder): runs by status from Baton's store.

The dashboard issue fills this page with handoff metrics and strategy
comparisons; for now it shows that the platform's store is live. Streamlit runs
it with `streamlit run dashboard/app.py` (`baton platform` does).
"""

from __future__ import annotations

from collections import Counter

import streamlit as st

from baton.store.factory import baton_home, database_url, open_store

st.set_page_config(page_title="Baton", layout="wide")
st.title("Baton: runs")
st.caption("Placeholder page: the handoff metrics and strategy comparisons arrive with the dashboard issue. "
           "Analysts: per-run lineage, staleness and checks are in the Dagster UI.")

store = open_store(database_url(), baton_home())
try:
    runs = store.list_runs()
finally:
    store.close()
counts = Counter(run.status for run in runs)
columns = st.columns(4)
for column, status in zip(columns, ("active", "verified", "failed", "escalated"), strict=True):
    column.metric(status, counts.get(status, 0))
st.dataframe(
    [{"run": run.run_id, "kind": run.kind, "status": run.status, "placement": run.placement,
      "updated": run.updated_at.isoformat(timespec="seconds")}
     for run in sorted(runs, key=lambda r: r.updated_at, reverse=True)[:200]],
    width="stretch",
)
if st.button("Refresh"):
    st.rerun()
