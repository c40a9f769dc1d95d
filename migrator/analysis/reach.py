"""Where the Accelerator lives and which code can reach it, by which expression.

Rules that write `accelerator.<something>` ask here first: the answer is `accelerator`,
`self.accelerator`, or None where writing it would raise NameError (module-level code that
runs before `main()` creates it, methods of a class that does not own it). Nothing here
edits the tree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

if TYPE_CHECKING:
    from migrator.analysis import ScriptAnalysis


@dataclass(frozen=True, eq=False)
class AcceleratorHome:
    """The scope that creates the Accelerator (or will: the setup plan), the class whose
    methods share it as `self.accelerator` (None for a plain name), and the first line
    from which it exists in that scope."""

    name: str
    scope: cst.CSTNode
    owner_class: cst.ClassDef | None
    line: int
    call: cst.Call | None  # the existing `Accelerator(...)` call, None while only planned
    statement: cst.CSTNode | None  # the statement that creates it, None while only planned


def accelerator_home(analysis: "ScriptAnalysis") -> AcceleratorHome | None:
    """The existing Accelerator's home, else the planned one, else None."""
    facts = analysis.facts
    names = analysis.accelerator_names
    if names:
        binding = next(b for b in facts.bindings if b.name == names[0])
        owner = facts.method_of.get(id(binding.scope)) if names[0].startswith("self.") else None
        call = binding.value if isinstance(binding.value, cst.Call) else None
        line = analysis.position(binding.statement).start.line
        return AcceleratorHome(names[0], binding.scope, owner, line, call, binding.statement)
    setup = analysis.setup
    if setup is None:
        return None
    owner_node = setup.block.owner
    owner = facts.method_of.get(id(owner_node)) if isinstance(owner_node, cst.FunctionDef) else None
    line = analysis.position(setup.before).start.line
    return AcceleratorHome(analysis.accelerator, setup.block.scope, owner, line, None, None)


def accelerator_at(analysis: "ScriptAnalysis", node: cst.CSTNode) -> str | None:
    """The expression that reaches the Accelerator from `node`, or None.

    - In the scope that creates it: its name, from the creating statement on.
    - A module-level Accelerator: every function sees it.
    - One created in a function (`main()`): other module-level functions get it as a
      keyword-only parameter (AM002 threads it through their calls), so its name; methods
      and module-level code cannot see it.
    - `self.accelerator` created in a method: the methods of that class.
    """
    home = accelerator_home(analysis)
    if home is None:
        return None
    scope = analysis.scope_of(node)
    facts = analysis.facts
    if home.owner_class is not None:
        if isinstance(scope, cst.FunctionDef) and facts.method_of.get(id(scope)) is home.owner_class:
            if scope is home.scope:
                return home.name if analysis.position(node).start.line >= home.line else None
            return home.name
        return None
    if scope is home.scope:
        return home.name if analysis.position(node).start.line >= home.line else None
    if not isinstance(scope, cst.FunctionDef):
        return None
    if isinstance(home.scope, cst.Module):
        return home.name
    if id(scope) in facts.method_of:
        return None
    if _nested_in(facts, scope, home.scope) or facts.scope_of_function.get(id(scope)) is analysis.module:
        return home.name
    return None


def _nested_in(facts, function: cst.FunctionDef, outer: cst.CSTNode) -> bool:
    current = facts.scope_of_function.get(id(function))
    while isinstance(current, cst.FunctionDef):
        if current is outer:
            return True
        current = facts.scope_of_function.get(id(current))
    return False
