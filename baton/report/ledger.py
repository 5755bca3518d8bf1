"""The source ledger: only sources actually read, each with its reading status and access date."""

from __future__ import annotations

import datetime as dt
import tomllib
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator


class ReadingStatus(StrEnum):
    FULL_TEXT = "full text"
    ABSTRACT_ONLY = "abstract only"
    NOT_ACCESSIBLE = "not accessible"


class LedgerError(ValueError):
    """The ledger file is missing a required field, or an entry is malformed."""


class Source(BaseModel):
    """One source that was opened, and what it bears on."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    title: str
    identity: str
    url: str
    reading_status: ReadingStatus
    access_date: dt.date
    bears_on: tuple[str, ...]
    shows: str
    limits: str

    @field_validator("url")
    @classmethod
    def _url_is_absolute(cls, value: str) -> str:
        if not value.startswith(("https://", "http://")):
            raise ValueError(f"url must be absolute http(s), got {value!r}")
        return value


def parse_sources(text: str, *, origin: str = "sources") -> tuple[Source, ...]:
    """Parse `[[sources]]` tables; refuse an entry without access date or reading status."""
    try:
        raw = tomllib.loads(text).get("sources", [])
    except tomllib.TOMLDecodeError as exc:
        raise LedgerError(f"{origin}: not valid TOML: {exc}") from exc
    sources: list[Source] = []
    for index, entry in enumerate(raw):
        label = entry.get("id", f"entry {index}")
        for required in ("access_date", "reading_status"):
            if not entry.get(required):
                raise LedgerError(f"{origin}: source {label} has no {required}; the report cites only sources read")
        try:
            sources.append(Source.model_validate(entry))
        except ValidationError as exc:
            raise LedgerError(f"{origin}: source {label} is malformed: {exc.errors()[0]['msg']} "
                              f"({'.'.join(map(str, exc.errors()[0]['loc']))})") from exc
    ids = [source.id for source in sources]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise LedgerError(f"{origin}: duplicate source ids {duplicates}")
    return tuple(sources)


def load_sources(path: Path) -> tuple[Source, ...]:
    return parse_sources(path.read_text(encoding="utf-8"), origin=str(path))
