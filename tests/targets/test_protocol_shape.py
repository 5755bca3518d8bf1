"""The HTTP clients fit the gateway's target protocols."""

from __future__ import annotations

from baton.fencing import FenceAware
from baton.gateway import MutationTarget
from baton.targets.corpus_service import CorpusClient
from baton.targets.deploy_service import DeployClient


def test_clients_are_mutation_targets_and_fence_aware() -> None:
    for client in (DeployClient("http://127.0.0.1:9"), CorpusClient("http://127.0.0.1:9")):
        with client:
            assert isinstance(client, MutationTarget) and isinstance(client, FenceAware)
            assert client.name in ("deploy", "corpus")
