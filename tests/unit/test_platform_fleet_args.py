"""`baton platform`'s fleet: browser runs when the system's Chromium is there, a clear refusal when asked without it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from baton.cli import platform_cmd
from baton.cli import app
from baton.models import RunKind
from baton.placements import DEFAULT_PLACEMENTS, hosts_kind
from baton.platform_up import FleetArgs
from baton.runtime.fleet_plan import worker_placements, workers_for_kind


def _flat(output: str) -> str:
    """The CLI's error panel as one line (Rich wraps it to the terminal's width, inside box characters)."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", output).split())


def test_the_fleet_command_line_asks_for_browser_runs_only_when_set(tmp_path: Path) -> None:
    plain, browsing = FleetArgs(), FleetArgs(browser=True)
    assert "--browser" not in plain.argv("baton", tmp_path)
    assert browsing.argv("baton", tmp_path)[-1] == "--browser"
    assert plain.kinds() == "deploy, research, coding" and browsing.kinds().endswith(", browser")


def test_browser_runs_without_chromium_are_refused_before_anything_starts(monkeypatch: pytest.MonkeyPatch,
                                                                          tmp_path: Path) -> None:
    monkeypatch.setattr(platform_cmd, "CHROMIUM_PATH", Path("/nonexistent/no-chromium"))  # short: no line wrap
    result = CliRunner().invoke(app, ["platform", "--browser", "--baton-home", str(tmp_path / "b"),
                                      "--dagster-home", str(tmp_path / "d")])
    assert result.exit_code == 2
    said = _flat(result.output)
    assert "no-chromium" in said and "apt-get install chromium" in said
    assert not (tmp_path / "d").exists()  # nothing was started


def test_a_fleet_needs_a_worker_on_a_browser_pool_for_browser_runs() -> None:
    needed = workers_for_kind(DEFAULT_PLACEMENTS, RunKind.BROWSER)
    assert needed is not None
    assert not any(hosts_kind(p, RunKind.BROWSER) for p in DEFAULT_PLACEMENTS
                   if p.name in worker_placements(DEFAULT_PLACEMENTS, needed - 1))
    assert any(hosts_kind(p, RunKind.BROWSER) for p in DEFAULT_PLACEMENTS
               if p.name in worker_placements(DEFAULT_PLACEMENTS, needed))
    without_pool = tuple(p for p in DEFAULT_PLACEMENTS if not hosts_kind(p, RunKind.BROWSER))
    assert workers_for_kind(without_pool, RunKind.BROWSER) is None


def test_browser_runs_with_too_few_workers_are_refused(tmp_path: Path) -> None:
    if not platform_cmd.CHROMIUM_PATH.exists():
        pytest.fail(f"{platform_cmd.CHROMIUM_PATH} is missing: CI installs it (apt-get install chromium)")
    needed = workers_for_kind(DEFAULT_PLACEMENTS, RunKind.BROWSER)
    assert needed is not None
    result = CliRunner().invoke(app, ["platform", "--browser", "--workers", str(needed - 1),
                                      "--dagster-home", str(tmp_path / "d")])
    assert result.exit_code == 2 and f"--workers {needed} or more" in _flat(result.output)
    assert not (tmp_path / "d").exists()
