"""Handoff quality (sec. 25), defined once in SQL over the event log and computed with DuckDB.

The live fleet and the simulation load their logs through `baton.metrics.load` and read the same
definitions from `baton.metrics.definitions`.
"""
