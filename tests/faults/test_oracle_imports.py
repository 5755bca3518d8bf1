"""The oracles read raw files with the standard library only: they import nothing of Baton, least of all the
predicates they judge (baton.checkpoints' applies_to, baton.compat, baton.gateway, ...)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ORACLE_MODULES = sorted((ROOT / "baton" / "faults").glob("oracles*.py"))


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
        elif isinstance(node, ast.ImportFrom) and node.level:
            names.add("." * node.level + (node.module or ""))
    return names


def test_there_is_an_oracle_module() -> None:
    assert ORACLE_MODULES, "baton/faults/oracles*.py is missing"


def test_oracles_import_only_the_standard_library() -> None:
    for path in ORACLE_MODULES:
        foreign = {name for name in _imports(path)
                   if name != "__future__" and name.split(".")[0] not in sys.stdlib_module_names}
        assert not foreign, f"{path.name} imports {sorted(foreign)}: an oracle must not use the system under test"
