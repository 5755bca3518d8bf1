"""Deterministic scripted models standing in for real model releases.

A `ScriptedModel` is a pure function of its release, its style and its input:
the same evidence always yields the same bytes and the same token counts.
Two styles exist, one per catalog release, and they propose different
candidates from identical evidence, so a behavioral migration (v7 -> v8) is
visible in what the run produces:

- `model-v7` (SOURCE_ORDER): one claim per document, in source order,
  phrased "<source> states that ..."; deploys the newest *stable* build whose
  canary passed, with a rolling strategy.
- `model-v8` (RANKED): a summary line, then claims newest-source-first in a
  terse phrasing; deploys the newest build whose canary passed, pre-releases
  included, with a canary strategy.

Token accounting: a token is a run of word characters or one punctuation
character (`count_tokens`). Input tokens count the prompt the model would be
sent, output tokens the text it returns; each call charges one model call and
`input * in_price + output * out_price` dollars (per million tokens, Decimal).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum

from pydantic import Field

from baton import clock
from baton.catalog.releases import RELEASES, release_name_of
from baton.agents.report_format import render_claim
from baton.errors import BatonError
from baton.identity import canonical_json
from baton.models import BehavioralRelease, BudgetUsage, Observation
from baton.models.base import Record, Ref

__all__ = [
    "RELEASES",
    "BuildInfo",
    "ModelPricing",
    "ModelReply",
    "ModelStyle",
    "NoDeployableBuildError",
    "ScriptedModel",
    "count_tokens",
    "model_for",
]

_TOKEN = re.compile(r"\w+|[^\w\s]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_MILLION = Decimal(1_000_000)
BILL_ENV = "BATON_MODEL_BILL"


class NoDeployableBuildError(BatonError):
    """The evidence offers no build this model is willing to deploy."""


class ModelStyle(StrEnum):
    """The behavior a scripted model follows."""

    SOURCE_ORDER = "source-order"
    RANKED = "ranked"


@dataclass(frozen=True)
class ModelPricing:
    """Dollars per million input and output tokens."""

    input_per_million: Decimal
    output_per_million: Decimal

    def cost(self, input_tokens: int, output_tokens: int) -> Decimal:
        return (input_tokens * self.input_per_million + output_tokens * self.output_per_million) / _MILLION


@dataclass(frozen=True)
class ModelReply:
    """What one model call produced and what it cost."""

    output: bytes
    input_tokens: int
    output_tokens: int
    charge: BudgetUsage

    @property
    def text(self) -> str:
        return self.output.decode("utf-8")


class BuildInfo(Record):
    """One deployable build as the deploy agent observed it."""

    version: str = Field(min_length=1, pattern=r"^[0-9]+(\.[0-9]+)*(-[A-Za-z0-9.]+)?$")
    artifact_hash: Ref
    canary_passed: bool

    @property
    def is_prerelease(self) -> bool:
        return "-" in self.version


def count_tokens(text: str) -> int:
    """Deterministic token count: word runs plus single punctuation characters."""
    return len(_TOKEN.findall(text))


def _version_key(version: str) -> tuple[tuple[int, ...], int, str]:
    core, _, suffix = version.partition("-")
    numbers = tuple(int(part) for part in core.split("."))
    # A release sorts after its own pre-releases.
    return numbers, 0 if suffix else 1, suffix


def _first_sentence(text: str) -> str:
    stripped = " ".join(text.split())
    return _SENTENCE_END.split(stripped, maxsplit=1)[0] if stripped else ""


def _short_source(source: str) -> str:
    return source.rstrip("/").rsplit("/", 1)[-1]


@dataclass(frozen=True)
class ScriptedModel:
    """A deterministic stand-in for one behavioral release."""

    release: BehavioralRelease
    style: ModelStyle
    pricing: ModelPricing = ModelPricing(Decimal("1.00"), Decimal("3.00"))
    account: str = ""
    """Who is billed for the calls (a run id); the provider's bill names it on every line."""

    @property
    def name(self) -> str:
        return release_name_of(self.release.release_id) or self.release.model

    def _reply(self, prompt: str, output: str) -> ModelReply:
        input_tokens, output_tokens = count_tokens(prompt), count_tokens(output)
        charge = BudgetUsage(model_calls=1, model_spend_usd=self.pricing.cost(input_tokens, output_tokens))
        record_bill(self.account, self.release.model, input_tokens, output_tokens, charge.model_spend_usd,
                    release_id=self.release.release_id)
        return ModelReply(output.encode("utf-8"), input_tokens, output_tokens, charge)

    def draft_report(self, observations: Sequence[tuple[Observation, bytes]], *, topic: str = "findings") -> ModelReply:
        """A report whose claims each cite the observation they come from.

        `observations` pairs each recorded Observation with the document bytes
        it hashed; the citation is the Observation record's ref.
        """
        prompt = "\n".join(
            [f"Write a cited report on: {topic}"]
            + [f"[{obs.record_ref()}] {obs.source}: {text.decode('utf-8')}" for obs, text in observations]
        )
        items = [(obs, _first_sentence(text.decode("utf-8"))) for obs, text in observations]
        items = [(obs, sentence) for obs, sentence in items if sentence]
        if self.style is ModelStyle.SOURCE_ORDER:
            ordered = sorted(items, key=lambda item: (item[0].source, item[0].observed_at))
            lines = [f"# Report: {topic}"]
            for obs, sentence in ordered:
                statement = f"{obs.source} states that {sentence[0].lower()}{sentence[1:]}"
                lines.append(render_claim(statement, (obs.record_ref(),)))
        else:
            ordered = sorted(items, key=lambda item: (item[0].source, item[0].observed_at), reverse=True)
            lines = [f"# {topic.capitalize()}", f"Summary: {len(ordered)} sources reviewed."]
            for obs, sentence in ordered:
                statement = f"{sentence.rstrip('.!?')} ({_short_source(obs.source)})."
                lines.append(render_claim(statement, (obs.record_ref(),)))
        return self._reply(prompt, "\n".join(lines) + "\n")

    def plan_deployment(self, service: str, evidence: Sequence[BuildInfo]) -> ModelReply:
        """A deployment spec (canonical JSON bytes) choosing one build of `service`.

        The spec's keys are exactly the deploy service's request body:
        service, version, artifact_hash and strategy.
        """
        prompt = "\n".join(
            [f"Plan a deployment of {service} from these builds:"]
            + [json.dumps(build.model_dump(mode="json"), sort_keys=True) for build in evidence]
        )
        eligible = [build for build in evidence if build.canary_passed]
        if self.style is ModelStyle.SOURCE_ORDER:
            eligible = [build for build in eligible if not build.is_prerelease]
            strategy = "rolling"
        else:
            strategy = "canary"
        if not eligible:
            raise NoDeployableBuildError(f"{self.name}: no build of {service} is eligible among {len(evidence)}")
        chosen = max(eligible, key=lambda build: _version_key(build.version))
        spec = {"service": service, "version": chosen.version, "artifact_hash": chosen.artifact_hash, "strategy": strategy}
        return self._reply(prompt, canonical_json(spec).decode("utf-8"))


