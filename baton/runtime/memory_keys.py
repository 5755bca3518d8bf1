"""Names of the SDK's own entries in `PortableRunState.memory` (agents use other keys)."""

from __future__ import annotations

PREFIX = "baton."
TASK = "task"
PENDING_OPERATION = "baton.pending_operation"
COMMITTED_OPERATION = "baton.committed_operation"
CANDIDATE_INPUTS = "baton.candidate_inputs"
DROPPED_OBSERVATIONS = "baton.dropped_observations"
PENDING_REVALIDATION = "baton.pending_revalidation"
RELEASE_HISTORY = "baton.release_history"
REVALIDATIONS = "baton.revalidations"
BROWSER_RESUMES = "baton.browser_resumes"


def is_reserved(key: str) -> bool:
    """True for keys the SDK manages itself."""
    return key.startswith(PREFIX) or key == TASK
