"""The document corpus's records: every version of every document, in one JSON file.

`documents.json`:

    {"format": 1,
     "documents": {"<doc id>": [{"version": 1, "text": "...", "content_hash": "sha256:<hex>",
                                 "changed_at": "<UTC ISO>", "cause": "initial"|"admin"|"drift"}, ...]}}

Versions are listed oldest first and start at 1; `content_hash` is the sha256
ref of the UTF-8 bytes of `text`. The file is replaced atomically (and
fsynced) on every change, so it always holds a complete history.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from baton.identity import sha256_ref
from baton.durable_files import read_json, utc_now_text, write_json

DOCUMENTS_FILE = "documents.json"
FORMAT = 1
DOC_ID_PATTERN = r"^[a-z0-9][a-z0-9-]{0,63}$"

INITIAL_DOCUMENTS: dict[str, str] = {
    "leases": (
        "Each run has at most one owner for a given epoch. A lease is renewed by heartbeats "
        "and expires on the database clock, never on the worker's own clock."
    ),
    "fencing": (
        "Targets reject any fencing token older than the newest one they have seen for the run. "
        "A paused worker that wakes up late therefore cannot change anything."
    ),
    "idempotency": (
        "A retried request with the same idempotency key produces a single side effect. "
        "Reusing a key for a different request is refused outright."
    ),
    "reconciliation": (
        "After a timeout the outcome of a request is unknown until the target is asked. "
        "Only an answer of not committed permits a retry."
    ),
    "observations": (
        "An observation records its source, its query, when it was made and the hash of what was seen. "
        "A stale observation must be refreshed or revalidated before it is used again."
    ),
}

_DRIFT_NOTES = (
    "Revised guidance now applies to every region.",
    "An erratum corrects the previous statement.",
    "The operations team confirmed this during the last incident review.",
    "This section was rewritten after an audit.",
    "A newer measurement supersedes the figures given earlier.",
)


@dataclass(frozen=True)
class DocumentVersion:
    """One version of one document."""

    doc_id: str
    version: int
    text: str
    content_hash: str
    changed_at: str
    cause: str

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.doc_id,
            "version": self.version,
            "text": self.text,
            "content_hash": self.content_hash,
            "changed_at": self.changed_at,
            "cause": self.cause,
        }


class DocumentStore:
    """All versions of all documents; writes replace `documents.json` durably."""

    def __init__(self, data_dir: Path | str) -> None:
        self.path = Path(data_dir) / DOCUMENTS_FILE
        self._lock = threading.Lock()
        document = read_json(self.path)
        if document is None:
            at = utc_now_text()
            document = {
                "format": FORMAT,
                "documents": {doc_id: [_version_entry(1, text, at, "initial")] for doc_id, text in INITIAL_DOCUMENTS.items()},
            }
            write_json(self.path, document)
        if document.get("format") != FORMAT:
            raise ValueError(f"{self.path}: unsupported format {document.get('format')!r}")
        self._documents: dict[str, list[dict[str, Any]]] = document["documents"]

    def ids(self) -> list[str]:
        with self._lock:
            return sorted(self._documents)

    def get(self, doc_id: str, version: int | None = None) -> DocumentVersion | None:
        """The latest (or the given) version of a document, or None."""
        with self._lock:
            history = self._documents.get(doc_id)
            if not history:
                return None
            if version is None:
                return _view(doc_id, history[-1])
            matching = [entry for entry in history if entry["version"] == version]
            return _view(doc_id, matching[0]) if matching else None

    def history(self, doc_id: str) -> list[DocumentVersion]:
        with self._lock:
            return [_view(doc_id, entry) for entry in self._documents.get(doc_id, [])]

    def change(self, doc_id: str, text: str, cause: str) -> tuple[DocumentVersion, bool]:
        """Record `text` as the document's next version; (latest, changed). Same text: no new version."""
        with self._lock:
            history = self._documents.setdefault(doc_id, [])
            if history and history[-1]["text"] == text:
                return _view(doc_id, history[-1]), False
            history.append(_version_entry(len(history) + 1, text, utc_now_text(), cause))
            write_json(self.path, {"format": FORMAT, "documents": self._documents})
            return _view(doc_id, history[-1]), True

    def drift(self, rng: random.Random) -> DocumentVersion:
        """Change one seeded-random document by appending a seeded-random note."""
        doc_id = rng.choice(self.ids())
        note = rng.choice(_DRIFT_NOTES)
        current = self.get(doc_id)
        assert current is not None
        latest, _ = self.change(doc_id, f"{current.text} {note}", "drift")
        return latest


def _version_entry(version: int, text: str, at: str, cause: str) -> dict[str, Any]:
    return {
        "version": version,
        "text": text,
        "content_hash": sha256_ref(text.encode("utf-8")),
        "changed_at": at,
        "cause": cause,
    }


def _view(doc_id: str, entry: dict[str, Any]) -> DocumentVersion:
    return DocumentVersion(
        doc_id=doc_id,
        version=int(entry["version"]),
        text=str(entry["text"]),
        content_hash=str(entry["content_hash"]),
        changed_at=str(entry["changed_at"]),
        cause=str(entry["cause"]),
    )
