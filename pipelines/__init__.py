"""Dagster wiring for Baton: the one ``Definitions`` object, jobs, schedules and resources.

``pipelines.definitions.defs`` is what ``workspace.yaml`` loads. It gathers the
assets from ``assets``, the sensors from ``sensors`` and the jobs and schedules
defined here (handoff and reverification), and binds the resources that give
them a Baton store. Like the other Dagster packages it only calls into
``baton``; ``baton`` never imports Dagster.
"""