_STYLES: dict[str, tuple[ModelStyle, ModelPricing]] = {
    "scripted-model-v7": (ModelStyle.SOURCE_ORDER, ModelPricing(Decimal("0.50"), Decimal("1.50"))),
    "scripted-model-v8": (ModelStyle.RANKED, ModelPricing(Decimal("3.00"), Decimal("15.00"))),
}


def record_bill(account: str, model: str, input_tokens: int, output_tokens: int, usd: Decimal, *,
                release_id: str = "") -> None:
    """The provider's own bill: one JSON line per served call, fsynced, in the file `BATON_MODEL_BILL` names.

    It is written as the call is served, before the caller sees the reply, so a
    caller that dies right after still shows on the bill. No variable, no bill.
    `release_id` names the release manifest that served the call (the provider's own record of it).
    """
    path = os.environ.get(BILL_ENV)
    if not path:
        return
    shared = getattr(clock.current(), "db_now", None)  # the provider's clock, not a skewed caller's (simulation)
    at = shared() if shared is not None else clock.now()
    line = json.dumps({"at": at.isoformat(), "account": account, "model": model,
                       "release_id": release_id, "input_tokens": input_tokens, "output_tokens": output_tokens,
                       "usd": str(usd)},
                      sort_keys=True) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)


def model_for(release: BehavioralRelease | str, *, account: str = "") -> ScriptedModel:
    """The scripted model implementing a release (a manifest or a catalog name), billing `account`."""
    manifest = RELEASES[release] if isinstance(release, str) else release
    try:
        style, pricing = _STYLES[manifest.model]
    except KeyError:
        raise KeyError(f"no scripted model implements {manifest.model!r}; known: {sorted(_STYLES)}") from None
    return ScriptedModel(release=manifest, style=style, pricing=pricing, account=account)
