"""Durable plain-file records for the target services: JSON Lines and whole JSON files.

Every write reaches the disk (fsync of the file, and of the directory when a
file is created or replaced) before the function returns, so a service that
answers after calling these has really recorded what it answered.

JSON Lines files hold one compact JSON object per line, each line ending in
a newline. A line without its newline is a write torn by a crash: the service
never acknowledged it, readers ignore it and `repair_tail` cuts it off.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from baton import clock


def utc_now_text() -> str:
    """The current time as UTC ISO-8601 with microseconds and a `Z` suffix."""
    return clock.now().strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _line(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


def append_line(path: Path, obj: Any) -> None:
    """Append one JSON object as a line and fsync it."""
    created = not path.exists()
    with open(path, "ab") as handle:
        handle.write(_line(obj))
        handle.flush()
        os.fsync(handle.fileno())
    if created:
        _fsync_dir(path.parent)


def read_lines(path: Path) -> list[dict[str, Any]]:
    """Every complete line of a JSON Lines file (none if the file is absent)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    complete = data[: data.rfind(b"\n") + 1]
    return [json.loads(line) for line in complete.splitlines() if line.strip()]


def repair_tail(path: Path) -> bool:
    """Cut off a torn last line, if any; True when something was cut."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return False
    keep = data.rfind(b"\n") + 1
    if keep == len(data):
        return False
    with open(path, "r+b") as handle:
        handle.truncate(keep)
        handle.flush()
        os.fsync(handle.fileno())
    return True


def write_json(path: Path, obj: Any) -> None:
    """Replace a JSON file atomically (temp file, fsync, rename, fsync directory)."""
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(json.dumps(obj, sort_keys=True, ensure_ascii=False, indent=2).encode("utf-8") + b"\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def read_json(path: Path) -> Any:
    """A JSON file's content, or None if the file is absent."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
