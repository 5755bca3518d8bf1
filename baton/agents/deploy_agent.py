"""The deploy agent: gather build evidence, plan, verify the spec, get approval, deploy, check.

Written only against the SDK and the deploy client the worker lends it as the
`deploy` tool (used for reads: the postcondition). The deployment itself goes
through `ctx.perform`, i.e. the gateway, with an idempotency key bound to the
spec's hash; when the deploy service commits and then times out, the SDK
reconciles the UNKNOWN outcome against the service before anything else.

Build evidence comes from the build registry, here a deterministic catalog per
service (`build_catalog`), observed like any other source (`builds://<service>`).
"""

from __future__ import annotations

import json

from baton.agents.scripted_models import BuildInfo, NoDeployableBuildError, model_for
from baton.agents.verifiers import check_deployment_spec
from baton.identity import canonical_json, sha256_ref
from baton.lifecycle import TERMINAL
from baton.models import AuthorityLevel, Boundary, Observation
from baton.runtime.sdk import RunContext
from baton.targets.capability_guard import TargetPolicy
from baton.targets.deploy_service import DeployClient

DEPLOY = "deploy"
DEPLOY_POLICY = TargetPolicy(DEPLOY)
"""What the deploy service checks a deployment's capability for (the fleet, the fault matrix and the simulation)."""
BUILDS_PREFIX = "builds://"
FRESHNESS_S = 300.0
_BEFORE_COMMIT = (
    Boundary.GENERATING,
    Boundary.CANDIDATE_READY,
    Boundary.VERIFIED,
    Boundary.AWAITING_AUTHORITY,
    Boundary.AUTHORIZED,
)


def build_catalog(service: str) -> list[BuildInfo]:
    """The builds the registry offers for `service` (deterministic).

    The newest stable build failed its canary, a release candidate passed: the
    two scripted releases choose differently (v7 the older stable, v8 the rc).
    """
    versions = (("1.4.2", True), ("1.5.0-rc.1", True), ("1.5.0", False))
    return [
        BuildInfo(version=v, artifact_hash=sha256_ref(f"{service}@{v}".encode()), canary_passed=ok)
        for v, ok in versions
    ]


def _catalog_bytes(service: str) -> bytes:
    return canonical_json(list(build_catalog(service)))


def _builds_of(content: bytes) -> list[BuildInfo]:
    return [BuildInfo.model_validate(item) for item in json.loads(content)]


def _revalidate_builds(ctx: RunContext) -> None:
    for observation, _mode in ctx.needs_revalidation():
        if observation.source.startswith(BUILDS_PREFIX):
            ctx.revalidate(observation, _catalog_bytes(str(observation.query.get("service"))))


def _evidence(ctx: RunContext, service: str) -> tuple[Observation, list[BuildInfo]]:
    query = {"service": service}
    seen = ctx.read(BUILDS_PREFIX + service, query)
    if seen is None:
        ctx.observe(BUILDS_PREFIX + service, query, _catalog_bytes(service), freshness_s=FRESHNESS_S)
        seen = ctx.read(BUILDS_PREFIX + service, query)
    assert seen is not None
    return seen.observation, _builds_of(seen.content)


def _plan(ctx: RunContext, service: str) -> None:
    observation, builds = _evidence(ctx, service)
    ctx.derive("eligible-builds", ", ".join(b.version for b in builds if b.canary_passed) + " passed canary",
               from_=[observation])
    model = model_for(ctx.release, account=ctx.run_id)
    try:
        reply = ctx.call_model(lambda: model.plan_deployment(service, builds),
                               f"{model.name} planned a deployment of {service}", cost=lambda r: r.charge)
    except NoDeployableBuildError as exc:
        ctx.fail(str(exc))
    spec = json.loads(reply.output)
    ctx.propose(reply.output, kind="deployment-spec", summary=f"{spec['version']} ({spec['strategy']}) by {model.name}",
                inputs=[observation])


def _verify(ctx: RunContext, service: str) -> None:
    _observation, builds = _evidence(ctx, service)
    ctx.verify(lambda spec: check_deployment_spec(spec, builds), inputs={"service": service, "builds": len(builds)})


def _postcondition(ctx: RunContext, deploy: DeployClient) -> None:
    spec = json.loads(ctx.candidate_bytes())
    mine = [d for d in deploy.deployments() if d.get("run_id") == ctx.run_id]
    ctx.observe("deploy://deployments", {"run_id": ctx.run_id}, canonical_json(mine), freshness_s=FRESHNESS_S)
    matching = [d for d in mine if d.get("artifact_hash") == spec["artifact_hash"] and d.get("version") == spec["version"]]
    ctx.confirm_postcondition(
        len(mine) == 1 and len(matching) == 1,
        f"{len(mine)} deployment(s) recorded by the deploy service for this run, {len(matching)} of {spec['version']}",
    )


def deploy_agent(ctx: RunContext) -> None:
    """Run (or resume) a deploy run until it ends."""
    deploy: DeployClient = ctx.tool("deploy")
    service = str(ctx.task.get("service", "checkout"))
    while ctx.boundary not in TERMINAL:
        boundary = ctx.boundary
        if boundary in _BEFORE_COMMIT:
            _revalidate_builds(ctx)
            if ctx.boundary is not boundary:
                continue
        if boundary is Boundary.GENERATING:
            _plan(ctx, service)
        elif boundary is Boundary.CANDIDATE_READY:
            candidate = ctx.candidate
            assert candidate is not None
            if candidate.produced_by_release != ctx.release.release_id:
                ctx.withdraw_candidate("the run now runs on another release: plan again under it")
                continue
            _verify(ctx, service)
        elif boundary in (Boundary.VERIFIED, Boundary.AWAITING_AUTHORITY):
            ctx.request_approval(DEPLOY, level=AuthorityLevel.EXTERNAL_MUTATE)
        elif boundary is Boundary.AUTHORIZED:
            candidate = ctx.candidate
            assert candidate is not None
            ctx.perform(DEPLOY, "deploy", json.loads(ctx.candidate_bytes()),
                        key=f"{ctx.run_id}:deploy:{candidate.artifact_hash[7:23]}",
                        level=AuthorityLevel.EXTERNAL_MUTATE)
        elif boundary is Boundary.COMMITTED:
            _postcondition(ctx, deploy)
        else:
            ctx.fail(f"deploy agent cannot continue from {boundary.value}")
