"""`ctx.tool(...)` hands agent code the read side of a target only: no raw apply, no fence raising."""

from __future__ import annotations

import pytest

from baton.runtime.tools import read_only_tools
from baton.targets.corpus_service import CorpusClient
from baton.targets.deploy_service import DeployClient


def test_worker_facing_tools_expose_no_apply_and_no_fence_raising() -> None:
    deploy, corpus = DeployClient("http://127.0.0.1:9"), CorpusClient("http://127.0.0.1:9")
    try:
        tools = read_only_tools({"deploy": deploy, "corpus": corpus})
        for tool in tools.values():
            for forbidden in ("apply", "advance_fence", "lookup", "_http", "change_document"):
                with pytest.raises(AttributeError, match="not among them"):
                    getattr(tool, forbidden)
            with pytest.raises(AttributeError, match="read-only"):
                tool._client = deploy  # type: ignore[misc]
        assert tools["deploy"].deployments.__self__ is deploy
        assert tools["corpus"].fetch.__self__ is corpus
        assert "apply" not in dir(tools["deploy"]) and "advance_fence" not in dir(tools["corpus"])
    finally:
        deploy.close()
        corpus.close()
