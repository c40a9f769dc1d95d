"""Meta-tests over the rule set: naming, documentation, imports, coverage (STYLE §5)."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
import sys
from pathlib import Path

import pytest

import rules
from migrator.registry import all_rules
from migrator.rule import Rule, Safety
from tests.fixture_cases import FIXTURES

RULES = all_rules()
IDS = [r.code for r in RULES]
ALLOWED_IMPORTS = ("libcst", "migrator.rule", "migrator.analysis", "migrator.cst", "migrator.edits", "__future__")
REQUIRED_HEADINGS = ("## What it does", "## Why is this bad?", "## Example", "Use instead:")


def _pascal(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("-"))


def test_codes_and_names_are_unique_and_well_formed() -> None:
    codes = [r.code for r in RULES]
    names = [r.name for r in RULES]
    assert len(set(codes)) == len(codes)
    assert len(set(names)) == len(names)
    for rule in RULES:
        assert re.fullmatch(r"AM\d{3}", rule.code), rule.code
        assert re.fullmatch(r"[a-z]+(-[a-z0-9]+)*", rule.name), rule.name
        assert not rule.name.startswith(("no-", "avoid-")), rule.name


@pytest.mark.parametrize("rule", RULES, ids=IDS)
def test_module_and_class_follow_the_name(rule: type[Rule]) -> None:
    module = sys.modules[rule.__module__]
    expected = f"am{rule.code[2:]}_{rule.name.replace('-', '_')}"
    assert module.__name__.rsplit(".", 1)[-1] == expected
    assert rule.__name__ == _pascal(rule.name)
    defined = [
        obj for _, obj in inspect.getmembers(module, inspect.isclass)
        if issubclass(obj, Rule) and obj.__module__ == module.__name__
    ]
    assert defined == [rule], "one Rule per module"


@pytest.mark.parametrize("rule", RULES, ids=IDS)
def test_documentation_sections(rule: type[Rule]) -> None:
    doc = inspect.getdoc(rule) or ""
    for heading in REQUIRED_HEADINGS:
        assert heading in doc, f"{rule.code} docstring lacks {heading!r}"
    if rule.safety is Safety.UNSAFE:
        assert "## Fix safety" in doc
    assert rule.message and "\n" not in rule.message


@pytest.mark.parametrize("rule", RULES, ids=IDS)
def test_rule_imports_only_the_allowed_modules(rule: type[Rule]) -> None:
    tree = ast.parse(Path(inspect.getfile(rule)).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        else:
            continue
        for name in names:
            stdlib = name.split(".")[0] in sys.stdlib_module_names
            assert stdlib or name.startswith(ALLOWED_IMPORTS), f"{rule.code} imports {name}"


def test_every_rule_module_is_discovered() -> None:
    modules = [m.name for m in pkgutil.walk_packages(rules.__path__, prefix="rules.")]
    discovered = {r.__module__ for r in RULES}
    for name in modules:
        module = importlib.import_module(name)
        has_rule = any(
            issubclass(obj, Rule) and obj is not Rule and obj.__module__ == name
            for _, obj in inspect.getmembers(module, inspect.isclass)
        )
        if has_rule:
            assert name in discovered
    assert len(discovered) == len(RULES)


def test_every_rule_is_exercised_by_a_fixture_or_example() -> None:
    seen = set()
    for findings in FIXTURES.glob("*/findings.txt"):
        seen.update(re.findall(r"\bAM\d{3}\b", findings.read_text()))
    for rule in RULES:
        assert rule.code in seen or rule.examples, f"{rule.code} is never exercised"
