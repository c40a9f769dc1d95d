"""Where the Accelerator lives and which code can reach it, by which expression.

Rules that write `accelerator.<something>` ask here first: the answer is `accelerator`,
`self.accelerator`, or None where writing it would raise NameError (module-level code that
runs before `main()` creates it, methods of a class that does not own it). Nothing here
edits the tree.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from migrator.analysis.names import LIBRARY_ROOTS

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
    line: int  # document order of the creating statement (analysis.order), not a line number
    call: cst.Call | None  # the existing `Accelerator(...)` call, None while only planned
    statement: cst.CSTNode | None  # the statement that creates it, None while only planned


# The function a run of several files appends below an engine while it is migrated: its
# callers, with an Accelerator that stands for the one their own file creates
# (migrator/project/stub.py). Options given to that stand-in would be lost with it.
CALLERS_STUB = "_accel_migrate_callers"

_HOMES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_INJECTED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def accelerator_home(analysis: "ScriptAnalysis") -> AcceleratorHome | None:
    """The existing Accelerator's home, else the planned one, else None (computed once per
    analysis)."""
    if analysis not in _HOMES:
        _HOMES[analysis] = _home(analysis)
    return _HOMES[analysis]


def _home(analysis: "ScriptAnalysis") -> AcceleratorHome | None:
    facts = analysis.facts
    names = analysis.accelerator_names
    if names:
        binding = next(b for b in facts.bindings if b.name == names[0])
        owner = facts.method_of.get(id(binding.scope)) if names[0].startswith("self.") else None
        call = binding.value if isinstance(binding.value, cst.Call) else None
        line = analysis.order(binding.statement)
        return AcceleratorHome(names[0], binding.scope, owner, line, call, binding.statement)
    setup = analysis.setup
    if setup is None:
        return None
    owner_node = setup.block.owner
    owner = facts.method_of.get(id(owner_node)) if isinstance(owner_node, cst.FunctionDef) else None
    line = analysis.order(setup.before)
    return AcceleratorHome(analysis.accelerator, setup.block.scope, owner, line, None, None)


def accelerator_at(analysis: "ScriptAnalysis", node: cst.CSTNode) -> str | None:
    """The expression that reaches the Accelerator from `node`, or None.

    - In the scope that creates it: its name, from the creating statement on.
    - A module-level Accelerator: every function sees it.
    - One created in a function (`main()`): other module-level functions get it as a
      keyword-only parameter (AM002 threads it through their calls), so its name; methods
      and module-level code cannot see it.
    - `self.accelerator` created in a method: the methods of that class.
    - A class that trains with objects it receives, built in the function that creates
      the Accelerator (`Trainer(model, optimizer, loader)` in `main()`): its methods, as
      `self.accelerator`, which AM002 passes to `__init__` (see `injected_classes`).
    """
    home = accelerator_home(analysis)
    if home is None:
        return None
    scope = analysis.scope_of(node)
    facts = analysis.facts
    owner = facts.method_of.get(id(scope)) if isinstance(scope, cst.FunctionDef) else None
    if owner is not None and home.owner_class is None and id(owner) in injected_classes(analysis):
        return f"self.{home.name}"
    if home.owner_class is not None:
        if isinstance(scope, cst.FunctionDef) and facts.method_of.get(id(scope)) is home.owner_class:
            if scope is home.scope:
                return home.name if analysis.order(node) >= home.line else None
            return home.name
        return None
    if scope is home.scope:
        return home.name if analysis.order(node) >= home.line else None
    if not isinstance(scope, cst.FunctionDef):
        return None
    if isinstance(home.scope, cst.Module):
        return home.name
    if id(scope) in facts.method_of:
        return None
    if _nested_in(facts, scope, home.scope):
        return home.name
    if facts.scope_of_function.get(id(scope)) is analysis.module and threadable(analysis, scope):
        return home.name
    return None


def unreachable_note(analysis: "ScriptAnalysis", node: cst.CSTNode) -> str:
    """Why a finding at `node` was left as written when no Accelerator reaches it."""
    scope = analysis.scope_of(node)
    if isinstance(scope, cst.FunctionDef):
        where = f"`{scope.name.value}`"
        if id(scope) not in analysis.facts.method_of and not threadable(analysis, scope):
            name = scope.name.value
            if not any(c.func == name for c in analysis.facts.calls):
                why = "nothing in this file calls it, so its callers elsewhere have to pass one in"
            else:
                why = "it is also called from module level or used as a value, so it cannot be passed in"
            return f" (left as written: no Accelerator reaches {where}; {why})"
        return f" (left as written: no Accelerator reaches {where}; pass one in by hand)"
    return " (left as written: no Accelerator exists at module level here)"


def threadable(analysis: "ScriptAnalysis", function: cst.FunctionDef, _seen: frozenset[int] = frozenset()) -> bool:
    """Can AM002 pass the Accelerator into this module-level function as a keyword-only
    parameter, updating every call? Not for methods, names defined twice, `**kwargs`,
    functions used as values, functions with no caller in this file, or functions called
    from code that has no Accelerator to pass: module level, or a function the Accelerator does not reach either (a `main()`
    that calls `stylize()` while `train()` creates the Accelerator)."""
    facts = analysis.facts
    name = function.name.value
    calls = [c for c in facts.calls if isinstance(c.node.func, cst.Name) and c.node.func.value == name]
    call_ids = {id(c.node.func) for c in calls}
    return (
        id(function) not in facts.method_of
        and not isinstance(function.params.star_kwarg, cst.Param)
        and len(facts.functions.get(name, [])) == 1
        and not any(load.name == name and id(load.node) not in call_ids for load in facts.loads)
        and bool(calls)  # with no caller here, whoever calls it (another file) would not pass it
        and not any(isinstance(c.scope, cst.Module) for c in calls)
        and all(_caller_can_pass(analysis, c, _seen | {id(function)}) for c in calls)
    )


def _caller_can_pass(analysis: "ScriptAnalysis", call, seen: frozenset[int]) -> bool:
    """The scope of `call` holds the Accelerator (after it is made) or gets it passed in."""
    home = accelerator_home(analysis)
    if home is None or isinstance(home.scope, cst.Module) or home.owner_class is not None:
        return True  # a module-level Accelerator reaches everything; methods are AM002's other path
    scope = call.scope
    if scope is home.scope:
        return analysis.order(call.node) >= home.line
    if not isinstance(scope, cst.FunctionDef) or id(scope) in seen:
        return False
    facts = analysis.facts
    if _nested_in(facts, scope, home.scope):
        return True
    return facts.scope_of_function.get(id(scope)) is analysis.module and threadable(analysis, scope, seen)


def _nested_in(facts, function: cst.FunctionDef, outer: cst.CSTNode) -> bool:
    current = facts.scope_of_function.get(id(function))
    while isinstance(current, cst.FunctionDef):
        if current is outer:
            return True
        current = facts.scope_of_function.get(id(current))
    return False


@dataclass(frozen=True, eq=False)
class InjectedClass:
    """A class that receives the Accelerator: `__init__(..., *, accelerator)` stores it as
    `self.accelerator`, and every `calls` site passes `accelerator=accelerator`."""

    node: cst.ClassDef
    init: cst.FunctionDef
    calls: tuple[cst.Call, ...]


def injected_classes(analysis: "ScriptAnalysis") -> dict[int, InjectedClass]:
    """id(ClassDef) → how the Accelerator gets into it. A class qualifies when it trains or
    evaluates (a backward call or a loop over a dataloader in a method) or writes a
    checkpoint with torch.save (an early stopper keeping the best weights), defines its own
    `__init__`, has no subclass in this file, and every instantiation in the file is in
    the function that creates the Accelerator, after it."""
    if analysis not in _INJECTED:
        _INJECTED[analysis] = _injected(analysis)
    return _INJECTED[analysis]


def _injected(analysis: "ScriptAnalysis") -> dict[int, InjectedClass]:
    home = accelerator_home(analysis)
    if home is None or home.owner_class is not None or not isinstance(home.scope, cst.FunctionDef):
        return {}
    facts = analysis.facts
    out: dict[int, InjectedClass] = {}
    for name, cls in facts.classes.items():
        init = next((s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"), None)
        if init is None or not _trains(analysis, cls) or _subclassed(facts, name):
            continue
        calls = [c for c in facts.calls if isinstance(c.node.func, cst.Name) and c.node.func.value == name]
        loads = [l for l in facts.loads if l.name == name]
        if not calls or len(loads) != len(calls):
            continue  # the class is passed around as a value: its callers are unknown
        if all(c.scope is home.scope and analysis.order(c.node) >= home.line for c in calls):
            out[id(cls)] = InjectedClass(cls, init, tuple(c.node for c in calls))
    return out


def _trains(analysis: "ScriptAnalysis", cls: cst.ClassDef) -> bool:
    from migrator.analysis.roles import Role

    facts = analysis.facts
    methods = {id(s) for s in cls.body.body if isinstance(s, cst.FunctionDef)}
    for c in facts.calls:
        func = c.node.func
        if id(c.scope) in methods and isinstance(func, cst.Attribute) and func.attr.value == "backward":
            return True
    if any(id(c.scope) in methods and (c.qualified == "torch.save" or c.func == f"self.{analysis.accelerator}.save") for c in facts.calls):
        return True  # it writes checkpoints: once, on the main process, through the Accelerator
    return any(
        id(loop.scope) in methods and analysis.roles.of(loop.iter_name) is Role.DATALOADER for loop in facts.loops
    )


def _subclassed(facts, name: str) -> bool:
    from migrator.analysis.names import dotted_name

    return any(dotted_name(base.value) == name for cls in facts.classes.values() for base in cls.bases)


def called_by_other_files(analysis: "ScriptAnalysis", function: cst.FunctionDef, names: frozenset[str]) -> bool:
    """`function` runs although no code of its file calls it: another file of the run calls
    it, constructs its class (`Trainer(config)` in main.py runs `Trainer.__init__`), or
    calls it on an instance (`solver.train()`). `names`: the file's top-level names other
    files call, and `Class.method` for the methods they call (Config.project_called and
    project_entered), and `Class.*` for a class a class of another file builds on. An
    instance built there is called as well: its `forward` or `__call__` runs (retinanet's
    `self.focalLoss = losses.FocalLoss()`, called in the model's forward)."""
    owner = analysis.facts.method_of.get(id(function))
    if owner is None:
        return function.name.value in names
    name, cls = function.name.value, owner.name.value
    built = name in ("__init__", "forward", "__call__") and cls in names
    # built there on a base class of the project, whose loop calls what it overrides (`self._train_epoch(epoch)`)
    overriding = cls in names and _project_base(analysis, owner)
    return f"{cls}.{name}" in names or built or overriding or f"{cls}.*" in names


def _project_base(analysis: "ScriptAnalysis", owner: cst.ClassDef) -> bool:
    """The class builds on a class imported from a module of the project (not a library)."""
    for base in owner.bases:
        qualified = analysis.imports.qualify(base.value) or ""
        root = qualified.split(".")[0]
        if qualified and root not in LIBRARY_ROOTS and "." in qualified:
            return True
    return False


# how the findings on code other files call, in a file given no Accelerator, begin their note
RUN_CALLS_IT = "left as written: other files of the run call this code on every process"
# ... and how they go on: no Accelerator to ask, so one process is picked by the launcher's rank
NO_ACCELERATOR_YET = f"{RUN_CALLS_IT}, and this file gets no Accelerator, which may not exist yet when it runs"
ONE_PROCESS = "(for example when `int(os.environ.get('RANK', 0)) == 0`)"
# why a launched script that drives a model object of another file is left as written
DRIVEN_LATER = "this script gets no Accelerator until it is migrated with the model object it drives"


def run_by_other_files(analysis: "ScriptAnalysis", node: cst.CSTNode, names: frozenset[str], unpassed: tuple[str, ...] = ()) -> bool:
    """`node` sits in a function other files of the run call (`called_by_other_files`), or
    in one this file calls from such a function (st-gcn's `IO.gpu()`, called by
    `Processor.__init__`), or in a function nested in such a one (a closure it returns or
    hands on): a file given no Accelerator whose code still runs on every launched
    process. Code at module level, under `if __name__ == "__main__":`, and in a block that
    tests an optional parameter no call of the run passes (`unpassed`: `in_unpassed_branch`)
    does not count."""
    if not names or in_unpassed_branch(analysis, node, unpassed):
        return False
    branches = analysis.branches
    function = branches.function_of(node)
    seen: set[int] = set()
    todo = [function] if function is not None else []
    while todo:
        function = todo.pop()
        if id(function) in seen:
            continue
        seen.add(id(function))
        if called_by_other_files(analysis, function, names):
            return True
        todo.extend(f for call in branches.callers(function) if (f := branches.function_of(call)) is not None)
        outer = branches.function_of(function)
        if outer is not None and id(function) not in analysis.facts.method_of:
            todo.append(outer)  # a closure its function hands out (envs.py's `_thunk`, called by the vector env)
    return False


def in_unpassed_branch(analysis: "ScriptAnalysis", node: cst.CSTNode, unpassed: tuple[str, ...]) -> bool:
    """`node` sits in the body of `if p is not None:` (`if p != None:`, `if p:`) in a
    function whose optional parameter `p` no call of the run passes (Config.project_unpassed,
    `function.parameter`): in this run the block never runs."""
    if not unpassed:
        return False
    function = analysis.branches.function_of(node)
    if function is None or analysis.facts.method_of.get(id(function)) is not None:
        return False
    skipped = {u.split(".", 1)[1] for u in unpassed if u.split(".", 1)[0] == function.name.value}
    child, parent = node, analysis.parent(node)
    while parent is not None and parent is not function:
        if isinstance(parent, cst.If) and child is parent.body and _tests_given(parent.test) in skipped:
            return True
        child, parent = parent, analysis.parent(parent)
    return False


def _tests_given(test: cst.BaseExpression) -> str | None:
    """`p` of `p is not None`, `p != None` or `p` alone."""
    if isinstance(test, cst.Name):
        return test.value
    if isinstance(test, cst.Comparison) and isinstance(test.left, cst.Name) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        if isinstance(target.operator, (cst.IsNot, cst.NotEqual)) and isinstance(target.comparator, cst.Name) and target.comparator.value == "None":
            return test.left.value
    return None
