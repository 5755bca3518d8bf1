"""Read model of `baton faults --json` output for the dashboard: one row per case and strategy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

STRATEGY_ORDER = ("baton", "naive", "competent")


class FaultMatrixUnreadable(ValueError):
    """The file is not what `baton faults --json` prints."""


def read_fault_matrix(path: Path) -> dict[str, Any] | None:
    """The matrix report at `path`, or None when there is no file; a clear error when it is not one."""
    if not path.is_file():
        return None
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise FaultMatrixUnreadable(f"{path} is not JSON ({exc.msg} at line {exc.lineno}): "
                                    "write it with `baton faults --json > FILE`") from None
    if not isinstance(report, dict) or not isinstance(report.get("cases"), list) or "questions" not in report:
        raise FaultMatrixUnreadable(f"{path} has no 'cases' list and 'questions': it is not `baton faults --json` output")
    return report


def matrix_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """(case, strategy) -> status and the questions its oracles answered yes, in the report's case order."""
    rows: list[dict[str, Any]] = []
    for case in report["cases"]:
        for strategy in STRATEGY_ORDER:
            result = case.get(strategy)
            if result is None:
                continue
            violated = sorted(q for q, yes in result.get("answers", {}).items() if yes)
            rows.append({"case": case["case_id"], "title": case.get("title", ""), "strategy": strategy,
                         "status": result.get("status") or ("error" if result.get("error") else ""),
                         "violations": len(violated), "violated": ", ".join(violated) or "none",
                         "error": (result.get("error") or "").splitlines()[0] if result.get("error") else ""})
    return rows


def ablation_rows(ablations: tuple[str, ...], catching_case: dict[str, str | None]) -> list[dict[str, str]]:
    """Each protection switched off in turn, and the one case whose oracles catch it (or the finding that none does)."""
    return [{"ablation": name, "caught by": catching_case.get(name) or "none (a finding)",
             "kind": "gate reason" if name.startswith("gate:") else "switch"} for name in ablations]
