"""The placement catalog: where runs may execute and what each place allows.

The defaults span three regions and two providers and differ on purpose:

| name            | region     | provider | accelerator | ceiling         | releases | schemas |
|-----------------|------------|----------|-------------|-----------------|----------|---------|
| local-gpu-eu    | eu-west    | local    | gpu-a100    | EXTERNAL_MUTATE | v7, v8   | 1, 2, 3 |
| cloud-eu        | eu-central | cloudco  | gpu-h100    | EXTERNAL_MUTATE | v7, v8   | 3       |
| cloud-us        | us-east    | cloudco  | none        | EXTERNAL_MUTATE | v8 only  | 3       |
| browser-pool-eu | eu-central | local    | none        | SANDBOX_MUTATE  | v7, v8   | 1, 2, 3 |

`browser-pool-eu` cannot mutate external systems; `cloud-us` runs only v8.
These defaults seed the catalog in Baton's store (`baton.catalog.seed`); the
fleet and its workers read the store's catalog, which changes only through
`baton.catalog.changes` (one event per change).
A provider outage (local: local-gpu-eu + browser-pool-eu) and a region outage
(eu-central: cloud-eu + browser-pool-eu) take out different sets.

A catalog file is JSON: `{"placements": [...]}` (or a bare list), each entry a
Placement record as `dump_placements` writes it. An entry may give
`"supported_releases": ["model-v7", ...]` (catalog names) instead of
`supported_release_ids`; names are resolved to release ids on load.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from baton.catalog.releases import RELEASES, release_named
from baton.models import AuthorityLevel, EnvironmentIdentity, Placement, RunKind

_TOOL_VERSIONS = {"corpus-client": "1.0", "deploy-client": "1.0", "python": "3.11"}


def _placement(
    name: str,
    *,
    region: str,
    provider: str,
    accelerator: str,
    ceiling: AuthorityLevel,
    releases: Sequence[str],
    schemas: Sequence[str],
    verifiers: Sequence[str],
    tools: Sequence[str],
    image: str,
) -> Placement:
    # The gate matches a release's verifier bundle and tool contract by name, so a
    # placement that hosts every part of a catalog release's bundle lists it too.
    verifiers = tuple(verifiers) + _hosted_bundles(verifiers)
    tools = tuple(tools) + _RELEASE_TOOL_CONTRACTS
    tool_versions = {tool: _TOOL_VERSIONS.get(tool, "1.0") for tool in tools}
    return Placement(
        name=name,
        region=region,
        provider=provider,
        accelerator=accelerator,
        authority_ceiling=ceiling,
        supported_release_ids=tuple(release_named(release).release_id for release in releases),
        readable_schema_versions=tuple(schemas),
        verifiers=tuple(verifiers),
        tools=tuple(tools),
        environment=EnvironmentIdentity(
            placement=name, region=region, provider=provider, runtime_image=image, tool_versions=tool_versions
        ),
    )


_VERIFIERS = ("citations-1", "deploy-check-1")
_RELEASE_TOOL_CONTRACTS: tuple[str, ...] = tuple(sorted({release.tool_contract for release in RELEASES.values()}))


def _hosted_bundles(verifiers: Sequence[str]) -> tuple[str, ...]:
    """Verifier bundles of catalog releases whose every part (`a+b`) is among `verifiers`."""
    bundles = {release.verifier_bundle for release in RELEASES.values()}
    return tuple(sorted(b for b in bundles if b not in verifiers and set(b.split("+")) <= set(verifiers)))


DEFAULT_PLACEMENTS: tuple[Placement, ...] = (
    _placement(
        "local-gpu-eu", region="eu-west", provider="local", accelerator="gpu-a100",
        ceiling=AuthorityLevel.EXTERNAL_MUTATE, releases=("model-v7", "model-v8"), schemas=("1", "2", "3"),
        verifiers=_VERIFIERS, tools=("corpus-client", "deploy-client", "python"), image="baton-worker:1.4",
    ),
    _placement(
        "cloud-eu", region="eu-central", provider="cloudco", accelerator="gpu-h100",
        ceiling=AuthorityLevel.EXTERNAL_MUTATE, releases=("model-v7", "model-v8"), schemas=("3",),
        verifiers=_VERIFIERS, tools=("corpus-client", "deploy-client", "python"), image="baton-worker:1.5",
    ),
    _placement(
        "cloud-us", region="us-east", provider="cloudco", accelerator="none",
        ceiling=AuthorityLevel.EXTERNAL_MUTATE, releases=("model-v8",), schemas=("3",),
        verifiers=_VERIFIERS, tools=("corpus-client", "deploy-client", "python"), image="baton-worker:1.5",
    ),
    _placement(
        "browser-pool-eu", region="eu-central", provider="local", accelerator="none",
        ceiling=AuthorityLevel.SANDBOX_MUTATE, releases=("model-v7", "model-v8"), schemas=("1", "2", "3"),
        verifiers=_VERIFIERS, tools=("browser", "corpus-client", "python"), image="baton-browser:2.0",
    ),
)


RUN_KIND_TOOLS: Mapping[RunKind, tuple[str, ...]] = {RunKind.BROWSER: ("browser",)}
"""Tools a placement must host for a run of that kind, beyond its release's tool contract (a browser
run drives a real browser, so only a placement with a browser pool can run it)."""


def tools_needed(kind: RunKind | None) -> tuple[str, ...]:
    """The placement tools a run of `kind` needs (none for a kind that drives no local tool)."""
    return RUN_KIND_TOOLS.get(kind, ()) if kind is not None else ()


def hosts_kind(placement: Placement, kind: RunKind) -> bool:
    """True when `placement` hosts every tool a run of `kind` needs."""
    return set(tools_needed(kind)) <= set(placement.tools)


def _entry(raw: Mapping[str, Any]) -> Placement:
    entry = dict(raw)
    names = entry.pop("supported_releases", None)
    if names is not None:
        if "supported_release_ids" in entry:
            raise ValueError(f"placement {entry.get('name')!r}: give supported_releases or supported_release_ids, not both")
        entry["supported_release_ids"] = [release_named(name).release_id for name in names]
    return Placement.model_validate(entry)


def parse_placements(document: Any) -> tuple[Placement, ...]:
    """Placements from a decoded JSON document (`{"placements": [...]}` or a list)."""
    entries = document.get("placements") if isinstance(document, dict) else document
    if not isinstance(entries, list):
        raise ValueError("a placement catalog is a JSON list or an object with a 'placements' list")
    placements = tuple(_entry(entry) for entry in entries)
    names = [placement.name for placement in placements]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"duplicate placement names: {duplicates}")
    return placements


def load_placements(path: Path | str | None = None) -> tuple[Placement, ...]:
    """The placements in a JSON catalog file, or the defaults when `path` is None."""
    if path is None:
        return DEFAULT_PLACEMENTS
    return parse_placements(json.loads(Path(path).read_text(encoding="utf-8")))


def dump_placements(placements: Iterable[Placement], path: Path | str) -> None:
    """Write a catalog file that `load_placements` reads back to equal records."""
    document = {"placements": [placement.model_dump(mode="json") for placement in placements]}
    Path(path).write_text(json.dumps(document, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def placement_named(placements: Iterable[Placement], name: str) -> Placement:
    """The placement called `name`; KeyError names the known ones."""
    catalog = {placement.name: placement for placement in placements}
    try:
        return catalog[name]
    except KeyError:
        raise KeyError(f"unknown placement {name!r}; known: {sorted(catalog)}") from None
