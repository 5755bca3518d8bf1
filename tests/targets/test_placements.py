"""The placement catalog: defaults with deliberate differences, JSON round trip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from baton.agents.releases import RELEASES
from baton.models import AuthorityLevel
from baton.placements import DEFAULT_PLACEMENTS, dump_placements, load_placements, placement_named


def test_the_defaults_differ_where_handoffs_care() -> None:
    placements = load_placements(None)
    assert placements == DEFAULT_PLACEMENTS and len(placements) >= 4
    assert len({p.provider for p in placements}) >= 2 and 2 <= len({p.region for p in placements}) <= 3
    assert any(not p.authority_ceiling.allows(AuthorityLevel.EXTERNAL_MUTATE) for p in placements)
    v7, v8 = RELEASES["model-v7"].release_id, RELEASES["model-v8"].release_id
    assert any(p.supported_release_ids == (v8,) for p in placements)
    assert any(v7 in p.supported_release_ids for p in placements)
    assert {p.readable_schema_versions for p in placements} >= {("1", "2", "3"), ("3",)}
    for placement in placements:
        assert placement.environment.placement == placement.name
        assert placement.environment.region == placement.region and placement.environment.provider == placement.provider
        assert placement.verifiers and placement.tools
    assert len({p.environment.environment_id for p in placements}) == len(placements)


def test_a_catalog_round_trips_through_json(tmp_path: Path) -> None:
    path = tmp_path / "placements.json"
    dump_placements(DEFAULT_PLACEMENTS, path)
    assert load_placements(path) == DEFAULT_PLACEMENTS
    assert load_placements(str(path))[0].placement_ref == DEFAULT_PLACEMENTS[0].placement_ref


def test_a_hand_written_catalog_may_name_releases(tmp_path: Path) -> None:
    entry = DEFAULT_PLACEMENTS[0].model_dump(mode="json")
    del entry["supported_release_ids"]
    entry["supported_releases"] = ["model-v8"]
    path = tmp_path / "placements.json"
    path.write_text(json.dumps([entry]))
    (placement,) = load_placements(path)
    assert placement.supported_release_ids == (RELEASES["model-v8"].release_id,)
    assert placement_named([placement], placement.name) == placement
    with pytest.raises(KeyError):
        placement_named([placement], "nowhere")


def test_bad_catalogs_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "placements.json"
    entry = DEFAULT_PLACEMENTS[0].model_dump(mode="json")
    path.write_text(json.dumps({"placements": [entry, entry]}))
    with pytest.raises(ValueError, match="duplicate"):
        load_placements(path)
    path.write_text(json.dumps({"placements": [{**entry, "supported_releases": ["model-v9"]}]}))
    with pytest.raises((KeyError, ValueError)):
        load_placements(path)
    path.write_text(json.dumps({"placements": [{**entry, "surprise": 1}]}))
    with pytest.raises(ValueError):
        load_placements(path)
