"""A tiny selector over JSON documents: `a.b[key=value,other=value].c` and `a[0]`."""

from __future__ import annotations

import re
from typing import Any

_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]|\[([^\]]+=[^\]]+)\]")


class PathNotFound(KeyError):
    """The selector does not lead to a value in this document."""


def select(document: Any, path: str) -> Any:
    """Follow `path` through dicts and lists; raise `PathNotFound` with the failing step."""
    current = document
    for match in _PART.finditer(path):
        name, index, conditions = match.groups()
        if name is not None:
            if not isinstance(current, dict) or name not in current:
                raise PathNotFound(f"{path}: no field {name!r}")
            current = current[name]
        elif index is not None:
            if not isinstance(current, list) or int(index) >= len(current):
                raise PathNotFound(f"{path}: no item {index}")
            current = current[int(index)]
        else:
            if not isinstance(current, list):
                raise PathNotFound(f"{path}: [{conditions}] needs a list")
            wanted = [tuple(part.split("=", 1)) for part in conditions.split(",")]
            found = [item for item in current if isinstance(item, dict)
                     and all(str(item.get(key)) == value for key, value in wanted)]
            if len(found) != 1:
                raise PathNotFound(f"{path}: {len(found)} items with {conditions}")
            current = found[0]
    return current
