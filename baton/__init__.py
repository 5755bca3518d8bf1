"""Baton: portable execution state and safe handoff for long-running agent runs."""

__version__ = "0.1.0"
