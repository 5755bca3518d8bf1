"""`baton faults` refuses bad input with a clear message and a non-zero status, before starting anything."""

from __future__ import annotations

from typer.testing import CliRunner

from baton.cli import app


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["faults", *args])
    return result.exit_code, result.output + (result.stderr if result.stderr_bytes else "")


def test_unknown_case_is_refused() -> None:
    code, output = _run("--case", "no-such-case")
    assert code == 2 and "no-such-case" in output and "killed-after-seal" in output


def test_unknown_strategy_is_refused() -> None:
    code, output = _run("--strategy", "optimistic")
    assert code == 2 and "optimistic" in output


def test_a_non_postgres_store_url_is_refused() -> None:
    code, output = _run("--store-url", "mysql://x/y")
    assert code == 2 and "postgresql://" in output


def test_unknown_ablation_is_refused() -> None:
    code, output = _run("--ablate", "seatbelts")
    assert code == 2 and "seatbelts" in output and "gateway-epoch" in output
