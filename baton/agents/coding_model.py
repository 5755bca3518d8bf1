"""A scripted patch model: deterministic candidate edits for a failing test, and its provider's call record.

The model is shown the Python sources of a worktree and the ids of the
failing tests. It localizes the fault by name (`test_clamp_high` -> function
`clamp`, suffix `high`), ranks the lines of that function (a branch body
under a condition mentioning the suffix first, then the condition, then the
rest in source order) and proposes single-line mutations of them: drop an
off-by-one term, flip it, swap an arithmetic or comparison operator, return
another parameter. The two catalog releases rank differently: `model-v7`
(SOURCE_ORDER) as above, `model-v8` (RANKED) returns first, bottom-up, each line's
mutations in reverse order.

Same input, same proposals, same token counts: the search it feeds can be
compared node by node across a handoff.

`PatchModelProvider` is how a worker lends the model to agents (`ctx.tool("patch_model")`):
each call is appended to the provider's own record, `calls.jsonl` in its
directory, before the reply is returned: `seq`, `at`, `run_id`, `epoch`,
`node_id`, `release_id`, `model`, `input_hash`, `output_hash`,
`proposals` (their descriptions), `input_tokens`, `output_tokens`,
`cost_usd`. That file is the bill, kept outside the run.
"""

from __future__ import annotations

import ast
import json
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from baton.agents.scripted_models import ModelReply, ModelStyle, count_tokens, model_for
from baton.identity import canonical_json, sha256_ref
from baton.models import BehavioralRelease, BudgetUsage
from baton.durable_files import append_line, read_lines, utc_now_text

CALLS_FILE = "calls.jsonl"
_OFF_BY_ONE = re.compile(r"\s*([-+])\s*1\b")
_ARITHMETIC = ((" / ", " * "), (" * ", " / "), (" + ", " - "), (" - ", " + "))
_COMPARISONS = (("<=", "<"), (">=", ">"), ("<", "<="), (">", ">="), ("<", ">"), (">", "<"))


@dataclass(frozen=True)
class Edit:
    """Replace line `line_no` (1-based) of `path`, whose text is `old`, by `new`."""

    path: str
    line_no: int
    old: str
    new: str
    description: str

    def as_json(self) -> dict[str, Any]:
        return {"path": self.path, "line_no": self.line_no, "old": self.old, "new": self.new,
                "description": self.description}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Edit:
        return cls(str(data["path"]), int(data["line_no"]), str(data["old"]), str(data["new"]),
                   str(data["description"]))

    def apply(self, text: str) -> str:
        """`text` with this edit made; ValueError if the line is not what the edit expects."""
        lines = text.splitlines(keepends=True)
        if not 1 <= self.line_no <= len(lines) or lines[self.line_no - 1].rstrip("\n") != self.old:
            raise ValueError(f"{self.path}:{self.line_no} is not {self.old!r}")
        lines[self.line_no - 1] = self.new + "\n"
        return "".join(lines)


@dataclass(frozen=True)
class PatchReply:
    """What one model call proposed and what it cost."""

    edits: tuple[Edit, ...]
    reply: ModelReply
    focus: str


def _function_of(test_id: str) -> tuple[str, str]:
    """(`clamp`, `high`) for `tests/test_stats.py::test_clamp_high`."""
    name = test_id.rsplit("::", 1)[-1].split("[", 1)[0].removeprefix("test_")
    head, _, suffix = name.partition("_")
    return head, suffix


def _locate(files: Mapping[str, str], function: str) -> tuple[str, ast.FunctionDef] | None:
    for path, text in sorted(files.items()):
        if path.startswith("tests/") or "/test_" in f"/{path}":
            continue
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name == function:
                return path, node
    return None


def _mutations(line: str, params: Sequence[str]) -> list[tuple[str, str]]:
    """(new line, description) for every single mutation of `line`, in a fixed order."""
    found: list[tuple[str, str]] = []
    for match in _OFF_BY_ONE.finditer(line):
        found.append((line[: match.start()] + line[match.end():], f"drop '{match.group(0).strip()}'"))
        flipped = "+" if match.group(1) == "-" else "-"
        found.append((line[: match.start()] + f" {flipped} 1" + line[match.end():],
                      f"'{match.group(1)} 1' -> '{flipped} 1'"))
    for old, new in _ARITHMETIC:
        if old in line:
            found.append((line.replace(old, new, 1), f"'{old.strip()}' -> '{new.strip()}'"))
    stripped = line.strip()
    if stripped.startswith("if "):
        for old, new in _COMPARISONS:
            pattern = re.compile(rf"(?<![<>=!]){re.escape(old)}(?![<>=])")
            if pattern.search(line):
                found.append((pattern.sub(new, line, count=1), f"'{old}' -> '{new}'"))
    if stripped.startswith("return ") and stripped.removeprefix("return ") in params:
        current = stripped.removeprefix("return ")
        indent = line[: len(line) - len(line.lstrip())]
        for other in params:
            if other != current:
                found.append((f"{indent}return {other}", f"return {other} instead of {current}"))
    unique: dict[str, str] = {}
    for new_line, description in found:
        if new_line != line:
            unique.setdefault(new_line, description)
    return list(unique.items())


