"""Server-side state of the web application: sessions and drafts, each in its own JSON Lines file.

- `sessions.jsonl`: one line per issued session (`session_id`, `csrf_token`,
  `account`, `actor`, `run_id`, `epoch`, `issued_at`, `expires_at`) and one per
  revocation (`revoked`, `session_id`, `reason`). These are the app's own
  secrets, kept server-side as any web application keeps its session table;
  tests read them to prove none reached a checkpoint.
- `drafts.jsonl`: one line per draft version (`draft_id`, `account`, `version`,
  `page`, `answers` (all answers so far), `hash` (of the snapshot), `writer`
  (`{"run_id", "epoch"}` for an agent session, `{"user"}` for a person), `at`).

Everything is reloaded from the files on start, so a restarted app still knows
its sessions and drafts. One lock serializes all changes.
"""

from __future__ import annotations

import datetime as dt
import secrets
import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from baton import clock
from baton.durable_files import append_line, read_lines, repair_tail
from baton.targets.webapp_form import page_fields, snapshot_hash

SESSIONS_FILE = "sessions.jsonl"
DRAFTS_FILE = "drafts.jsonl"


def _now() -> dt.datetime:
    return clock.now()


def _text(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(text: str) -> dt.datetime:
    return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.timezone.utc)


@dataclass(frozen=True)
class Session:
    """One login: who (account, and the actor: a run at an epoch, or a person), until when."""

    session_id: str
    csrf_token: str
    account: str
    actor: str
    run_id: str | None
    epoch: int | None
    expires_at: dt.datetime

    def writer(self) -> dict[str, Any]:
        """How draft versions saved in this session name their writer."""
        if self.run_id is not None:
            return {"run_id": self.run_id, "epoch": self.epoch}
        return {"user": self.actor}


class SessionRefused(Exception):
    """A request's session is missing, unknown, expired, revoked or fenced (`reason` says which)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class Sessions:
    """The session table (`sessions.jsonl`)."""

    def __init__(self, directory: Path, ttl_s: float) -> None:
        if ttl_s <= 0:
            raise ValueError(f"session TTL must be positive, not {ttl_s}")
        self.path = Path(directory) / SESSIONS_FILE
        self.ttl_s = ttl_s
        self._lock = threading.Lock()
        repair_tail(self.path)
        self._live: dict[str, Session] = {}
        self._revoked: dict[str, str] = {}
        for line in read_lines(self.path):
            if line.get("revoked"):
                self._revoked[line["session_id"]] = str(line.get("reason", "revoked"))
            else:
                self._live[line["session_id"]] = Session(
                    line["session_id"], line["csrf_token"], line["account"], line["actor"], line.get("run_id"),
                    line.get("epoch"), _parse(line["expires_at"]))

    def issue(self, account: str, actor: str, *, run_id: str | None = None, epoch: int | None = None) -> Session:
        """A new session (and its CSRF token), recorded before it is handed out."""
        now = _now()
        session = Session("ws_" + secrets.token_urlsafe(24), "wc_" + secrets.token_urlsafe(24), account, actor,
                          run_id, epoch, now + dt.timedelta(seconds=self.ttl_s))
        with self._lock:
            append_line(self.path, {"session_id": session.session_id, "csrf_token": session.csrf_token,
                                    "account": account, "actor": actor, "run_id": run_id, "epoch": epoch,
                                    "issued_at": _text(now), "expires_at": _text(session.expires_at)})
            self._live[session.session_id] = session
        return session

    def get(self, session_id: str | None, fence_mark: Callable[[str], int | None] | None = None) -> Session:
        """The live session named by a cookie; SessionRefused saying why not.

        `fence_mark(run_id)` gives the highest epoch the app has seen for a run:
        a session a run opened at a lower epoch belongs to a stale owner.
        """
        if not session_id:
            raise SessionRefused("no_session", "no session cookie: log in first")
        with self._lock:
            if session_id in self._revoked:
                raise SessionRefused("session_revoked", f"the session was revoked ({self._revoked[session_id]})")
            session = self._live.get(session_id)
        if session is None:
            raise SessionRefused("unknown_session", "the session cookie names no session of this application")
        if _now() >= session.expires_at:
            raise SessionRefused("session_expired", f"the session expired at {_text(session.expires_at)}")
        if session.run_id is not None and fence_mark is not None:
            mark = fence_mark(session.run_id)
            if mark is not None and session.epoch is not None and session.epoch < mark:
                raise SessionRefused("session_fenced", f"the session belongs to epoch {session.epoch} of run "
                                                       f"{session.run_id}; epoch {mark} now rules it")
        return session

    def revoke(self, *, account: str | None = None, runs: Collection[str] | None = None, reason: str = "revoked") -> int:
        """Revoke every live session (of `account`, and of the runs `runs`, if given); return how many."""
        with self._lock:
            chosen = [s for s in self._live.values()
                      if (account is None or s.account == account) and (runs is None or s.run_id in runs)]
            for session in chosen:
                append_line(self.path, {"revoked": True, "session_id": session.session_id, "reason": reason,
                                        "at": _text(_now())})
                self._revoked[session.session_id] = reason
                del self._live[session.session_id]
        return len(chosen)


class DraftError(Exception):
    """A draft request that cannot be honoured (`reason` names why, `status` is the HTTP status)."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status, self.reason = status, reason


