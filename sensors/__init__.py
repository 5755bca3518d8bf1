"""Dagster sensors that turn identity changes into handoff and reverification runs.

They watch for a changed behavioral release, environment identity or artifact
identity and for expired leases, and request ``handoff_job`` or
``reverification_job`` with a run key derived from the identity that changed,
so one change raises exactly one run. The cursor logic lives in plain
functions that can be tested without a Dagster instance.
"""
