"""Every Accelerator attribute the migrator can write exists in both runtimes, with the
same meaning: our `runtime.Accelerator` and Hugging Face's `accelerate.Accelerator`.

The attributes are collected, not listed by hand, so a new rule is covered as it lands:
from what the rules write (`attr_call(x, "name")`, f"{accelerator}.name", `attr=Name("name")`,
`accelerator.name` anywhere in their source: messages, explanations, examples), from the
calls in their examples, and from what every fixture's expected.py has that its input.py
had not. For each one:
the same kind (method or value) in both; for methods, our named parameters are
Accelerate's (same names, same positions), and every call the migrator writes binds to both
signatures. Constructor keywords the rules write (`Accelerator(mixed_precision=...)`) too.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
from collections import defaultdict
from functools import cache

import pytest

from tests.equivalence import runner
from tests.fixture_cases import FIXTURES

RULES = runner.REPO / "rules"
SCRIPT = runner.REPO / "tests" / "equivalence" / "scripts" / "describe_accelerators.py"

_WRITTEN = [
    re.compile(r"attr_call\(\s*[\w.]+\s*,\s*\"(\w+)\""),
    re.compile(r"\{(?:accelerator|reach)\}\.(\w+)"),
    re.compile(r"attr=cst\.Name\(\"(\w+)\"\)"),
    re.compile(r"(?<!torch\.)\baccelerator\.(\w+)"),  # in messages, explanations and examples (not torch.accelerator)
]
# Methods rules write on tensors and modules (`x.to(accelerator.device)`), which the
# source patterns above cannot tell from the Accelerator's own.
_TENSOR_METHODS = {"to", "cuda", "cpu"}
_ACCELERATOR_NAME = re.compile(r"(?:^|\.)(?<!torch\.)accelerator$")  # not torch.accelerator


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _is_accelerator(node: ast.AST) -> bool:
    return bool(_ACCELERATOR_NAME.search(_dotted(node)))


class _Uses(ast.NodeVisitor):
    """accelerator.<attr> uses in code: call shapes (positional count, keywords), reads."""

    def __init__(self) -> None:
        self.calls: dict[str, set[tuple[int, bool, tuple[str, ...]]]] = defaultdict(set)
        self.attrs: set[str] = set()
        self.init_keywords: set[str] = set()

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and _is_accelerator(func.value):
            starred = any(isinstance(a, ast.Starred) for a in node.args)
            kws = tuple(sorted(k.arg for k in node.keywords if k.arg))
            self.calls[func.attr].add((len(node.args), starred, kws))
        if _dotted(func).split(".")[-1] == "Accelerator":
            self.init_keywords.update(k.arg for k in node.keywords if k.arg)
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if _is_accelerator(node.value):
            self.attrs.add(node.attr)
        self.generic_visit(node)


@cache
def emitted() -> _Uses:
    """What the migrator writes, from rule sources, rule examples and fixture snapshots."""
    from migrator.registry import all_rules

    uses = _Uses()
    sources = [rule.examples for rule in all_rules()]
    for examples in sources:
        for example in examples:
            if example.after and not example.path.endswith(".ipynb"):
                uses.visit(ast.parse(example.after))
    for expected in sorted(FIXTURES.glob("*/expected.py")):
        written, already = _Uses(), _Uses()  # what the snapshot has that its input had not
        try:
            written.visit(ast.parse(expected.read_text()))
            already.visit(ast.parse((expected.parent / "input.py").read_text()))
        except (SyntaxError, FileNotFoundError):
            continue
        for attr, shapes in written.calls.items():
            uses.calls[attr].update(shapes - already.calls.get(attr, set()))
        uses.attrs.update(written.attrs - already.attrs)
        uses.init_keywords.update(written.init_keywords - already.init_keywords)
    for path in sorted(RULES.glob("*.py")):
        text = path.read_text()
        for pattern in _WRITTEN:
            uses.attrs.update(set(pattern.findall(text)) - _TENSOR_METHODS)
    uses.attrs.update(uses.calls)
    return uses


@cache
def described() -> dict:
    names = sorted(emitted().attrs)
    run = runner.run(runner.python_cmd(SCRIPT, names), runner.REPO, timeout=180)
    assert run.returncode == 0, run.output[-3000:]
    return json.loads(run.output.strip().splitlines()[-1])


def _signature(params: list) -> inspect.Signature:
    kinds = inspect.Parameter
    return inspect.Signature(
        [kinds(name, getattr(kinds, kind), default=None if default is not None else kinds.empty) for name, kind, default in params]
    )


def test_the_collection_finds_what_the_rules_write():
    attrs = emitted().attrs
    for expected in ("prepare", "backward", "clip_grad_norm_", "device"):
        assert expected in attrs, f"{expected} not collected: the collector misses how rules write it"
    assert len(attrs) >= 10, sorted(attrs)


@pytest.mark.timeout(300)
def test_both_runtimes_have_every_emitted_attribute_with_the_same_meaning():
    pytest.importorskip("accelerate")
    ours, theirs = described()["runtime"], described()["accelerate"]
    uses = emitted()
    problems = []
    for name in sorted(uses.attrs):
        a, b = ours[name], theirs[name]
        if "missing" in (a["kind"], b["kind"]):
            problems.append(f"{name}: runtime {a['kind']}, accelerate {b['kind']}")
            continue
        if a["kind"] != b["kind"]:
            problems.append(f"{name}: a {a['kind']} in runtime, a {b['kind']} in accelerate")
            continue
        if a["kind"] == "value":
            if name in uses.calls:
                problems.append(f"{name}: the migrator calls it, but it is a value")
            continue
        problems += _compare_methods(name, a["params"], b["params"], uses.calls.get(name, set()))
    problems += _compare_init(ours["__init__"], theirs["__init__"], uses.init_keywords)
    assert not problems, "Accelerator parity:\n  " + "\n  ".join(problems)


def _compare_methods(name: str, ours: list, theirs: list, calls: set) -> list[str]:
    problems = []
    their_positional = [p[0] for p in theirs if p[1] in ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD")]
    their_names = {p[0]: p for p in theirs}
    their_var_kw = any(p[1] == "VAR_KEYWORD" for p in theirs)
    positional = 0
    for pname, kind, default in ours:
        if kind in ("VAR_POSITIONAL", "VAR_KEYWORD"):
            continue
        if kind in ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD"):
            at = their_positional[positional] if positional < len(their_positional) else None
            if at != pname:
                problems.append(f"{name}(): our parameter {positional} is `{pname}`, Accelerate's is `{at}`")
            positional += 1
        elif pname not in their_names and not their_var_kw:
            problems.append(f"{name}(): Accelerate has no keyword `{pname}`")
        theirs_p = their_names.get(pname)
        if theirs_p and default is not None and theirs_p[2] is not None and not _same_default(default, theirs_p[2]):
            problems.append(f"{name}(): `{pname}` defaults to {default} here, {theirs_p[2]} in Accelerate")
    for npos, starred, keywords in sorted(calls):
        for label, params in (("runtime", ours), ("accelerate", theirs)):
            sig = _signature(params)
            try:
                if starred:
                    sig.bind_partial(*[None] * npos, **dict.fromkeys(keywords))
                else:
                    sig.bind(*[None] * npos, **dict.fromkeys(keywords))
            except TypeError as error:
                problems.append(f"{name}(): a call the migrator writes ({npos} positional, keywords {list(keywords)}) does not bind in {label}: {error}")
    return problems


def _same_default(a: str, b: str) -> bool:
    try:
        return ast.literal_eval(a) == ast.literal_eval(b)
    except (ValueError, SyntaxError):
        return a == b


def _compare_init(ours: list, theirs: list, keywords: set) -> list[str]:
    names = {label: {p[0] for p in params} for label, params in (("runtime", ours), ("accelerate", theirs))}
    return [
        f"Accelerator({keyword}=...): written by the migrator, unknown to {label}"
        for keyword in sorted(keywords)
        for label, known in names.items()
        if keyword not in known
    ]
