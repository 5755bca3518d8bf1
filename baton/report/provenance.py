"""Section 1 facts: which text was read, when, at which commit, with which software."""

from __future__ import annotations

import datetime as dt
import hashlib
import platform
import subprocess
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

KEY_PACKAGES = ("baton", "pydantic", "psycopg", "dagster", "duckdb", "streamlit", "plotly", "langgraph", "dbos",
                "rfc8785", "pyjwt", "cryptography", "playwright")


@dataclass(frozen=True)
class Provenance:
    spec_path: str
    spec_sha256: str
    generated_on: dt.date
    commit: str
    dirty: bool
    python: str
    packages: dict[str, str]


class SpecMissing(FileNotFoundError):
    """The chapter file the report audits is not where it was said to be."""


def collect(spec: Path, repo: Path, *, today: dt.date | None = None) -> Provenance:
    if not spec.is_file():
        raise SpecMissing(f"the chapter to audit is not at {spec}; pass --spec PATH")
    digest = hashlib.sha256(spec.read_bytes()).hexdigest()
    commit = _git(repo, "rev-parse", "HEAD") or "unknown (not a git checkout)"
    dirty = bool(_git(repo, "status", "--porcelain", "--untracked-files=no"))
    packages = {}
    for name in KEY_PACKAGES:
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            packages[name] = "not installed"
    return Provenance(spec_path=spec.name, spec_sha256=digest, generated_on=today or dt.date.today(),
                      commit=commit, dirty=dirty, python=platform.python_version(), packages=packages)


def _git(repo: Path, *args: str) -> str:
    completed = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=False)
    return completed.stdout.strip() if completed.returncode == 0 else ""
