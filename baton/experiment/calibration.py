"""Baton's own step costs for the experiment, read from the measured benchmark artifacts in docs/.

Nothing here is invented: checkpoint seal latency is the per-boundary samples of
`baton bench checkpoint` (SDK boundary, SQLite, the 400-step leg), checkpoint size is that leg's
stored bytes per step less the observation payload, handoff latency is the per-sample totals of
`baton bench handoff` (SQLite, default blobs), a mutation through the gateway is the concurrency-1
p50 of `baton bench gateway`, and a transcript write is the measured fsync+rename floor.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

DOCS = Path(__file__).resolve().parents[2] / "docs"
CHECKPOINT_FILE = "benchmarks-checkpoint.json"
HANDOFF_FILE = "benchmarks-handoff.json"
GATEWAY_FILE = "benchmarks-gateway.json"
FAULT_MATRIX_FILE = "fault-matrix.md"


class CalibrationError(RuntimeError):
    """A benchmark artifact the experiment calibrates from is missing or lacks a figure."""


@dataclass(frozen=True)
class Calibration:
    """Measured costs of Baton's own steps, with where each came from."""

    seal_ms: np.ndarray          # per-boundary samples (SDK boundary: content + checkpoint + events, one commit)
    checkpoint_bytes: int        # stored bytes per checkpoint beyond the observation payload
    handoff_ms: np.ndarray       # per-handoff totals (prepare + commit + restore)
    gateway_ms: float            # one mutation through the gateway (capability, fence, ledger), p50
    transcript_write_ms: float   # one durable transcript write (file fsync + rename floor)
    sources: dict[str, Any]

    def describe(self) -> dict[str, Any]:
        return {"seal_ms_p50": float(np.median(self.seal_ms)), "seal_samples": int(self.seal_ms.size),
                "checkpoint_bytes": self.checkpoint_bytes, "handoff_ms_p50": float(np.median(self.handoff_ms)),
                "handoff_samples": int(self.handoff_ms.size), "gateway_ms": self.gateway_ms,
                "transcript_write_ms": self.transcript_write_ms, "sources": self.sources}


def _commit_of(path: Path) -> str:
    try:
        out = subprocess.run(["git", "log", "-1", "--format=%H", "--", path.name], cwd=path.parent,
                             capture_output=True, text=True, check=False, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return out.stdout.strip() or "uncommitted"


def _read(docs: Path, name: str) -> dict[str, Any]:
    path = docs / name
    if not path.is_file():
        raise CalibrationError(f"{path} is missing: the experiment calibrates Baton's costs from it")
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def load_calibration(docs: Path = DOCS) -> Calibration:
    """Read the three benchmark artifacts; raise CalibrationError naming what is missing."""
    checkpoint, handoff, gateway = (_read(docs, name) for name in (CHECKPOINT_FILE, HANDOFF_FILE, GATEWAY_FILE))
    # A run with --repeat N keeps every repetition; only the chosen one (median mean time) has its step times.
    legs = {leg["steps"]: leg for leg in checkpoint.get("legs", [])
            if leg.get("system") == "baton-sdk-sqlite" and leg.get("status") == "ok" and leg.get("chosen", True)}
    if len(legs) < 2:
        raise CalibrationError(f"{CHECKPOINT_FILE}: needs two ok legs of baton-sdk-sqlite")
    short, long = legs[min(legs)], legs[max(legs)]
    per_step = (long["stored_bytes"] - short["stored_bytes"]) / (max(legs) - min(legs))
    payload = float(checkpoint["observation_bytes_per_step"])
    system = next((s for s in handoff.get("systems", []) if s.get("key") == "sqlite-default"), None)
    if system is None or "samples_ms" not in system:
        raise CalibrationError(f"{HANDOFF_FILE}: no samples for system sqlite-default")
    level = next((lv for lv in gateway.get("levels", []) if lv.get("concurrency") == 1), None)
    if level is None:
        raise CalibrationError(f"{GATEWAY_FILE}: no concurrency-1 level")
    totals = np.add.reduce([np.asarray(system["samples_ms"][phase], dtype=float)
                            for phase in ("prepare", "commit", "restore")])
    sources = {name: {"file": f"docs/{name}", "commit": _commit_of(docs / name)}
               for name in (CHECKPOINT_FILE, HANDOFF_FILE, GATEWAY_FILE, FAULT_MATRIX_FILE)}
    sources[CHECKPOINT_FILE]["figures"] = f"baton-sdk-sqlite legs {sorted(legs)}: step_ms of {max(legs)}, stored_bytes"
    sources[HANDOFF_FILE]["figures"] = "sqlite-default samples_ms prepare+commit+restore"
    sources[GATEWAY_FILE]["figures"] = "levels[concurrency=1].gateway_ms.p50"
    sources[CHECKPOINT_FILE]["transcript_write"] = "floor_ms.file_fsync_rename"
    return Calibration(
        seal_ms=np.asarray(long["step_ms"], dtype=float),
        checkpoint_bytes=int(round(per_step - payload)),
        handoff_ms=totals,
        gateway_ms=float(level["gateway_ms"]["p50"]),
        transcript_write_ms=float(checkpoint["floor_ms"]["file_fsync_rename"]),
        sources=sources,
    )
