"""Streamlit dashboard for operations teams.

Shows the handoff metrics computed from the event log and compares verified
success with and without handoff against simpler strategies. It reads the
DuckDB analytics files written by the Dagster assets, read-only; plotly
figures are built by plain functions so they can be tested without Streamlit.
"""
