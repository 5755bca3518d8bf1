"""The live fleet: runs by kind and status, active runs and the latest events, refreshing while it runs."""

from __future__ import annotations

import datetime as dt
from collections import Counter

import streamlit as st

from baton.metrics.figures import fleet_status_figure
from baton.models.events import CATALOG_EVENT_RUN_ID
from dashboard import data, howto
from dashboard.filters import store_runs, store_sidebar

REFRESH_S = 5
STATUSES = ("active", "verified", "failed", "escalated")

st.set_page_config(page_title="Baton: live fleet", layout="wide")
st.title("Live fleet")
filters = store_sidebar(data.store_view())
live = st.toggle("refresh every 5 s", value=True, key="fleet_live")


@st.fragment(run_every=REFRESH_S if live else None)
def fleet() -> None:
    """Re-read the store (cached until its files change) and redraw."""
    view = data.store_view()
    if not view["runs"]:
        st.info(howto.FLEET)
        return
    now = dt.datetime.now(dt.UTC)
    runs = store_runs(view, filters, now)
    counts = Counter(r["status"] for r in runs)
    for column, status in zip(st.columns(4), STATUSES, strict=True):
        column.metric(status, counts.get(status, 0))
    st.caption(f"Read {now.isoformat(timespec='seconds')} from Baton's store.")
    st.plotly_chart(fleet_status_figure(runs), width="stretch", key="fleet_status")
    st.subheader("Active runs")
    st.dataframe([r for r in runs if r["status"] == "active"], width="stretch", hide_index=True)
    st.subheader("Latest events")
    kept = {r["run"] for r in runs}
    narrowed = bool(filters.kinds or filters.reasons or filters.classes)
    st.caption("Of the store's latest 50 events, those of the runs above (and, with no kind, reason or class "
               "picked, those of no run: placement and release changes), inside the time window.")
    st.dataframe([e for e in view["recent"] if (e["run"] in kept or (e["run"] in (None, CATALOG_EVENT_RUN_ID) and not narrowed))
                  and filters.keep(e, kind=None, at="at", now=now)], width="stretch", hide_index=True)


fleet()