def _ranked_lines(text: str, node: ast.FunctionDef, suffix: str, style: ModelStyle) -> list[int]:
    lines = text.splitlines()
    body = [n for n in node.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
    numbers: list[int] = []
    for statement in body:
        for child in ast.walk(statement):
            if isinstance(child, ast.stmt) and child.lineno not in numbers:
                numbers.append(child.lineno)
    numbers.sort()
    if style is ModelStyle.RANKED:
        returns = [n for n in numbers if lines[n - 1].strip().startswith("return")]
        return sorted(returns, reverse=True) + [n for n in numbers if n not in returns]
    first: list[int] = []
    for number in numbers:
        line = lines[number - 1].strip()
        if suffix and line.startswith("if ") and re.search(rf"\b{re.escape(suffix)}\b", line):
            first += [n for n in numbers if n > number][:1] + [number]
    return list(dict.fromkeys(first + numbers))


class ScriptedPatchModel:
    """The patch proposer of one behavioral release."""

    def __init__(self, release: BehavioralRelease | str) -> None:
        self._model = model_for(release)
        self.release = self._model.release
        self.name = self._model.name

    def propose(self, files: Mapping[str, str], failing: Sequence[str], *, k: int) -> PatchReply:
        """Up to `k` single-line edits aimed at the first failing test whose function can be found."""
        prompt = "\n".join(
            ["Propose edits that make these tests pass:", *failing]
            + [f"--- {path}\n{text}" for path, text in sorted(files.items())]
        )
        edits: list[Edit] = []
        focus = ""
        for test_id in failing:
            function, suffix = _function_of(test_id)
            located = _locate(files, function)
            if located is None:
                continue
            path, node = located
            focus = f"{test_id} -> {path}:{function}"
            text = files[path]
            params = [arg.arg for arg in node.args.args]
            for number in _ranked_lines(text, node, suffix, self._model.style):
                line = text.splitlines()[number - 1]
                mutations = _mutations(line, params)
                if self._model.style is ModelStyle.RANKED:
                    mutations.reverse()
                for new_line, description in mutations:
                    edits.append(Edit(path, number, line, new_line, f"{path}:{number} {description}"))
            break
        chosen = tuple(edits[:k])
        output = json.dumps([edit.as_json() for edit in chosen], sort_keys=True)
        input_tokens, output_tokens = count_tokens(prompt), count_tokens(output)
        cost = self._model.pricing.cost(input_tokens, output_tokens)
        reply = ModelReply(output.encode("utf-8"), input_tokens, output_tokens,
                           BudgetUsage(model_calls=1, model_spend_usd=cost))
        return PatchReply(chosen, reply, focus)


def patch_model_dir(home: Path | str) -> Path:
    """Where the patch model provider of a Baton home keeps its record: `BATON_HOME/providers/patch-model/`."""
    return Path(home) / "providers" / "patch-model"


class PatchModelProvider:
    """Serves `ScriptedPatchModel` calls and bills each one in its own record file."""

    def __init__(self, directory: Path | str) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / CALLS_FILE
        self._lock = threading.Lock()

    def propose(
        self, release: BehavioralRelease | str, files: Mapping[str, str], failing: Sequence[str], *, k: int,
        run_id: str, epoch: int, node_id: str,
    ) -> PatchReply:
        """One billed model call (recorded before the reply is handed back)."""
        model = ScriptedPatchModel(release)
        reply = model.propose(files, failing, k=k)
        with self._lock:
            seq = len(read_lines(self.path)) + 1
            append_line(self.path, {
                "seq": seq, "at": utc_now_text(), "run_id": run_id, "epoch": epoch, "node_id": node_id,
                "release_id": model.release.release_id, "model": model.name,
                "input_hash": sha256_ref(canonical_json({"files": dict(files), "failing": list(failing), "k": k})),
                "output_hash": sha256_ref(reply.reply.output), "proposals": [e.description for e in reply.edits],
                "input_tokens": reply.reply.input_tokens, "output_tokens": reply.reply.output_tokens,
                "cost_usd": str(reply.reply.charge.model_spend_usd),
            })
        return reply

    def calls(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """The provider's record (of one run, or all)."""
        return [line for line in read_lines(self.path) if run_id is None or line["run_id"] == run_id]


def read_calls(directory: Path | str, run_id: str | None = None) -> list[dict[str, Any]]:
    """The provider's record read straight from its file."""
    return [line for line in read_lines(Path(directory) / CALLS_FILE) if run_id is None or line["run_id"] == run_id]


__all__ = ["Edit", "PatchModelProvider", "PatchReply", "ScriptedPatchModel", "patch_model_dir", "read_calls"]
