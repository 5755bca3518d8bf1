"""LangGraph's own conformance suite (langgraph-checkpoint-conformance) against BatonSaver."""

from __future__ import annotations

import asyncio

from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import BASE_CAPABILITIES, EXTENDED_CAPABILITIES

from baton.integrations.langgraph import BatonSaver
from baton.store.factory import open_store


def test_conformance_full(store_url: str) -> None:
    store = open_store(store_url)

    @checkpointer_test(name=f"BatonSaver[{store.backend}]")
    async def baton_saver():
        yield BatonSaver(store)

    try:
        report = asyncio.run(validate(baton_saver))
    finally:
        store.close()
    report.print_report()
    failures = {cap: result.failures for cap, result in report.results.items() if result.failures}
    assert not failures, failures
    base = [cap.value for cap in BASE_CAPABILITIES if report.results[cap.value].passed]
    extended = [cap.value for cap in EXTENDED_CAPABILITIES if report.results[cap.value].passed]
    assert len(base) == 5 and len(extended) == 3, (base, extended)
    assert report.conformance_level() == "FULL"
