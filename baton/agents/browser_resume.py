"""Which sec. 13 resume class holds for a browser run, from its checkpoint and the server's draft.

A plain function of three facts, none of them the old DOM:

- what the checkpoint holds as confirmed (`ConfirmedDraft`: draft id, version,
  snapshot hash, the durable URL of the next step), or nothing yet;
- what the application says now (`ServerDraft`: its version history with the
  writer of each version, and its submission if any), or that the draft is gone;
- whether this worker still holds a live session for the run (it never comes
  from the checkpoint: sessions and CSRF tokens are not portable state).

The rules, first match wins:

| server says                                              | class                       |
|----------------------------------------------------------|-----------------------------|
| the confirmed draft is gone                              | NOT_RESUMABLE               |
| the draft was submitted (before this run committed)      | NOT_RESUMABLE               |
| the confirmed version is missing or has another hash     | NOT_RESUMABLE               |
| a later version was written by anyone but this run       | NOT_RESUMABLE               |
| later versions, all written by this run (older epochs)   | RESTART_FROM_SERVER_STATE   |
| exactly the confirmed version, and a live session here   | REOPEN_DURABLE_URL          |
| exactly the confirmed version, no live session here      | RECONSTRUCT_SESSION         |
| nothing confirmed yet                                    | REOPEN / RECONSTRUCT (same) |
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from baton.resumability import BrowserResumeClass


@dataclass(frozen=True)
class ConfirmedDraft:
    """The server-side state a checkpoint holds as confirmed (read back from the server, never assumed)."""

    draft_id: str
    version: int
    hash: str
    next_page: int

    def as_memory(self) -> dict[str, Any]:
        return {"draft_id": self.draft_id, "version": self.version, "hash": self.hash, "next_page": self.next_page}

    @classmethod
    def from_memory(cls, value: Any) -> ConfirmedDraft | None:
        if not isinstance(value, Mapping):
            return None
        return cls(str(value["draft_id"]), int(value["version"]), str(value["hash"]), int(value["next_page"]))


@dataclass(frozen=True)
class DraftVersion:
    version: int
    hash: str
    writer_run: str | None
    """The run that wrote this version, or None when a person did."""
    writer: str


@dataclass(frozen=True)
class ServerDraft:
    """A draft as the application reports it now."""

    draft_id: str
    history: tuple[DraftVersion, ...]
    submitted_by: str | None = None

    @property
    def current(self) -> DraftVersion:
        return self.history[-1]

    @classmethod
    def from_view(cls, view: Mapping[str, Any]) -> ServerDraft:
        """From `GET /api/drafts/{id}`."""
        history = tuple(
            DraftVersion(int(v["version"]), str(v["hash"]), v["writer"].get("run_id"),
                         str(v["writer"].get("run_id") or v["writer"].get("user")))
            for v in view["history"]
        )
        submitted = view.get("submitted")
        return cls(str(view["draft_id"]), history, None if not submitted else str(submitted.get("run_id")))


class ResumeChoice(NamedTuple):
    """The class that holds and why."""

    resume: BrowserResumeClass
    reason: str


def choose_resume(
    run_id: str, confirmed: ConfirmedDraft | None, server: ServerDraft | None, *, session_live: bool,
) -> ResumeChoice:
    """The sec. 13 class for resuming `run_id` (see the module docstring for the rules)."""
    if confirmed is None:
        if session_live:
            return ResumeChoice(BrowserResumeClass.REOPEN_DURABLE_URL, "nothing confirmed yet; the session here is live")
        return ResumeChoice(BrowserResumeClass.RECONSTRUCT_SESSION, "nothing confirmed yet; a new session is needed")
    if server is None:
        return ResumeChoice(BrowserResumeClass.NOT_RESUMABLE,
                            f"draft {confirmed.draft_id} is gone from the application")
    if server.submitted_by is not None:
        return ResumeChoice(BrowserResumeClass.NOT_RESUMABLE,
                            f"draft {confirmed.draft_id} was already submitted by {server.submitted_by}")
    at = [v for v in server.history if v.version == confirmed.version]
    if not at or at[0].hash != confirmed.hash:
        return ResumeChoice(BrowserResumeClass.NOT_RESUMABLE,
                            f"version {confirmed.version} of draft {confirmed.draft_id} is not the one confirmed")
    later: Sequence[DraftVersion] = [v for v in server.history if v.version > confirmed.version]
    strangers = sorted({v.writer for v in later if v.writer_run != run_id})
    if strangers:
        return ResumeChoice(BrowserResumeClass.NOT_RESUMABLE,
                            f"draft {confirmed.draft_id} was changed after version {confirmed.version} by "
                            f"{', '.join(strangers)}")
    if later:
        return ResumeChoice(BrowserResumeClass.RESTART_FROM_SERVER_STATE,
                            f"the server holds version {later[-1].version}, saved by this run after the checkpoint's "
                            f"version {confirmed.version}: continue from the server's state")
    if session_live:
        return ResumeChoice(BrowserResumeClass.REOPEN_DURABLE_URL,
                            f"the server holds the confirmed version {confirmed.version}; the session here is live")
    return ResumeChoice(BrowserResumeClass.RECONSTRUCT_SESSION,
                        f"the server holds the confirmed version {confirmed.version}; no session survives a move: "
                        "log in again with a scoped credential")
