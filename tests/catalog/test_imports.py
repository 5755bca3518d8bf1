"""The release catalog is data, not agent code: the core's catalog and store never import baton.agents."""

from __future__ import annotations

import ast
from pathlib import Path

import baton

ROOT = Path(baton.__file__).parent
CORE = [ROOT / "placements.py", ROOT / "chaos.py", *sorted((ROOT / "catalog").glob("*.py")),
        *sorted((ROOT / "store").glob("*.py"))]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_catalog_store_and_placements_do_not_import_agents() -> None:
    offenders = {str(path.relative_to(ROOT)): sorted(n for n in _imports(path) if n.startswith("baton.agents"))
                 for path in CORE}
    assert {path: names for path, names in offenders.items() if names} == {}


def test_the_check_sees_an_agent_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from baton.agents.scripted_models import model_for\n", encoding="utf-8")
    assert "baton.agents.scripted_models" in _imports(bad)
