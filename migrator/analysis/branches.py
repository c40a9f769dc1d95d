"""Which code only some processes run, and which calls every process must reach.

A collective (a barrier, a gather, DDP's all-reduce inside backward) returns only once every
process has called it; one that sits under `if accelerator.is_main_process:` waits for peers
that never come. This module recognises rank tests, the branches they guard and collective
calls; rules decide what to report. Nothing here edits the tree, and nothing is computed for
a node until a rule asks about it (most files have no rank branch at all).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import libcst as cst

from migrator.analysis.collect import Facts
from migrator.analysis.names import ImportTable, dotted_name

if TYPE_CHECKING:
    from migrator.analysis import ScriptAnalysis

Parent = Callable[[cst.CSTNode], "cst.CSTNode | None"]


class Audience(enum.Enum):
    """Who runs a piece of code when a script runs on N processes."""

    MAIN = "the main process"
    OTHERS = "the processes other than the main one"

    def negated(self) -> "Audience":
        return Audience.OTHERS if self is Audience.MAIN else Audience.MAIN


@dataclass(frozen=True, eq=False)
class RankBranch:
    """Code that only `audience` runs, because of `guard` (an `if`, an early `return` guard,
    or an `@accelerator.on_main_process` function)."""

    guard: cst.CSTNode
    test: str
    audience: Audience
    kind: str = "if"  # "if" (its body), "else", "guard" (code after an early exit), "decorator"
    jump: str = "return"  # for a guard: the statement that leaves (return, continue, ...)

    def describe(self) -> str:
        """Where the code sits, for messages: "under `if rank == 0:`"."""
        if self.kind == "else":
            return f"in the else of `if {self.test}:`"
        if self.kind == "guard":
            return f"after `if {self.test}: {self.jump}`"
        if self.kind == "decorator":
            return f"in a function decorated `{self.test}`"
        return f"under `if {self.test}:`"


@dataclass(frozen=True, eq=False)
class Collective:
    """A call every process must make: `name` is how messages show it."""

    call: cst.Call
    name: str


# Attribute or function names that are true on the main process only.
_MAIN_FLAGS = {
    "is_main_process", "is_local_main_process", "is_world_process_zero",
    "is_local_process_zero", "is_master", "is_main", "is_rank_zero", "is_global_zero",
    # hand-written flags seen in real scripts (nanoGPT's `master_process`, 3D-ResNets' `opt.is_master_node`)
    "master_process", "is_master_process", "is_master_node", "is_main_rank", "is_rank0", "is_rank_0",
}
# Names (last dotted segment) and functions that hold the process's rank.
_RANK_NAMES = {"rank", "local_rank", "global_rank", "world_rank", "dist_rank", "process_index", "local_process_index"}
_RANK_FUNCTIONS = {"get_rank", "get_local_rank", "get_global_rank", "get_ordinal", "get_process_index"}
_RANK_ENV = {"RANK", "LOCAL_RANK"}
_MAIN_DECORATORS = {"on_main_process", "on_local_main_process"}

ACCELERATOR_COLLECTIVES = frozenset({
    "wait_for_everyone", "gather", "gather_for_metrics", "reduce", "pad_across_processes",
    "save_state", "load_state", "save_model", "get_state_dict", "prepare", "main_process_first",
})
_DIST_COLLECTIVES = {
    "barrier", "monitored_barrier", "all_reduce", "all_gather", "all_gather_object",
    "all_gather_into_tensor", "broadcast", "broadcast_object_list", "reduce", "gather",
    "gather_object", "scatter", "scatter_object_list", "reduce_scatter", "reduce_scatter_tensor",
    "all_to_all",
}
_ACCELERATE_UTILS = {
    "gather", "gather_object", "broadcast", "broadcast_object_list", "reduce",
    "pad_across_processes", "wait_for_everyone",
}
_JUMPS = (cst.Return, cst.Continue, cst.Break, cst.Raise)


def is_accelerator_receiver(name: str | None, accelerator_names: tuple[str, ...]) -> bool:
    """`accelerator`, `self.accelerator`, or any name an Accelerator was bound to."""
    if not name:
        return False
    last = name.rsplit(".", 1)[-1]
    return name in accelerator_names or last == "accelerator" or last in {
        n.rsplit(".", 1)[-1] for n in accelerator_names
    }


def accelerator_method(expr: cst.BaseExpression, accelerator_names: tuple[str, ...]) -> str | None:
    """"accumulate" for `accelerator.accumulate(model)`: the method an Accelerator call runs."""
    if not (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)):
        return None
    if not is_accelerator_receiver(dotted_name(expr.func.value), accelerator_names):
        return None
    return expr.func.attr.value


def collective_name(
    call: cst.Call, imports: ImportTable, accelerator_names: tuple[str, ...], prepares_models: bool
) -> str | None:
    """How to show `call` if it is a collective, else None."""
    func = call.func
    if isinstance(func, cst.Attribute):
        receiver = dotted_name(func.value)
        method = func.attr.value
        if is_accelerator_receiver(receiver, accelerator_names):
            if method in ACCELERATOR_COLLECTIVES or (method == "backward" and prepares_models):
                return f"{receiver}.{method}()"
    qualified = imports.qualify(func) or ""
    head, _, last = qualified.rpartition(".")
    if head in {"torch.distributed", "torch.distributed.distributed_c10d"} and last in _DIST_COLLECTIVES:
        return f"{dotted_name(func)}()"
    if head.startswith("accelerate.utils") and last in _ACCELERATE_UTILS:
        return f"{dotted_name(func)}()"
    return None


def _const_ints(node: cst.BaseExpression) -> set[int] | None:
    """0, "0", -1 and tuples/lists/sets of them."""
    if isinstance(node, cst.Integer):
        return {int(node.value)}
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus) and isinstance(node.expression, cst.Integer):
        return {-int(node.expression.value)}
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return {int(value)} if isinstance(value, str) and value.lstrip("-").isdigit() else None
    if isinstance(node, (cst.Tuple, cst.List, cst.Set)):
        out: set[int] = set()
        for el in node.elements:
            inner = _const_ints(el.value)
            if inner is None:
                return None
            out |= inner
        return out
    return None


class ProcessBranches:
    """Answers "who runs this node?" and "which calls are collectives?" for one module."""

    def __init__(
        self, facts: Facts, accelerator_names: tuple[str, ...], parent: Parent, prepares_models: bool,
        rank_names: set[str] = frozenset(), main_calls: frozenset[str] = frozenset(),
        main_flags: frozenset[str] = frozenset(),
    ) -> None:
        """`rank_names`: names known to hold the process's index beyond the usual ones (a
        spawned worker's first parameter, `gpu`); `main_calls`: calls of the project's own
        helpers true on the main process only (`dist.is_primary()`, project/dist_helpers.py);
        `main_flags`: attributes the run's callers set to such a test (`self.save_to_disk`,
        project/main_flags.py)."""
        self._facts = facts
        self._extra_ranks = set(rank_names)
        self._main_calls = main_calls
        self._main_flags = main_flags
        self._imports = facts.imports
        self._accelerators = accelerator_names
        self._parent = parent
        self._aliases = self._rank_aliases()
        self.collectives: tuple[Collective, ...] = tuple(
            Collective(c.node, name)
            for c in facts.calls
            if (name := collective_name(c.node, facts.imports, accelerator_names, prepares_models))
        )
        self._functions_with_collectives: dict[str, str] | None = None

    # -- rank tests -------------------------------------------------------------------------
    def audience_of_test(self, test: cst.BaseExpression) -> Audience | None:
        """MAIN when `test` holds on the main process only, OTHERS when it holds everywhere
        but there, None when it does not depend on the process (or we cannot tell)."""
        if isinstance(test, (cst.Name, cst.Attribute)):
            name = dotted_name(test) or ""
            if name in self._aliases:
                return self._aliases[name]
            if name.rsplit(".", 1)[-1] in _MAIN_FLAGS or name in self._main_flags:
                return Audience.MAIN
            return None
        if isinstance(test, cst.Call):
            called = dotted_name(test.func) or ""
            main = called.rsplit(".", 1)[-1] in _MAIN_FLAGS or called in self._main_calls
            return Audience.MAIN if main and not test.args else None
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            inner = self.audience_of_test(test.expression)
            return inner.negated() if inner else None
        if isinstance(test, cst.BooleanOperation):
            left, right = self.audience_of_test(test.left), self.audience_of_test(test.right)
            if isinstance(test.operator, cst.And):
                return left or right
            return left if left is right else None
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
            return self._comparison(test.left, test.comparisons[0])
        return None

    def _comparison(self, left: cst.BaseExpression, target: cst.ComparisonTarget) -> Audience | None:
        right, op = target.comparator, target.operator
        if self._is_rank(right) and not self._is_rank(left):
            left, right = right, left
            op = {cst.GreaterThan: cst.LessThan(), cst.LessThan: cst.GreaterThan(),
                  cst.GreaterThanEqual: cst.LessThanEqual(), cst.LessThanEqual: cst.GreaterThanEqual()}.get(type(op), op)
        if not self._is_rank(left):
            return None
        values = _const_ints(right)
        if values is None:
            return None
        if isinstance(op, (cst.Equal, cst.Is)) and values == {0}:
            return Audience.MAIN
        if isinstance(op, (cst.NotEqual, cst.IsNot)) and values == {0}:
            return Audience.OTHERS
        if isinstance(op, cst.In) and 0 in values and not any(v > 0 for v in values):
            return Audience.MAIN
        if isinstance(op, cst.NotIn) and 0 in values and not any(v > 0 for v in values):
            return Audience.OTHERS
        if len(values) == 1:
            (value,) = values
            if (isinstance(op, cst.LessThanEqual) and value == 0) or (isinstance(op, cst.LessThan) and value == 1):
                return Audience.MAIN
            if (isinstance(op, cst.GreaterThan) and value == 0) or (isinstance(op, cst.GreaterThanEqual) and value == 1):
                return Audience.OTHERS
        return None

    def _is_rank(self, node: cst.BaseExpression) -> bool:
        """`rank`, `args.local_rank`, `accelerator.process_index`, `dist.get_rank()`,
        `int(os.environ["RANK"])`, `os.environ.get("LOCAL_RANK")`."""
        if isinstance(node, (cst.Name, cst.Attribute)):
            name = dotted_name(node) or ""
            return name in self._rank_vars or name.rsplit(".", 1)[-1] in _RANK_NAMES
        if isinstance(node, cst.Call):
            func = dotted_name(node.func) or ""
            if func == "int" and len(node.args) == 1:
                return self._is_rank(node.args[0].value)
            if func.rsplit(".", 1)[-1] in _RANK_FUNCTIONS:
                return True
            if func.endswith("environ.get") and node.args:
                return _string(node.args[0].value) in _RANK_ENV
            return False
        if isinstance(node, cst.Subscript) and (dotted_name(node.value) or "").endswith("environ"):
            element = node.slice[0].slice if node.slice else None
            return isinstance(element, cst.Index) and _string(element.value) in _RANK_ENV
        return False

    def _rank_aliases(self) -> dict[str, Audience]:
        """`is_main = accelerator.is_main_process` makes `if is_main:` a rank test too, and
        `r = dist.get_rank()` makes `r` a rank."""
        aliases: dict[str, Audience] = {}
        self._aliases, self._rank_vars = aliases, set(self._extra_ranks)
        for b in self._facts.bindings:
            if b.element is None and b.value is not None and isinstance(b.target, (cst.Name, cst.Attribute)):
                if self._is_rank(b.value):
                    self._rank_vars.add(b.name)
                    continue
                audience = self.audience_of_test(b.value)
                if audience is not None:
                    aliases[b.name] = audience
        return aliases

    # -- branches ---------------------------------------------------------------------------
    def branch_of(self, node: cst.CSTNode) -> RankBranch | None:
        """The innermost rank branch around `node` within its function, or None when every
        process runs it."""
        current: cst.CSTNode = node
        while True:
            up = self._parent(current)
            if up is None:
                return None
            if isinstance(up, cst.If) and (current is up.body or current is up.orelse):
                audience = self.audience_of_test(up.test)
                if audience is not None:
                    if current is up.body:
                        return RankBranch(up, _text(up.test), audience)
                    return RankBranch(up, _text(up.test), audience.negated(), "else")
            elif isinstance(up, (cst.IndentedBlock, cst.Module)):
                guarded = self._after_guard(up, current)
                if guarded is not None:
                    return guarded
            elif isinstance(up, cst.FunctionDef):
                for deco in up.decorators:
                    name = dotted_name(deco.decorator) or ""
                    if name.rsplit(".", 1)[-1] in _MAIN_DECORATORS:
                        return RankBranch(up, f"@{name}", Audience.MAIN, "decorator")
                return None
            current = up

    def _after_guard(self, block: cst.CSTNode, statement: cst.CSTNode) -> RankBranch | None:
        """`if not accelerator.is_main_process: return` above `statement` in `block`."""
        for stmt in block.body:  # type: ignore[attr-defined]
            if stmt is statement:
                return None
            if not isinstance(stmt, cst.If) or stmt.orelse is not None or not _ends_in_jump(stmt.body):
                continue
            audience = self.audience_of_test(stmt.test)
            if audience is not None:
                jump = _jump_text(stmt.body)
                return RankBranch(stmt, _text(stmt.test), audience.negated(), "guard", jump)
        return None

    def runs_only_on_main(self, node: cst.CSTNode, depth: int = 0) -> bool:
        """True when `node` runs on the main process only: in a main-process branch, or in a
        function of this file that is called, and only called, from such branches."""
        branch = self.branch_of(node)
        if branch is not None:
            return branch.audience is Audience.MAIN
        if depth > 3:
            return False
        function = self.function_of(node)
        if function is None:
            return False
        calls = self.callers(function)
        return bool(calls) and all(self.runs_only_on_main(c, depth + 1) for c in calls)

    def function_of(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        current = self._parent(node)
        while current is not None and not isinstance(current, cst.FunctionDef):
            current = self._parent(current)
        return current

    def callers(self, function: cst.FunctionDef) -> list[cst.Call]:
        """Calls of `function` in this file (`f(...)`, or `self.f(...)` or `Class.f(...)` for a method, or
        `Train()` for `Train.__init__`: pointer_summarizer's constructor making its folder,
        reader R3, twentieth session; or `cls(...)` in a classmethod of its class)."""
        name = function.name.value
        owner = self._facts.method_of.get(id(function))
        method = owner is not None
        built = owner.name.value if method and name == "__init__" else None
        out = []
        for c in self._facts.calls:
            func = c.node.func
            if not method and isinstance(func, cst.Name) and func.value == name:
                out.append(c.node)
            elif method and c.func is not None and c.func in {f"self.{name}", f"cls.{name}", f"{owner.name.value}.{name}"}:
                out.append(c.node)  # `Trainer.save_to_log(...)`, a staticmethod called through its class
            elif built is not None and isinstance(func, cst.Name) and func.value == built:
                out.append(c.node)
            elif built is not None and isinstance(func, cst.Name) and func.value == "cls" and self._in_class(c.node, owner):
                out.append(c.node)  # `return cls(config)` in a classmethod factory (ConfigParser.from_args)
        return out

    def _in_class(self, node: cst.CSTNode, owner: cst.ClassDef) -> bool:
        function = self.function_of(node)
        return function is not None and self._facts.method_of.get(id(function)) is owner

    # -- collectives reached through a function of this file --------------------------------
    def collective_in_function(self, call: cst.Call) -> str | None:
        """For a call of a function defined here, the first collective it runs (directly or
        through other functions of this file), e.g. "accelerator.gather_for_metrics()"."""
        table = self._collective_functions()
        func = call.func
        if isinstance(func, cst.Name):
            return table.get(func.value)
        name = dotted_name(func) or ""
        head, _, last = name.rpartition(".")
        if head in {"self", "cls"}:
            return table.get(last)
        return None

    def _collective_functions(self) -> dict[str, str]:
        if self._functions_with_collectives is not None:
            return self._functions_with_collectives
        facts = self._facts
        found: dict[str, str] = {}
        by_call = {id(c.call): c.name for c in self.collectives}
        callees: dict[str, set[str]] = {}
        for c in facts.calls:
            if not isinstance(c.scope, cst.FunctionDef):
                continue
            owner = c.scope.name.value
            if id(c.node) in by_call:
                found.setdefault(owner, by_call[id(c.node)])
            func = c.node.func
            if isinstance(func, cst.Name) and func.value in facts.functions:
                callees.setdefault(owner, set()).add(func.value)
            elif c.func and c.func.startswith(("self.", "cls.")) and c.func.count(".") == 1:
                callees.setdefault(owner, set()).add(c.func.split(".")[1])
        changed = True
        while changed:
            changed = False
            for owner, names in callees.items():
                if owner in found:
                    continue
                for name in sorted(names):
                    if name in found:
                        found[owner] = f"{name}() → {found[name]}"
                        changed = True
                        break
        self._functions_with_collectives = found
        return found


def _string(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def _ends_in_jump(body: cst.BaseSuite) -> bool:
    statements = body.body if isinstance(body, cst.IndentedBlock) else [body]
    if not statements:
        return False
    last = statements[-1]
    smalls = last.body if isinstance(last, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) else []
    return bool(smalls) and isinstance(smalls[-1], _JUMPS)


def _jump_text(body: cst.BaseSuite) -> str:
    statements = body.body if isinstance(body, cst.IndentedBlock) else [body]
    last = statements[-1]
    small = last.body[-1]  # type: ignore[attr-defined]
    return {cst.Return: "return", cst.Continue: "continue", cst.Break: "break"}.get(type(small), "raise")


def _text(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node).strip()


__all__ = [
    "Audience", "Collective", "ProcessBranches", "RankBranch",
    "accelerator_method", "collective_name", "is_accelerator_receiver",
]


def accumulate_withs(analysis: "ScriptAnalysis") -> list[cst.With]:
    """`with` statements that enter `accelerator.accumulate(...)`, from the calls."""
    out: list[cst.With] = []
    for fact in analysis.facts.calls:
        if accelerator_method(fact.node, analysis.accelerator_names) != "accumulate":
            continue
        current = analysis.parent(fact.node)
        while isinstance(current, cst.BooleanOperation):
            current = analysis.parent(current)
        if isinstance(current, cst.WithItem):
            with_node = analysis.parent(current)
            if isinstance(with_node, cst.With) and not any(w is with_node for w in out):
                out.append(with_node)
    return out
