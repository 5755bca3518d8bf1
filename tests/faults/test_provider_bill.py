"""The scripted model provider writes its own bill as it serves each call, naming the account."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from baton.agents.deploy_agent import build_catalog
from baton.agents.scripted_models import BILL_ENV, model_for


def test_each_served_call_is_one_bill_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bill = tmp_path / "bill.jsonl"
    monkeypatch.setenv(BILL_ENV, str(bill))
    model = model_for("model-v8", account="run-1")
    first = model.plan_deployment("checkout", build_catalog("checkout"))
    model.plan_deployment("checkout", build_catalog("checkout"))
    lines = [json.loads(line) for line in bill.read_text().splitlines()]
    assert [line["account"] for line in lines] == ["run-1", "run-1"]
    assert Decimal(lines[0]["usd"]) == first.charge.model_spend_usd > 0
    assert lines[0]["model"] == "scripted-model-v8" and lines[0]["input_tokens"] == first.input_tokens


def test_no_variable_no_bill(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(BILL_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    model_for("model-v7").plan_deployment("checkout", build_catalog("checkout"))
    assert list(tmp_path.iterdir()) == []
