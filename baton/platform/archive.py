"""Partition hygiene: how many finished runs keep their Dagster partition, read from the environment.

The discovery sensor archives the partitions of finished runs past this count
(the newest finished runs stay, active runs always stay); an archived run's
history stays whole in Baton's store (`baton inspect RUN` still opens it).
"""

from __future__ import annotations

from baton.errors import BatonError
from baton.platform.sensor_decisions import DEFAULT_KEEP_FINISHED

KEEP_FINISHED_ENV = "BATON_KEEP_FINISHED_RUNS"


class KeepFinishedError(BatonError, ValueError):
    """BATON_KEEP_FINISHED_RUNS is not a non-negative whole number."""


def keep_finished_from(text: str | None) -> int:
    """The count in `text` (unset or blank: the default); a clear error for anything else."""
    if text is None or not text.strip():
        return DEFAULT_KEEP_FINISHED
    value = text.strip()
    if not value.isdigit():
        raise KeepFinishedError(f"{KEEP_FINISHED_ENV} must be a whole number of finished runs to keep "
                                f"(0 or more), got {text!r}")
    return int(value)
