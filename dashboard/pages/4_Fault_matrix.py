"""The failure-injection matrix (`baton faults --json`) and the ablation table (which case catches which switch)."""

from __future__ import annotations

import streamlit as st

from baton.faults.ablations import ABLATIONS, CATCHING_CASE
from baton.metrics.fault_matrix import ablation_rows, matrix_rows
from baton.metrics.figures import fault_matrix_figure
from dashboard import data, howto

st.set_page_config(page_title="Baton: fault matrix", layout="wide")
st.title("Failure injection: Baton against two transcript-only controls")

st.caption("The sidebar's filters (agent kind, reason, migration class, time window) do not apply to this page: "
           "each case is one scripted fault run once per strategy, with no agent-kind mix, and the ablation table is "
           "a fixed list of switches.")
path, report = data.fault_matrix()
if report is None:
    st.info(howto.FAULTS)
else:
    rows = matrix_rows(report)
    st.caption(f"`baton faults --json --seed {report.get('seed')}` on {report.get('store')}, "
               f"{report.get('seconds', 0):.0f} s ({path}). Each cell lists the questions the outside oracles "
               "answered yes.")
    columns = st.columns(len(report.get("violations", {})) or 1)
    for column, (strategy, count) in zip(columns, report.get("violations", {}).items(), strict=False):
        column.metric(f"{strategy} violations", count)
    st.plotly_chart(fault_matrix_figure(rows), width="stretch", key="fault_matrix")
    st.dataframe(rows, width="stretch", hide_index=True)
    with st.expander("The oracles' questions"):
        st.table([{"question": q, "asks": text} for q, text in report["questions"].items()])

st.subheader("Ablations: each protection off in turn, and the case that catches it")
st.caption("From baton/faults/ablations.py (CATCHING_CASE, recorded from `baton faults --ablate all`); "
           "`none` is a finding: no case's oracles noticed that protection missing.")
ablations = ablation_rows(ABLATIONS, CATCHING_CASE)
caught = sum(1 for row in ablations if not row["caught by"].startswith("none"))
st.metric("ablations caught by a case", f"{caught}/{len(ablations)}")
st.dataframe(ablations, width="stretch", hide_index=True)
