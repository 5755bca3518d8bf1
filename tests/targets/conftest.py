"""Fixtures that run the target services as real subprocesses on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from baton.targets.corpus_service import CorpusClient
from baton.targets.deploy_service import DeployClient
from baton.targets.service_process import ServiceProcess


@pytest.fixture(scope="module")
def deploy_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    """A deploy service that never stalls, shared by one test module."""
    with ServiceProcess.deploy(tmp_path_factory.mktemp("deploy")) as service:
        yield service


@pytest.fixture
def deploy_client(deploy_service: ServiceProcess) -> Iterator[DeployClient]:
    with DeployClient(deploy_service.url, timeout_s=5.0) as client:
        yield client


@pytest.fixture(scope="module")
def corpus_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    """A corpus service without drift, shared by one test module."""
    with ServiceProcess.corpus(tmp_path_factory.mktemp("corpus")) as service:
        yield service


@pytest.fixture
def corpus_client(corpus_service: ServiceProcess) -> Iterator[CorpusClient]:
    with CorpusClient(corpus_service.url, timeout_s=5.0) as client:
        yield client
