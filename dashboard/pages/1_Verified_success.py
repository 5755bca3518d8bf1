"""Verified success with versus without handoff, by agent kind and migration class, with 95% intervals."""

from __future__ import annotations

import streamlit as st

from baton.metrics.figures import verified_success_figure
from dashboard import data, howto
from dashboard.filters import sidebar

st.set_page_config(page_title="Baton: verified success", layout="wide")
st.title("Verified success with and without handoff")

snapshot = data.snapshot()
result = data.experiment()
live = snapshot.success if snapshot else []
strategies = [row["strategy"] for row in result.summary] if result else []
filters = sidebar([c["kind"] for c in live], [], [c["migration_class"] for c in live if c["handoff"] == "with handoff"])


def _kept(cells: list[dict[str, object]]) -> list[dict[str, object]]:
    return [c for c in cells if filters.keep(c) and (c["handoff"] == "without handoff" or not filters.classes
                                                     or c["migration_class"] in filters.classes)]


st.subheader("Live fleet")
if snapshot is None:
    st.info(howto.METRICS)
elif not live:
    st.info("No run has finished yet. " + howto.FLEET)
else:
    cells = _kept(live)
    st.caption(f"Finished runs of Baton's store, measured {snapshot.measured_at}; bars are Wilson 95% intervals.")
    st.plotly_chart(verified_success_figure(cells), width="stretch", key="live_success")
    st.dataframe(cells, width="stretch", hide_index=True)

st.subheader("Simulated experiment")
if result is None:
    st.info(howto.EXPERIMENT)
else:
    strategy = st.selectbox("strategy", strategies, index=strategies.index("baton") if "baton" in strategies else 0,
                            key="success_strategy")
    cells = [c for c in data.experiment_outcomes(str(strategy)) if filters.keep(c)]
    st.caption(f"`{result.meta.get('command', 'baton experiment')}` (experiment {result.meta.get('experiment_id')}): "
               "runs of one strategy that moved at least once against runs that never moved.")
    st.plotly_chart(verified_success_figure(cells), width="stretch", key="experiment_success")