class Drafts:
    """Every version of every draft (`drafts.jsonl`)."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / DRAFTS_FILE
        self._lock = threading.Lock()
        repair_tail(self.path)
        self._versions: dict[str, list[dict[str, Any]]] = {}
        for line in read_lines(self.path):
            self._versions.setdefault(line["draft_id"], []).append(line)

    def _append(self, draft_id: str, account: str, version: int, page: int, answers: dict[str, str],
                writer: dict[str, Any]) -> dict[str, Any]:
        line = {"draft_id": draft_id, "account": account, "version": version, "page": page, "answers": answers,
                "hash": snapshot_hash(draft_id, account, version, answers), "writer": writer, "at": _text(_now())}
        append_line(self.path, line)
        self._versions.setdefault(draft_id, []).append(line)
        return line

    def create(self, account: str, writer: dict[str, Any]) -> dict[str, Any]:
        """A new empty draft of `account` at version 0."""
        with self._lock:
            return self._append("d_" + secrets.token_hex(6), account, 0, 0, {}, writer)

    def history(self, draft_id: str, account: str) -> list[dict[str, Any]]:
        """Every version of a draft of `account`; DraftError 404 when there is none (or it is another account's)."""
        versions = self._versions.get(draft_id)
        if not versions or versions[0]["account"] != account:
            raise DraftError(404, "no_such_draft", f"account {account!r} has no draft {draft_id!r}")
        return list(versions)

    def current(self, draft_id: str, account: str) -> dict[str, Any]:
        return self.history(draft_id, account)[-1]

    def find(self, draft_id: str) -> dict[str, Any] | None:
        """The current version of a draft whatever its account, or None."""
        versions = self._versions.get(draft_id)
        return versions[-1] if versions else None

    def save_page(self, draft_id: str, account: str, page: int, answers: dict[str, str], base_version: int,
                  writer: dict[str, Any]) -> dict[str, Any]:
        """Store one page's answers as the next version; 409 when the draft moved past `base_version`."""
        page_fields(page)
        with self._lock:
            current = self.current(draft_id, account)
            if current["version"] != base_version:
                raise DraftError(409, "version_conflict",
                                 f"draft {draft_id} is at version {current['version']}, the form was for "
                                 f"version {base_version}: reload the page")
            merged = {**current["answers"], **answers}
            return self._append(draft_id, account, current["version"] + 1, page, merged, writer)
