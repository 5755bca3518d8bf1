"""A few questions to a running Dagster webserver, asked over its GraphQL API with plain HTTP.

Baton imports no Dagster code; the platform's process manager, its tests and
`baton bench dagster` talk to the webserver the way the UI does.
"""

from __future__ import annotations

from typing import Any

import httpx


class GraphQLError(RuntimeError):
    """The webserver answered, with errors; the message carries them."""


def graphql(base_url: str, query: str, variables: dict[str, Any] | None = None, *, timeout_s: float = 30.0) -> Any:
    """POST one query to `<base_url>/graphql` and return its `data`; raises `GraphQLError` on errors."""
    response = httpx.post(f"{base_url.rstrip('/')}/graphql", json={"query": query, "variables": variables or {}},
                          timeout=timeout_s)
    response.raise_for_status()
    body = response.json()
    if body.get("errors"):
        raise GraphQLError("; ".join(str(error.get("message", error)) for error in body["errors"]))
    return body["data"]


def answers(base_url: str) -> bool:
    """True once the webserver answers a GraphQL query (its version)."""
    try:
        return bool(graphql(base_url, "{ version }", timeout_s=5.0).get("version"))
    except (httpx.HTTPError, GraphQLError, ValueError):
        return False


_DAEMONS = "{ instance { daemonHealth { allDaemonStatuses { daemonType healthy required } } } }"


def daemons_healthy(base_url: str, required: tuple[str, ...] = ("SENSOR", "SCHEDULER", "QUEUED_RUN_COORDINATOR")) -> bool:
    """True once the daemon's heartbeats reach the instance for every daemon type in `required`."""
    try:
        statuses = graphql(base_url, _DAEMONS, timeout_s=5.0)["instance"]["daemonHealth"]["allDaemonStatuses"]
    except (httpx.HTTPError, GraphQLError, ValueError, KeyError, TypeError):
        return False
    healthy = {status["daemonType"] for status in statuses if status.get("healthy")}
    return all(kind in healthy for kind in required)


def http_ok(url: str) -> bool:
    """True once `url` answers 200 (Streamlit's `/_stcore/health`, for one)."""
    try:
        return httpx.get(url, timeout=5.0).status_code == 200
    except httpx.HTTPError:
        return False


_RUNS = """
query Runs($filter: RunsFilter, $limit: Int) {
  runsOrError(filter: $filter, limit: $limit) {
    __typename
    ... on Runs { results { runId jobName status tags { key value } creationTime startTime endTime } }
    ... on PythonError { message }
  }
}
"""


def runs(base_url: str, *, job_name: str | None = None, limit: int = 200) -> list[dict[str, Any]]:
    """Dagster runs, newest first, optionally of one job; each with its id, job, status, tags and times."""
    run_filter: dict[str, Any] = {}
    if job_name is not None:
        run_filter["pipelineName"] = job_name
    data = graphql(base_url, _RUNS, {"filter": run_filter, "limit": limit})["runsOrError"]
    if data["__typename"] != "Runs":
        raise GraphQLError(data.get("message", data["__typename"]))
    return list(data["results"])


def tags_of(run: dict[str, Any]) -> dict[str, str]:
    """A run's tags as a dict."""
    return {tag["key"]: tag["value"] for tag in run.get("tags", [])}
