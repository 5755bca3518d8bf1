"""A target logs every fence announcement in its own request log, before the requests that follow it."""

from __future__ import annotations

from pathlib import Path

import pytest

from baton.errors import FencedTokenError
from baton.fencing import FencingToken
from baton.durable_files import read_lines
from baton.targets.mutation_log import FENCE_ADVANCED, MutationLog


def test_an_announcement_is_logged_and_a_stale_request_after_it_is_refused(tmp_path: Path) -> None:
    log = MutationLog(tmp_path, "effects.jsonl")
    assert log.advance_fence(FencingToken("r", 3)) == 3
    assert log.advance_fence(FencingToken("r", 2)) == 3  # never lowers the mark; still logged as announced
    with pytest.raises(FencedTokenError):
        log.apply("op-stale", "k", FencingToken("r", 2), {"x": 1})
    lines = read_lines(tmp_path / "requests.jsonl")
    assert [(line["epoch"], line["result"]) for line in lines] == [(3, FENCE_ADVANCED), (2, FENCE_ADVANCED), (2, "fenced")]
    assert lines[1]["detail"] == "mark now 3" and lines[0]["operation_id"] == "" and lines[0]["run_id"] == "r"
