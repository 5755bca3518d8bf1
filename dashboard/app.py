"""The ops dashboard, first page: the twelve handoff metrics of sec. 25 and their trend.

It reads the DuckDB file Dagster's `handoff_metrics` asset writes every minute
(BATON_HOME/analytics/metrics.duckdb, read-only; each export carries the previous snapshots forward)
and Baton's store. All computation lives in `baton.metrics`; the pages only lay it out. `baton
platform` starts it with `streamlit run dashboard/app.py`; the other pages are in dashboard/pages/.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter

import streamlit as st

from baton.metrics.figures import metric_trend_figure
from baton.metrics.read import metric_text
from baton.metrics.links import dagster_url
from dashboard import data, howto
from dashboard.filters import store_runs, store_sidebar

st.set_page_config(page_title="Baton ops", layout="wide")
st.title("Baton: handoff quality")

view = data.store_view()
filters = store_sidebar(view)
now = dt.datetime.now(dt.UTC)
snapshot = data.snapshot()
if filters.active and view["runs"]:
    # The export covers the whole log; with a filter on, the same definitions run now over the runs that pass.
    kept = store_runs(view, filters, now)
    snapshot = data.runs_snapshot([r["run"] for r in kept])
    st.caption(f"Recomputed now over the {len(kept)} of {len(view['runs'])} runs that pass the filters "
               f"({filters.describe()}): a run passes on its agent kind, its last update inside the time window and, "
               "with a reason or migration class picked, a handoff request with that reason and class.")
if snapshot is None:
    st.info(howto.METRICS)
else:
    if not filters.active:
        st.caption(f"Metrics measured {snapshot.measured_at} from Baton's event log and the targets' own records "
                   f"({snapshot.path}). Dagster asset: [handoff_metrics]({dagster_url()}/assets/handoff_metrics).")
    columns = st.columns(4)
    for index, row in enumerate(snapshot.metrics):
        headline, detail = metric_text(row)
        columns[index % 4].metric(row["name"], headline, help=detail)
        columns[index % 4].caption(detail)

    st.subheader("Trend")
    history = [row for row in data.history() if filters.keep(row, kind=None, at="measured_at", now=now)]
    names = list(dict.fromkeys(row["name"] for row in snapshot.metrics))
    if filters.kinds or filters.reasons or filters.classes:
        st.caption("The trend is the series of Dagster's exports, each over the whole log: agent kind, reason and "
                   "migration class cannot apply to it (an export keeps no per-run figures); the time window does.")
    if len({row["measured_at"] for row in history}) < 2:
        st.info(howto.HISTORY)
    else:
        rates = [name for name in names if any(r["name"] == name and r["kind"] == "rate" for r in snapshot.metrics)]
        chosen = st.multiselect("metrics", names, default=rates[:4], key="trend_metrics")
        st.plotly_chart(metric_trend_figure(history, chosen), width="stretch", key="trend")

st.subheader("Handoffs in the store")
if not view["runs"]:
    st.info(howto.FLEET)
else:
    requests = [r for r in view["requests"]
                if filters.keep(r, reason="reason", migration_class="migration_class", at="requested_at", now=now)]
    outcomes = Counter(r["outcome"] for r in requests)
    for column, outcome in zip(st.columns(4), ("requested", "committed", "rolled back", "pending"), strict=True):
        column.metric(f"handoffs {outcome}", len(requests) if outcome == "requested" else outcomes.get(outcome, 0))
    st.caption("Handoff requests matching the filters (the time window on when each was requested).")
    st.dataframe(requests, width="stretch", hide_index=True)
