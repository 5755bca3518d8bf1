"""The web application's form: three pages of fields, their validation, and the draft snapshot.

A draft is the server-side record of one account's answers. Its snapshot
(`draft_id`, `account`, `version`, `answers`) in canonical JSON is what a
submission names: `snapshot_hash` of it is the artifact hash a capability must
carry, so a submission commits exactly the answers the server holds at that
version and nothing else.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from baton.identity import canonical_json, sha256_ref


@dataclass(frozen=True)
class Field:
    """One input of a page: its name, label, and a check returning an error text or None."""

    name: str
    label: str
    required: bool = True
    pattern: str | None = None
    choices: tuple[str, ...] = ()
    integer_range: tuple[int, int] | None = None

    def problem(self, value: str) -> str | None:
        """Why `value` is not acceptable for this field, or None."""
        value = value.strip()
        if not value:
            return "is required" if self.required else None
        if len(value) > 200:
            return "is longer than 200 characters"
        if self.choices and value not in self.choices:
            return f"must be one of {', '.join(self.choices)}"
        if self.integer_range is not None:
            low, high = self.integer_range
            if not re.fullmatch(r"[0-9]{1,6}", value) or not low <= int(value) <= high:
                return f"must be a whole number from {low} to {high}"
        if self.pattern is not None and not re.fullmatch(self.pattern, value):
            return "is not in the expected format"
        return None


PAGES: tuple[tuple[Field, ...], ...] = (
    (Field("company", "Company name", pattern=r"[\w .,&'-]{2,80}"),
     Field("country", "Country (ISO code)", pattern=r"[A-Z]{2}")),
    (Field("plan", "Plan", choices=("basic", "team", "enterprise")),
     Field("seats", "Seats", integer_range=(1, 500))),
    (Field("contact_email", "Contact e-mail", pattern=r"[^@\s]+@[^@\s]+\.[a-z]{2,}"),
     Field("notes", "Notes", required=False)),
)
"""The form, page by page (pages are numbered from 1)."""

FIELD_NAMES: tuple[str, ...] = tuple(field.name for page in PAGES for field in page)


class NoSuchPageError(ValueError):
    """A page number outside the form."""


def page_fields(page: int) -> tuple[Field, ...]:
    """The fields of page `page` (1-based); NoSuchPageError outside 1..len(PAGES)."""
    if not 1 <= page <= len(PAGES):
        raise NoSuchPageError(f"the form has pages 1 to {len(PAGES)}, not {page}")
    return PAGES[page - 1]


def validate_page(page: int, values: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(accepted answers, problems by field) for one page's submitted values; unknown fields are problems."""
    fields = page_fields(page)
    known = {field.name for field in fields}
    problems = {name: "is not a field of this page" for name in values if name not in known}
    answers: dict[str, str] = {}
    for field in fields:
        value = str(values.get(field.name, ""))
        problem = field.problem(value)
        if problem is not None:
            problems[field.name] = f"{field.label} {problem}"
        else:
            answers[field.name] = value.strip()
    return answers, problems


def complete(answers: Mapping[str, Any]) -> list[str]:
    """Required fields still missing from `answers` (empty when the form is complete)."""
    return [field.name for page in PAGES for field in page if field.required and not answers.get(field.name)]


def snapshot(draft_id: str, account: str, version: int, answers: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a draft a submission commits to."""
    return {"draft_id": draft_id, "account": account, "version": version, "answers": dict(sorted(answers.items()))}


def snapshot_bytes(draft_id: str, account: str, version: int, answers: Mapping[str, Any]) -> bytes:
    """The snapshot in canonical JSON: the exact bytes a browser run proposes as its candidate."""
    return canonical_json(snapshot(draft_id, account, version, answers))


def snapshot_hash(draft_id: str, account: str, version: int, answers: Mapping[str, Any]) -> str:
    """`sha256:<hex>` of `snapshot_bytes`."""
    return sha256_ref(snapshot_bytes(draft_id, account, version, answers))
