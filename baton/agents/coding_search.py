"""The coding agent's beam search, as plain state transitions over a checkpointable record.

The whole search lives in two pieces that the checkpoint carries:

- a `SearchState` (sec. 9): every node with its lineage (`parent_id`), visit
  count, score, verification status, pruning reason and cancellation, the
  remaining frontier (nodes awaiting expansion, in order), the expansions used
  and whether the search was cancelled;
- `BeamBook.info`: per node, what a new owner needs to rebuild it exactly:
  depth, the diff against the base commit, the edit that produced it, the
  release that proposed it and its test counts; plus the beam's settings,
  its current level, status and solution.

The search is level by level. The frontier's nodes are expanded one at a
time (a model call proposes children); each new child is scored by one
sandbox pytest run; when the level has no node left to expand or score,
`select` keeps the best `width` children as the next frontier and prunes the
rest with their rank, or stops at the best child that passes every test.
Every step is a small change to the record, so a handoff between any two
steps resumes the same search: same frontier, same nodes, same budget.

A node is scored once (`visits` goes 0 -> 1) and expanded at most once
(`visits` 1 -> 2). Nodes whose patch repeats an existing one are pruned on
creation without a test run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from baton.agents.coding_workspace import make_patch
from baton.identity import sha256_ref
from baton.models import SearchNode, SearchState, VerificationStatus

ROOT = "n0"
SEARCHING, SOLVED, EXHAUSTED = "searching", "solved", "exhausted"

Action = Literal["score", "expand", "select", "done"]


@dataclass(frozen=True)
class BeamConfig:
    """Beam width, proposals per expansion, depth and expansion limits."""

    width: int = 2
    proposals: int = 3
    max_depth: int = 3
    max_expansions: int = 8

    def __post_init__(self) -> None:
        for name in ("width", "proposals", "max_depth", "max_expansions"):
            if getattr(self, name) < 1:
                raise ValueError(f"beam {name} must be at least 1, not {getattr(self, name)}")

    @classmethod
    def from_task(cls, task: Mapping[str, Any]) -> BeamConfig:
        """The beam settings of a task input (`beam_width`, `proposals`, `max_depth`, `max_expansions`)."""
        try:
            return cls(int(task.get("beam_width", 2)), int(task.get("proposals", 3)),
                       int(task.get("max_depth", 3)), int(task.get("max_expansions", 8)))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"invalid beam settings in the task: {exc}") from None

    def as_json(self) -> dict[str, int]:
        return {"width": self.width, "proposals": self.proposals, "max_depth": self.max_depth,
                "max_expansions": self.max_expansions}


class BeamBook:
    """A beam search's `SearchState` and node info, with the rules that change them."""

    def __init__(self, state: SearchState, info: Mapping[str, Any]) -> None:
        self.state = state
        self.nodes: dict[str, dict[str, Any]] = {k: dict(v) for k, v in dict(info.get("nodes", {})).items()}
        self.meta: dict[str, Any] = dict(info.get("meta", {}))
        known = {node.node_id for node in state.nodes}
        if known != set(self.nodes):
            raise ValueError(f"search info names nodes {sorted(set(self.nodes) ^ known)} the search state does not")

    # -- construction and export --------------------------------------------------------------

    @classmethod
    def start(cls, config: BeamConfig, base_commit: str) -> BeamBook:
        """A new search: the root node (no patch, not yet scored) awaiting its score."""
        root = SearchNode(node_id=ROOT)
        book = cls(SearchState(nodes=(root,)), {
            "nodes": {ROOT: {"depth": 0, "diff": "", "edit": None, "proposed_by": None, "tests": None}},
            "meta": {"config": config.as_json(), "level": 0, "status": SEARCHING, "solution": None,
                     "base_commit": base_commit, "reason": None},
        })
        return book

    def info(self) -> dict[str, Any]:
        """The JSON the agent keeps beside the `SearchState`."""
        return {"nodes": self.nodes, "meta": self.meta}

    @property
    def config(self) -> BeamConfig:
        return BeamConfig(**self.meta["config"])

    @property
    def status(self) -> str:
        return str(self.meta["status"])

    @property
    def solution(self) -> str | None:
        value = self.meta.get("solution")
        return None if value is None else str(value)

    def node(self, node_id: str) -> SearchNode:
        for node in self.state.nodes:
            if node.node_id == node_id:
                return node
        raise KeyError(f"no search node {node_id!r}")

    def diff(self, node_id: str) -> str:
        return str(self.nodes[node_id]["diff"])

    def depth(self, node_id: str) -> int:
        return int(self.nodes[node_id]["depth"])

    def _replace(self, node: SearchNode) -> None:
        self.state = self.state.model_copy(
            update={"nodes": tuple(node if n.node_id == node.node_id else n for n in self.state.nodes)})
        self.state = SearchState.model_validate(self.state.model_dump())

    def _set(self, **changes: Any) -> None:
        self.state = SearchState.model_validate({**self.state.model_dump(), **changes})

    # -- what to do next ------------------------------------------------------------------------

    def unscored(self) -> list[str]:
        """Live nodes not yet scored, in creation order."""
        return [n.node_id for n in self.state.nodes if n.visits == 0 and n.pruned_reason is None and not n.cancelled]

    def next_action(self) -> tuple[Action, str | None]:
        """Score an unscored node, else expand the frontier's first node, else select; done when ended."""
        if self.status != SEARCHING:
            return "done", None
        waiting = self.unscored()
        if waiting:
            return "score", waiting[0]
        if self.state.frontier:
            return "expand", self.state.frontier[0]
        return "select", None

    # -- transitions ----------------------------------------------------------------------------

    def record_score(self, node_id: str, *, passed: int, failed: int, errors: int, failing: Sequence[str],
                     all_passed: bool, output_ref: str) -> None:
        """The node's sandbox test run: one visit, its score and verification status."""
        node = self.node(node_id)
        if node.visits != 0:
            raise ValueError(f"node {node_id} was already scored")
        total = passed + failed + errors
        score = 0.0 if total == 0 else round(passed / total, 6)
        status = VerificationStatus.PASSED if all_passed else VerificationStatus.FAILED
        self._replace(node.model_copy(update={"visits": 1, "score": score, "verification": status}))
        self.nodes[node_id]["tests"] = {"passed": passed, "failed": failed, "errors": errors,
                                        "failing": list(failing), "output_ref": output_ref}
        if node_id == ROOT:
            if all_passed:
                self._finish(EXHAUSTED, "the base commit already passes every test: nothing to fix")
            else:
                self._set(frontier=[ROOT])

    def record_expansion(self, node_id: str, children: Sequence[tuple[dict[str, Any], str | None]], *,
                         proposed_by: str, base_commit: str) -> list[str]:
        """Expand `node_id` with the proposed children (`(edit, diff)`; diff None if the edit did not apply).

        A child repeating an existing patch, or whose edit did not apply, is
        pruned at once. Returns the new node ids.
        """
        node = self.node(node_id)
        if node_id not in self.state.frontier:
            raise ValueError(f"node {node_id} is not on the frontier")
        seen = {self.nodes[n]["diff"]: n for n in self.nodes}
        created: list[SearchNode] = []
        ids = []
        next_index = len(self.state.nodes)
        for edit, diff in children:
            child_id = f"n{next_index}"
            next_index += 1
            reason = None
            if diff is None:
                reason = f"edit does not apply: {edit.get('description')}"
                diff = ""
            elif diff in seen:
                reason = f"same patch as {seen[diff]}"
            else:
                seen[diff] = child_id
            ref = sha256_ref(make_patch(base_commit, diff.encode("utf-8"))) if diff and reason is None else None
            created.append(SearchNode(node_id=child_id, parent_id=node_id, candidate_ref=ref, pruned_reason=reason))
            self.nodes[child_id] = {"depth": self.depth(node_id) + 1, "diff": diff, "edit": edit,
                                    "proposed_by": proposed_by, "tests": None}
            ids.append(child_id)
        expanded = node.model_copy(update={"visits": node.visits + 1})
        nodes = tuple(expanded if n.node_id == node_id else n for n in self.state.nodes) + tuple(created)
        self._set(nodes=[n.model_dump() for n in nodes],
                  frontier=[n for n in self.state.frontier if n != node_id],
                  expansions_used=self.state.expansions_used + 1)
        return ids

    def select(self) -> None:
        """End the level: stop at the best passing child, or keep the best `width` as the next frontier."""
        config = self.config
        level = int(self.meta["level"])
        children = [n for n in self.state.nodes
                    if self.depth(n.node_id) == level + 1 and n.pruned_reason is None and not n.cancelled]
        ranked = sorted(children, key=lambda n: (-n.score, len(self.diff(n.node_id)), int(n.node_id[1:])))
        passing = [n for n in ranked if n.verification is VerificationStatus.PASSED]
        if passing:
            best = passing[0]
            for other in ranked:
                if other.node_id != best.node_id:
                    self._replace(other.model_copy(update={"pruned_reason": f"not chosen: {best.node_id} passes every test"}))
            self.meta["solution"] = best.node_id
            self._finish(SOLVED, f"{best.node_id} passes every test")
            return
        if not ranked:
            self._finish(EXHAUSTED, f"level {level + 1} produced no live candidate")
            return
        if level + 1 >= config.max_depth:
            for other in ranked:
                self._replace(other.model_copy(update={"pruned_reason": f"depth limit {config.max_depth} reached"}))
            self._finish(EXHAUSTED, f"no passing patch within depth {config.max_depth}")
            return
        keep = ranked[: config.width]
        for rank, other in enumerate(ranked[config.width:], start=config.width + 1):
            self._replace(other.model_copy(
                update={"pruned_reason": f"outside the beam: rank {rank} of {len(ranked)} (width {config.width})"}))
        self.meta["level"] = level + 1
        self._set(frontier=[n.node_id for n in keep])

    def cancel(self, reason: str) -> None:
        """Stop searching (budget spent, run ending): the frontier and unscored nodes are cancelled, not lost."""
        for node_id in list(self.state.frontier) + self.unscored():
            self._replace(self.node(node_id).model_copy(update={"cancelled": True}))
        self._finish(EXHAUSTED, reason, cancelled=True)

    def _finish(self, status: str, reason: str, *, cancelled: bool = False) -> None:
        self.meta["status"] = status
        self.meta["reason"] = reason
        self._set(frontier=[] if status == SOLVED or cancelled else list(self.state.frontier),
                  cancelled=cancelled or self.state.cancelled)
