"""docs/fault-matrix.md, written from real runs: the matrix per backend and the ablation table.

`baton faults --doc FILE` rewrites the section of FILE that its run produced
(`matrix-sqlite`, `matrix-postgresql` or `ablations`) between markers and
leaves the others alone. `python -m baton.faults.doc FILE --matrix OUT.json
--ablations ABL.json` does the same from saved `--json` outputs.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

HEADER = """# Fault matrix

Generated from real runs; do not edit by hand. Regenerate each section with the command
shown in it. Every case runs the real agents (`baton/agents/`) through real worker
processes (`python -m baton.runtime.worker`), the SDK, the executor, the commit path and
the gateway, against the loopback deploy and corpus services, which keep their own JSONL
records. The two controls are transcript-only (`baton/faults/transcript_agent.py`): the
naive one is the literal transcript checkpoint, the competent one carries deterministic
idempotency keys, budget totals, approvals, a checksum and a resume counter as fencing
epoch, and retries with backoff. Oracles (`baton/faults/oracles.py`) read only raw files:
the targets' effect and request logs, the corpus's document history, the build registry,
the model provider's bill and what each run reported.
"""


def _marker(name: str) -> tuple[str, str]:
    return f"<!-- section:{name} -->", f"<!-- /section:{name} -->"


def replace_section(text: str, name: str, body: str) -> str:
    """`text` with section `name` replaced by `body` (appended when absent)."""
    start, end = _marker(name)
    block = f"{start}\n{body.rstrip()}\n{end}"
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
    if pattern.search(text):
        return pattern.sub(lambda _m: block, text)
    return text.rstrip() + "\n\n" + block + "\n"


def matrix_section(report: dict[str, Any], command: str) -> str:
    """One backend's matrix: per case and strategy, the questions answered yes, with the oracles' evidence."""
    strategies = [s for s in ("baton", "naive", "competent") if s in report["violations"]]
    lines = [f"## Matrix on {report['store']} (seed {report['seed']}, {report['seconds']} s)", "",
             f"Command: `{command}`", "",
             "Violations: " + ", ".join(f"{s} {report['violations'][s]}" for s in strategies)
             + (f"; blind controls: {', '.join(report['blind_controls'])}" if report["blind_controls"] else ""), "",
             "| case | " + " | ".join(strategies) + " |", "|---|" + "---|" * len(strategies)]
    for case in report["cases"]:
        cells = []
        for strategy in strategies:
            result = case.get(strategy)
            if result is None:
                cells.append("-")
            elif result["error"]:
                cells.append("CRASHED")
            else:
                yes = [q for q, v in result["answers"].items() if v]
                cells.append(("**" + ", ".join(yes) + "**") if yes else f"none ({result['status']})")
        lines.append(f"| `{case['case_id']}` {case['title']} | " + " | ".join(cells) + " |")
    lines += ["", "Per question (cases where the oracle said yes):", "",
              "| question | " + " | ".join(strategies) + " |", "|---|" + "---|" * len(strategies)]
    for question, text in report["questions"].items():
        cells = [", ".join(c["case_id"] for c in report["cases"] if c.get(s, {}).get("answers", {}).get(question))
                 or "-" for s in strategies]
        lines.append(f"| `{question}`: {text} | " + " | ".join(cells) + " |")
    lines += ["", "Oracle evidence:", ""]
    for case in report["cases"]:
        for strategy in strategies:
            result = case.get(strategy) or {}
            for question, evidence in (result.get("evidence") or {}).items():
                for item in evidence:
                    lines.append(f"- {case['case_id']} / {strategy} / {question}: {item}")
            if result.get("error"):
                lines.append(f"- {case['case_id']} / {strategy} / crashed: {result['error'].splitlines()[0]}")
    return "\n".join(lines)


def ablation_section(results: list[dict[str, Any]], command: str) -> str:
    """Ablation -> the cases and oracles that caught it; the uncaught ones listed as findings."""
    total = sum(float(r.get("seconds", 0)) for r in results)
    uncaught = [r["name"] for r in results if not r["caught"]]
    lines = [f"## Ablations ({len(results)} switched off one at a time, Baton only, {total:.0f} s)", "",
             f"Command: `{command}`", "",
             f"Caught: {len(results) - len(uncaught)}; uncaught (findings): {len(uncaught)}", "",
             "| ablation | caught by case: oracles | evidence (first line) |", "|---|---|---|"]
    for result in results:
        caught = "; ".join(f"`{case}`: {', '.join(q)}" for case, q in result["caught"].items()) or "**UNCAUGHT**"
        first = next((lines_[0] for lines_ in result.get("evidence", {}).values() if lines_), "")
        errors = result.get("errors") or {}
        if errors:
            first += " " + "; ".join(f"(`{case}` crashed, not counted: {why})" for case, why in errors.items())
        lines.append(f"| `{result['name']}` | {caught} | {first[:160].replace('|', '/')} |")
    return "\n".join(lines)


def cases_section() -> str:
    """What each case does, from the case scripts' own docstrings."""
    from baton.faults.cases import CASE_LIST

    lines = ["## Cases", "", "| case | run | fault, injected from outside |", "|---|---|---|"]
    for case in CASE_LIST:
        doc = " ".join((case.script.__doc__ or case.title).split())
        lines.append(f"| `{case.case_id}` | {case.kind} | {doc} |")
    return "\n".join(lines)


def write(path: Path, section: str, body: str) -> None:
    """Rewrite `section` of the doc at `path` (created with its header when missing), and the cases list."""
    text = path.read_text(encoding="utf-8") if path.exists() else HEADER
    text = replace_section(text, "cases", cases_section())
    path.write_text(replace_section(text, section, body), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("doc", type=Path)
    parser.add_argument("--matrix", type=Path, action="append", default=[], help="a `baton faults --json` output")
    parser.add_argument("--matrix-command", action="append", default=[])
    parser.add_argument("--ablations", type=Path, help="a `baton faults --ablate all --json` output")
    parser.add_argument("--ablations-command", default="baton faults --ablate all --doc docs/fault-matrix.md")
    args = parser.parse_args(argv)
    for index, path in enumerate(args.matrix):
        report = json.loads(path.read_text())
        command = args.matrix_command[index] if index < len(args.matrix_command) else "baton faults --doc docs/fault-matrix.md"
        write(args.doc, f"matrix-{report['store']}", matrix_section(report, command))
    if args.ablations:
        write(args.doc, "ablations", ablation_section(json.loads(args.ablations.read_text()), args.ablations_command))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
