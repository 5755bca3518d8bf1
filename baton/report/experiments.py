"""The experiments the report draws on: run now, or read from a named artifact with its commit."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from baton.report.evidence import ExperimentResult
from baton.report.json_path import PathNotFound, select


class ExperimentSpec(BaseModel):
    """How to obtain one experiment's figures (a JSON path for each)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    title: str
    kind: Literal["run", "artifact"]
    command: tuple[str, ...]
    seed: int | None = None
    artifact: str | None = None
    timeout_s: float = 1800.0
    figures: dict[str, str]

    @property
    def command_text(self) -> str:
        return shlex.join(self.command)


class ExperimentsError(ValueError):
    """The experiments file is malformed."""


def load_experiments(path: Path) -> tuple[ExperimentSpec, ...]:
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8")).get("experiments", [])
        specs = tuple(ExperimentSpec.model_validate(entry) for entry in raw)
    except (tomllib.TOMLDecodeError, ValidationError) as exc:
        raise ExperimentsError(f"{path}: {exc}") from exc
    for spec in specs:
        if spec.kind == "artifact" and not spec.artifact:
            raise ExperimentsError(f"{path}: artifact experiment {spec.id} names no artifact file")
    return specs


def _baton_argv(command: tuple[str, ...]) -> list[str]:
    """Run `baton ...` with this interpreter's installation, never whatever is first on PATH."""
    if command and command[0] == "baton":
        return [sys.executable, "-c", "from baton.cli import app; app()", *command[1:]]
    return list(command)


def _figures(spec: ExperimentSpec, document: object) -> tuple[dict[str, object], list[str]]:
    figures: dict[str, object] = {}
    missing: list[str] = []
    for name, path in spec.figures.items():
        try:
            figures[name] = select(document, path)
        except PathNotFound as exc:
            missing.append(str(exc))
    return figures, missing


def run_experiment(spec: ExperimentSpec, *, repo: Path, skip: bool = False) -> ExperimentResult:
    """Run (or read) one experiment. Any failure leaves it UNRUN with the reason; nothing is invented."""
    if spec.kind == "artifact":
        return _read_artifact(spec, repo)
    if skip:
        return ExperimentResult.unrun(spec.id, spec.command_text, spec.seed, "not run in this generation (skipped)")
    try:
        completed = subprocess.run(_baton_argv(spec.command), cwd=repo, capture_output=True, text=True,
                                   timeout=spec.timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return ExperimentResult.unrun(spec.id, spec.command_text, spec.seed, f"timed out after {spec.timeout_s:g} s")
    try:
        document = json.loads(completed.stdout)
    except json.JSONDecodeError:
        tail = (completed.stderr.strip().splitlines() or ["no output"])[-1]
        return ExperimentResult.unrun(spec.id, spec.command_text, spec.seed,
                                      f"exit {completed.returncode}, no JSON result ({tail[:200]})")
    figures, missing = _figures(spec, document)
    provenance = f"run while generating this report (exit {completed.returncode})"
    if missing:
        provenance += "; missing figures: " + "; ".join(missing)
    return ExperimentResult(experiment_id=spec.id, command=spec.command_text, seed=spec.seed, ran=True,
                            provenance=provenance, figures=figures)


def _read_artifact(spec: ExperimentSpec, repo: Path) -> ExperimentResult:
    assert spec.artifact is not None
    path = repo / spec.artifact
    if not path.is_file():
        return ExperimentResult.unrun(spec.id, spec.command_text, spec.seed, f"artifact {spec.artifact} is absent")
    commit = subprocess.run(["git", "log", "-1", "--format=%h", "--", spec.artifact], cwd=repo,
                            capture_output=True, text=True, check=False).stdout.strip()
    if not commit:
        return ExperimentResult.unrun(spec.id, spec.command_text, spec.seed,
                                      f"artifact {spec.artifact} is not committed, so its run cannot be named")
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        return ExperimentResult.unrun(spec.id, spec.command_text, spec.seed, f"artifact is not JSON: {exc}")
    figures, missing = _figures(spec, document)
    provenance = f"artifact {spec.artifact} of an earlier run, committed at {commit}"
    if missing:
        provenance += "; missing figures: " + "; ".join(missing)
    return ExperimentResult(experiment_id=spec.id, command=spec.command_text, seed=spec.seed, ran=True,
                            provenance=provenance, figures=figures)
