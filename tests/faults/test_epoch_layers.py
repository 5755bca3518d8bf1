"""Each epoch layer alone stops a stale request that holds a valid capability (the other two switched off).

The companion of `test_ablations`: there each layer, switched off with its two
companions, lets the stale write land (oracle `stale_owner`); here the layer
left on holds, judged from the deploy service's own request log. With only the
target's fence left, that log shows the stale request arriving after the fence
announcement and refused as `fenced`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from baton.faults.cases_epochs import EPOCH_LAYERS
from baton.faults.matrix import run_matrix

CASE = "stale-capability-after-move"


def _log(root: Path) -> list[dict[str, object]]:
    path = root / f"{CASE}-baton" / "home" / "targets" / "deploy" / "requests.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("kept", EPOCH_LAYERS)
def test_the_layer_left_on_holds(kept: str, tmp_path: Path) -> None:
    others = tuple(layer for layer in EPOCH_LAYERS if layer != kept)
    result = run_matrix(0, cases=[CASE], strategies=("baton",), ablations=others, root=tmp_path).results[0]
    assert result.error is None and result.violated == [], (result.answers, result.notes)
    lines = _log(tmp_path)
    applied = [line for line in lines if line["result"] == "applied"]
    assert len(applied) == 1  # the new owner's deployment, once
    announced = max(int(line["epoch"]) for line in lines if line["result"] == "fence_advanced")
    stale = [line for line in lines if line["result"] not in ("applied", "fence_advanced")]
    if kept == "target-fence":  # the stale request got past Baton's checks; the target's own fence refused it
        assert [line["result"] for line in stale] == ["fenced"] and int(stale[0]["epoch"]) < announced
    else:  # stopped before the target
        assert stale == []
