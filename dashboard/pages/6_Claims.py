"""The evidence report's claim audit: each claim of the chapter, its experiment and what it measured."""

from __future__ import annotations

import json
import os
from pathlib import Path

import streamlit as st

REPORT = Path(os.environ.get("BATON_EVIDENCE_REPORT",
                             Path(__file__).resolve().parents[2] / "docs" / "evidence-report.json"))

st.set_page_config(page_title="Baton claims", layout="wide")
st.title("The chapter's claims, tested")
st.caption("The sidebar's filters do not apply to this page: each claim is one experiment's finding, "
           "not a set of runs to select.")
if not REPORT.is_file():
    st.info("No evidence report yet: run `baton report` (it writes docs/evidence-report.md and .json).")
else:
    report = json.loads(REPORT.read_text(encoding="utf-8"))
    st.caption(f"Generated {report['generated_on']} at commit {report['commit'][:12]}; chapter sha256 "
               f"{report['spec_sha256'][:16]}. Full text: docs/evidence-report.md.")
    verdicts = [claim["verdict"] for claim in report["claims"]]
    for column, verdict in zip(st.columns(4), ("supporting", "qualifying", "contradicting", "unresolved"),
                               strict=True):
        column.metric(verdict, verdicts.count(verdict))
    st.dataframe(
        [{"claim": c["id"], "text": c["claim"], "where": c["where"], "finding": c["verdict"],
          "measured": "; ".join(c["measured"]) or "UNRUN", "experiment": c["command"],
          "seed": c["seed"], "evidence": c["provenance"], "priority": c["priority"]} for c in report["claims"]],
        width="stretch", hide_index=True,
    )
