"""Find every Rule in rules/ (recursively, so none is silently skipped) and select them."""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
from typing import Iterable

from migrator.config import Config
from migrator.rule import Rule


@functools.lru_cache(maxsize=1)
def all_rules() -> tuple[type[Rule], ...]:
    """Every Rule subclass defined in a module under the `rules` package, in code order."""
    import rules

    found: list[type[Rule]] = []
    for info in pkgutil.walk_packages(rules.__path__, prefix="rules."):
        module = importlib.import_module(info.name)
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, Rule) and obj is not Rule and obj.__module__ == module.__name__:
                found.append(obj)
    return tuple(sorted(found, key=lambda r: r.code))


def matches(rule: type[Rule], selectors: Iterable[str]) -> bool:
    """A selector is a code ("AM101"), a code prefix ("AM1", "AM"), "ALL", or a rule name."""
    for sel in selectors:
        s = sel.strip()
        if s.upper() == "ALL" or rule.code.startswith(s.upper()) or s == rule.name:
            return True
    return False


def select(config: Config, codes: Iterable[str] = ()) -> tuple[type[Rule], ...]:
    """The rules a run uses: selected (all by default), minus ignored, for the target."""
    chosen = []
    for rule in all_rules():
        if config.select and not matches(rule, config.select):
            continue
        if config.ignore and matches(rule, config.ignore):
            continue
        if config.target not in rule.targets:
            continue
        chosen.append(rule)
    return tuple(chosen)


def find(code_or_name: str) -> type[Rule] | None:
    for rule in all_rules():
        if rule.code == code_or_name.upper() or rule.name == code_or_name:
            return rule
    return None
