"""A description of the machine a benchmark ran on, from /proc, /sys and the standard library."""

from __future__ import annotations

import datetime as dt
import os
import platform
import shutil
import subprocess
from importlib import metadata
from pathlib import Path

_PACKAGES = ("langgraph", "langgraph-checkpoint-sqlite", "langgraph-checkpoint-postgres", "dbos", "psycopg", "pydantic")


def _first_line(path: str, prefix: str) -> str | None:
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(prefix):
                return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def _disk(path: Path) -> dict[str, str]:
    """The device and file system holding `path`, and whether the kernel calls it rotational."""
    info: dict[str, str] = {}
    try:
        out = subprocess.run(
            ["findmnt", "-no", "SOURCE,FSTYPE", "-T", str(path)], capture_output=True, text=True, timeout=10, check=False
        ).stdout.split()
        if len(out) >= 2:
            info["device"], info["filesystem"] = out[0], out[1]
            name = Path(out[0]).name
            rotational = Path(f"/sys/block/{name}/queue/rotational")
            if rotational.exists():
                info["rotational"] = "yes" if rotational.read_text().strip() == "1" else "no"
    except (OSError, subprocess.SubprocessError):
        pass
    usage = shutil.disk_usage(path)
    info["size_gb"] = f"{usage.total / 1e9:.0f}"
    return info


def _postgres_version() -> str | None:
    for candidate in sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"), reverse=True):
        try:
            out = subprocess.run([str(candidate), "--version"], capture_output=True, text=True, timeout=10, check=False)
            return out.stdout.strip() or None
        except (OSError, subprocess.SubprocessError):
            continue
    return None


def describe(workdir: Path | None = None) -> dict[str, object]:
    """nproc, memory, CPU model, disk, OS, Python and package versions."""
    mem_kb = _first_line("/proc/meminfo", "MemTotal")
    versions: dict[str, str] = {}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    import sqlite3

    return {
        "measured_at": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": os.cpu_count(),
        "cpu_model": _first_line("/proc/cpuinfo", "model name") or platform.processor() or "unknown",
        "memory_gb": round(int(mem_kb.split()[0]) / 1024 / 1024, 1) if mem_kb else None,
        "disk": _disk(workdir or Path("/tmp")),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "postgres_server": _postgres_version(),
        "packages": versions,
    }
