"""The layering contracts in pyproject.toml hold, and `lint-imports` really catches a forbidden import.

`make test` runs this module, so a module that imports across a layer fails
the suite. The ablations add one forbidden import to a temporary copy of the
tree and show the same check turning red, naming that import.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("baton", "assets", "sensors", "pipelines", "dashboard")
_RUN = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports(no_cache=True, no_logo=True))"


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """Run import-linter on the tree at `root` (its pyproject.toml contracts; its packages come first on sys.path)."""
    env = {**os.environ, "COLUMNS": "400"}  # one edge per line, however long
    return subprocess.run([sys.executable, "-c", _RUN], cwd=root, env=env, capture_output=True, text=True, timeout=300)


def copy_tree(destination: Path) -> Path:
    """The packages and pyproject.toml of this checkout, copied under `destination`."""
    for package in PACKAGES:
        shutil.copytree(ROOT / package, destination / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(ROOT / "pyproject.toml", destination / "pyproject.toml")
    return destination


def test_the_tree_keeps_every_contract() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 kept, 0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "line", "named"),
    [
        # records and stores may not reach up into the runtime, even indirectly
        ("baton/store/records.py", "import baton.runtime.sdk", "baton.store.records -> baton.runtime.sdk"),
        # the protocol layer knows no handoff rules
        ("baton/gateway.py", "from baton.compat import evaluate_handoff", "baton.gateway -> baton.compat"),
        # the handoff layer knows no reference agent
        ("baton/replay.py", "from baton.agents.derivers import DERIVERS", "baton.replay -> baton.agents.derivers"),
        # the core never imports Dagster, Streamlit or a platform package
        ("baton/identity.py", "import dagster", "baton.identity -> dagster"),
        ("baton/cli/__init__.py", "import dashboard", "baton.cli -> dashboard"),
    ],
)
def test_a_forbidden_import_breaks_the_check(tmp_path: Path, module: str, line: str, named: str) -> None:
    tree = copy_tree(tmp_path)
    path = tree / module
    path.write_text(path.read_text() + f"\n{line}  # ablation: forbidden edge\n")
    result = lint_imports(tree)
    assert result.returncode != 0, result.stdout
    assert named in result.stdout, result.stdout


def test_a_module_outside_every_layer_breaks_the_check(tmp_path: Path) -> None:
    tree = copy_tree(tmp_path)
    (tree / "baton" / "unplaced.py").write_text('"""A new module nobody put in a layer."""\n')
    result = lint_imports(tree)
    assert result.returncode != 0, result.stdout
    assert "baton.unplaced" in result.stdout, result.stdout
