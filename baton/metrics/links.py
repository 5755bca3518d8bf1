"""Where the Dagster UI and the dashboard live, so each links to the other (set by `baton platform`)."""

from __future__ import annotations

import os
from urllib.parse import quote

DAGSTER_URL_ENV = "BATON_DAGSTER_URL"
DASHBOARD_URL_ENV = "BATON_DASHBOARD_URL"
DEFAULT_DAGSTER_URL = "http://127.0.0.1:3000"
DEFAULT_DASHBOARD_URL = "http://127.0.0.1:8501"
PARTITIONED_ASSET = "checkpoints"
"""The per-run asset whose partition page the timeline links to (the end of the run's lineage)."""


def dagster_url() -> str:
    return os.environ.get(DAGSTER_URL_ENV, DEFAULT_DAGSTER_URL).rstrip("/")


def dashboard_url(page: str = "") -> str:
    """The dashboard's address, or one page of it (Streamlit serves pages/N_Name.py at /Name)."""
    base = os.environ.get(DASHBOARD_URL_ENV, DEFAULT_DASHBOARD_URL).rstrip("/")
    return f"{base}/{page}" if page else base


def dagster_partition_url(base: str, run_id: str, asset: str = PARTITIONED_ASSET) -> str:
    """The Dagster UI page of this run's partition of a per-run asset."""
    if not run_id:
        raise ValueError("a run id is needed to link to its Dagster partition")
    return f"{base.rstrip('/')}/assets/{asset}?view=partitions&partition={quote(run_id, safe='')}"
