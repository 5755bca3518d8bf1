"""The plain-text report format shared by the research model and its verifier.

A report is UTF-8 text. Lines starting with `- ` are claims; every other line
(title, summary) is commentary and asserts nothing. A claim cites a recorded
observation by appending `[cite: sha256:<hex>]`, the ref of the Observation
record; a claim may carry several citations.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

CLAIM_PREFIX = "- "
_CITE = re.compile(r"\[cite: (sha256:[0-9a-f]{64})\]")


@dataclass(frozen=True)
class Claim:
    """One claim line of a report and the refs it cites."""

    line_no: int
    text: str
    cited_refs: tuple[str, ...]


def render_claim(statement: str, cited_refs: tuple[str, ...]) -> str:
    """A claim line: the statement followed by one citation per ref."""
    cites = " ".join(f"[cite: {ref}]" for ref in cited_refs)
    return f"{CLAIM_PREFIX}{statement} {cites}".rstrip()


def parse_claims(report: str) -> tuple[Claim, ...]:
    """Every claim line of `report`, numbered from 1, with its citations."""
    claims = []
    for line_no, line in enumerate(report.splitlines(), start=1):
        if line.startswith(CLAIM_PREFIX):
            claims.append(Claim(line_no=line_no, text=line, cited_refs=tuple(_CITE.findall(line))))
    return tuple(claims)
