"""No production code can switch a protection off.

Only the fault harness (`baton/faults/`), the simulation (`baton/sim/`), the comparison of the two
(`baton/sim_agreement.py`) and the tests may set BATON_ABLATE or
call `ablation_env`; `baton/ablation.py` defines them. Every other Python
module of the shipped packages, and the Makefile, configuration files and
scripts, is scanned here: a module that names `ablation_env`, imports the
variable's name (`ENV_VAR`) or spells `BATON_ABLATE` fails the test.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("baton", "assets", "sensors", "pipelines", "dashboard")
ALLOWED = (ROOT / "baton" / "ablation.py", ROOT / "baton" / "faults", ROOT / "baton" / "sim",
           ROOT / "baton" / "sim_agreement.py")  # runs a fault case live and in the simulation, both harnesses
TEXT_FILES = ("Makefile", "dagster.yaml", "workspace.yaml", "pyproject.toml")
FORBIDDEN_NAMES = frozenset({"ablation_env", "ENV_VAR"})
VARIABLE = "BATON_ABLATE"


def findings_in(source: str, where: str) -> list[str]:
    """Every way `source` could set an ablation: the variable's name, `ablation_env`, `ENV_VAR` from baton.ablation."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source, filename=where)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and VARIABLE in node.value:
            found.append(f"{where}:{node.lineno}: spells {VARIABLE}")
        elif isinstance(node, ast.ImportFrom) and node.module == "baton.ablation":
            found += [f"{where}:{node.lineno}: imports {alias.name}" for alias in node.names
                      if alias.name in FORBIDDEN_NAMES or alias.name == "*"]
        elif isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES:
            found.append(f"{where}:{node.lineno}: uses {node.id}")
        elif isinstance(node, ast.Attribute) and node.attr in FORBIDDEN_NAMES:
            found.append(f"{where}:{node.lineno}: uses .{node.attr}")
    return found


def production_modules() -> list[Path]:
    modules: list[Path] = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if not any(path == allowed or allowed in path.parents for allowed in ALLOWED):
                modules.append(path)
    return modules


def test_the_scan_covers_the_code_that_consults_the_switches() -> None:
    scanned = {path.relative_to(ROOT).as_posix() for path in production_modules()}
    for module in ("baton/gateway.py", "baton/store/operations_sql.py", "baton/cli/fleet_cmd.py", "baton/compat.py"):
        assert module in scanned
    assert not any(name.startswith(("baton/faults/", "baton/sim/")) for name in scanned)


def test_no_production_module_sets_an_ablation() -> None:
    found: list[str] = []
    for path in production_modules():
        found += findings_in(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix())
    assert found == [], "production code must never switch a protection off:\n" + "\n".join(found)


def test_no_build_or_config_file_sets_an_ablation() -> None:
    paths = [ROOT / name for name in TEXT_FILES] + sorted((ROOT / "scripts").glob("*"))
    offenders = [str(path.relative_to(ROOT)) for path in paths if path.is_file()
                 and VARIABLE in path.read_text(encoding="utf-8", errors="replace")]
    assert offenders == []


@pytest.mark.parametrize(
    "source",
    [
        "import os\nos.environ['BATON_ABLATE'] = 'idempotency'\n",
        "from baton.ablation import ablation_env\nwith ablation_env('freshness'):\n    pass\n",
        "from baton import ablation\nablation.ablation_env('freshness')\n",
        "import os\nfrom baton.ablation import ENV_VAR\nos.environ[ENV_VAR] = 'x'\n",
        "from baton.ablation import *\n",
    ],
)
def test_the_scan_catches_each_way_of_switching_a_protection_off(source: str) -> None:
    assert findings_in(source, "sample.py")


def test_the_scan_lets_production_consult_the_switches() -> None:
    source = "from baton.ablation import Ablation, is_ablated\nif is_ablated(Ablation.FRESHNESS):\n    pass\n"
    assert findings_in(source, "sample.py") == []
